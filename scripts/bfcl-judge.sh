#!/usr/bin/env bash
# BFCL's own checker as the judge of a `structgen bfcl --out` results file: installs the
# bfcl-eval wheel from PyPI (--no-deps: the AST checker needs only the standard library once its
# model-config import is replaced, see scripts/bfcl_judge.py) into target/bfcl-venv and reports
# every case where its verdict and ours differ (exit status 1 if any).
#
#   scripts/bfcl-judge.sh RESULTS.json [--data DIR]
#   scripts/bfcl-judge.sh --ground-truth      every category's ground truth, judged
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
version="2026.3.23"
venv=target/bfcl-venv
if ! "$venv/bin/python" -c "import bfcl_eval" 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-deps "bfcl-eval==$version"
fi
if [ "${1:-}" = --ground-truth ]; then
  scripts/fetch-bfcl.sh
  if [ -z "${STRUCTGEN_BIN:-}" ]; then
    cargo build --release --locked --quiet
  fi
  bin=${STRUCTGEN_BIN:-target/release/structgen}
  out=target/bfcl-ground-truth.json
  "$bin" bfcl --mode ground-truth --out "$out" >/dev/null
  set -- "$out"
fi
exec "$venv/bin/python" scripts/bfcl_judge.py "$@"
