#!/usr/bin/env bash
# Fetches the BFCL data (questions and possible answers) into data/bfcl/ if it is missing.
# Source: the PyPI wheel bfcl-eval==2026.3.23, whose bfcl_eval/data folder holds them; the wheel's
# SHA-256 is checked. `structgen bfcl` reads data/bfcl by default (--data DIR for another copy).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="2026.3.23"
sha="3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
dest="$root/data/bfcl"

if [ -s "$dest/BFCL_v4_simple_python.json" ] && [ -d "$dest/possible_answer" ]; then
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetching BFCL data (bfcl-eval==$version from PyPI, ~2 MB)" >&2
python3 -m pip download --no-deps --quiet --disable-pip-version-check "bfcl-eval==$version" -d "$tmp"
python3 - "$tmp" "$dest" "$sha" <<'PY'
import glob, hashlib, os, shutil, sys, zipfile
tmp, dest, sha = sys.argv[1:]
wheels = glob.glob(f"{tmp}/*.whl")
if len(wheels) != 1:
    sys.exit(f"expected one wheel in {tmp}, found {wheels}")
with open(wheels[0], "rb") as f:
    got = hashlib.sha256(f.read()).hexdigest()
if got != sha:
    sys.exit(f"{wheels[0]}: SHA-256 {got} does not match the expected {sha}")
part = dest + ".part"
shutil.rmtree(part, ignore_errors=True)
prefix = "bfcl_eval/data/"
with zipfile.ZipFile(wheels[0]) as z:
    for name in z.namelist():
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        if rel.startswith("unused_datasets/"):
            continue
        out = os.path.join(part, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(z.read(name))
shutil.rmtree(dest, ignore_errors=True)
os.makedirs(os.path.dirname(dest), exist_ok=True)
os.rename(part, dest)
PY
echo "saved $dest" >&2
