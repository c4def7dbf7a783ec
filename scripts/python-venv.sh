#!/usr/bin/env bash
# Makes target/python-venv, the environment the Python package's tests run in: pytest, numpy,
# pydantic, tokenizers and torch from PyPI (torch is PyPI's Linux wheel with its CUDA libraries,
# ~5 GB installed: PyPI has no CPU-only one, and the torch tensor paths must run, not be skipped).
# Kept when it already has them all, so a second run downloads nothing; scripts/python-tests.sh
# installs the freshly built structgen wheel into it. Prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
venv=target/python-venv
if ! "$venv/bin/python" -c "import pytest, numpy, pydantic, tokenizers, torch" 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check pytest numpy pydantic tokenizers torch
fi
echo "$venv/bin/python"
