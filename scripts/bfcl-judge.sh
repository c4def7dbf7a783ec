#!/usr/bin/env bash
# BFCL's own checker as the judge of a `structgen bfcl --out` results file: installs the
# bfcl-eval wheel from PyPI into target/bfcl-venv (scripts/bfcl-venv.sh) and reports every case
# where its verdict and ours differ (exit status 1 if any).
#
#   scripts/bfcl-judge.sh RESULTS.json [--data DIR]
#   scripts/bfcl-judge.sh --ground-truth      every category's ground truth, judged
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/bfcl-venv.sh)
if [ "${1:-}" = --ground-truth ]; then
  scripts/fetch-bfcl.sh
  if [ -z "${STRUCTGEN_BIN:-}" ]; then
    cargo build --release --locked --quiet
  fi
  bin=${STRUCTGEN_BIN:-target/release/structgen}
  out=target/bfcl-ground-truth.json
  "$bin" bfcl --mode ground-truth --bfcl-python "$python" --out "$out" >/dev/null
  set -- "$out"
fi
exec "$python" scripts/bfcl_judge.py "$@"
