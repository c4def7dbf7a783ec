#!/usr/bin/env bash
# Makes target/bfcl-venv: a Python virtual environment with the bfcl-eval wheel from PyPI, for
# `structgen bfcl --bfcl-python target/bfcl-venv/bin/python` (the multi-turn backends, BFCL's
# checkers and its model handlers' decoders) and scripts/bfcl-judge.sh. The wheel is installed
# with --no-deps: its dependency list pulls every hosted model's SDK, while the parts used here
# need only the few packages below (at the versions bfcl-eval pins; numpy and rank_bm25 for the
# memory key-value backend's search, pandas for the judge's run of bfcl-eval's leaderboard
# summary). Prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
version="2026.3.23"
venv=target/bfcl-venv
want="bfcl-eval==$version mpmath==1.3.0 filelock==3.20.0 tenacity overrides requests numpy==1.26.4 rank_bm25==0.2.2 pandas==2.2.3"
if ! "$venv/bin/python" -c "import bfcl_eval, mpmath, filelock, tenacity, overrides, requests, numpy, rank_bm25, pandas" 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps $want \
    urllib3 idna certifi charset-normalizer python-dateutil six pytz tzdata
fi
echo "$venv/bin/python"
