#!/usr/bin/env bash
# Makes target/python-venv, the environment the Python package's tests run in: pytest, numpy,
# pydantic, tokenizers, transformers (for structgen.contrib.hf) and torch from PyPI (torch is PyPI's Linux wheel with its CUDA libraries,
# ~5 GB installed: PyPI has no CPU-only one, and the torch tensor paths must run, not be skipped).
# Kept while it has them all; scripts/python-tests.sh installs the freshly built structgen wheel
# into it. Prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/venv.sh target/python-venv "pytest, numpy, pydantic, tokenizers, transformers, torch" \
  pytest numpy pydantic tokenizers transformers torch
