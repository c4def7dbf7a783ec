#!/usr/bin/env bash
# Builds the Python wheel (scripts/python-wheel.sh), installs it into a fresh virtual environment
# (target/python-venv: numpy, pydantic, pytest, tokenizers and torch from PyPI) and runs
# crates/python/tests. torch is PyPI's Linux wheel (with its CUDA libraries, ~5 GB installed):
# PyPI has no CPU-only one, and the torch tensor paths (the SGLang backend's masks, the CPU
# kernel on torch logits) must run here, not be skipped.
# Usage: scripts/python-tests.sh [pytest arguments]   (needs ../shared beside the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
scripts/python-wheel.sh >/dev/null
wheel=$(ls -t target/wheels/structgen-*.whl | head -1)
venv=target/python-venv
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install --quiet pytest numpy pydantic tokenizers torch
"$venv/bin/pip" install --quiet "$wheel"
cd crates/python/tests
exec "../../../$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
