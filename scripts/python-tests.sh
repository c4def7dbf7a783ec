#!/usr/bin/env bash
# Builds the Python wheel (scripts/python-wheel.sh), installs it into target/python-venv
# (scripts/python-venv.sh: numpy, pydantic, pytest, tokenizers and torch from PyPI), replacing any
# structgen installed there before, and runs crates/python/tests.
# Usage: scripts/python-tests.sh [pytest arguments]   (needs ../shared beside the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/python-wheel.sh >/dev/null
wheel=$(ls -t target/wheels/structgen-*.whl | head -1)
python=$(scripts/python-venv.sh)
"$python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
# The wheel's declared dependencies (numpy, pydantic) are met by what the environment has.
"$python" -m pip check --disable-pip-version-check >/dev/null
cd crates/python/tests
exec "../../../$python" -m pytest -q -p no:cacheprovider "$@"
