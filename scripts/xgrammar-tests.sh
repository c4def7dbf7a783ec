#!/usr/bin/env bash
# Runs xgrammar's own Python test files against the structgen package imported as `xgrammar`
# (crates/python/xgrammar_compat/conftest.py does the aliasing and the deselection; the test files
# are used unchanged). Tests listed in crates/python/xgrammar_compat/deselect.txt, tests whose
# parametrization asks for a device this machine lacks (CUDA, MLX) and tests that fail reaching
# for the Hugging Face hub are reported as deselected with their reason.
#
# Usage: scripts/xgrammar-tests.sh [DIR]   (default ../shared/xgrammar-tests; every test_*.py)
# The virtual environment ($XGRAMMAR_TESTS_VENV, default target/xgrammar-venv) is created with
# pytest, torch, transformers, pydantic and numpy from PyPI when missing; the wheel is rebuilt
# (scripts/python-wheel.sh) when a source is newer, and installed into it.
# Prints one line per file (with the printed-EBNF comparisons that conftest.py skipped inside
# tests that also check behaviour) and a final `N passed, N failed` line; exits 1 when a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=$(cd "${1:-../shared/xgrammar-tests}" && pwd)
venv=${XGRAMMAR_TESTS_VENV:-target/xgrammar-venv}
py=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
  echo "xgrammar-tests: creating $venv (pytest, torch, transformers, pydantic, numpy from PyPI)" >&2
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet pytest numpy pydantic transformers torch
fi

venv=$(cd "$venv" && pwd)

wheel=$(ls -t target/wheels/structgen-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ] || [ -n "$(find crates/engine/src crates/engine/Cargo.toml crates/python -newer "$wheel" -type f \
      -not -path '*/__pycache__/*' -not -path 'crates/python/xgrammar_compat/*' -not -path 'crates/python/tests/*' | head -1)" ]; then
  scripts/python-wheel.sh >&2
  wheel=$(ls -t target/wheels/structgen-*.whl | head -1)
fi
"$venv/bin/pip" install --quiet --force-reinstall --no-deps "$wheel"

logs=target/xgrammar-tests
mkdir -p "$logs"
report="$root/$logs/report.jsonl"
rm -f "$report"
shopt -s nullglob
files=("$dir"/test_*.py)
[ ${#files[@]} -gt 0 ] || { echo "xgrammar-tests: no test_*.py in $dir" >&2; exit 2; }
for f in "${files[@]}"; do
  (cd "$dir" && PYTHONPATH="$root/crates/python/xgrammar_compat" XGRAMMAR_TESTS_REPORT="$report" \
    "$venv/bin/python" -m pytest -q -p conftest -p no:cacheprovider \
    "$(basename "$f")" > "$root/$logs/$(basename "$f" .py).log" 2>&1) || true
done
"$venv/bin/python" - "$report" "$logs" "${files[@]}" <<'PY'
import json, os, sys
rows = {}
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    acc = rows.setdefault(r["file"], {"passed": 0, "failed": 0, "deselected": 0, "reasons": {}, "failures": [], "printed_skipped": 0})
    for k in ("passed", "failed", "deselected", "printed_skipped"):
        acc[k] += r.get(k, 0)
    for k, v in r["reasons"].items():
        acc["reasons"][k] = acc["reasons"].get(k, 0) + v
    acc["failures"] += r["failures"]
tp = tf = td = 0
for path in sys.argv[3:]:
    name = os.path.basename(path)
    r = rows.get(name)
    if r is None:
        print(f"{name}: did not run (see {sys.argv[2]}/{name[:-3]}.log)")
        tf += 1
        continue
    why = ", ".join(f"{k} {v}" for k, v in sorted(r["reasons"].items()))
    printed = f"; {r['printed_skipped']} printed-EBNF comparisons skipped" if r["printed_skipped"] else ""
    print(f"{name}: {r['passed']} passed, {r['failed']} failed, {r['deselected']} deselected" + (f" ({why})" if why else "") + printed)
    for n in r["failures"][:50]:
        print(f"    FAILED {n}")
    tp += r["passed"]; tf += r["failed"]; td += r["deselected"]
rate = 100.0 * tp / (tp + tf) if tp + tf else 0.0
print(f"{tp} passed, {tf} failed ({rate:.1f}% of the selected tests pass), {td} deselected")
sys.exit(1 if tf else 0)
PY
