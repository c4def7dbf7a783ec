#!/usr/bin/env bash
# Makes target/serve-venv, the clients scripts/serve-tests.sh drives `structgen serve` with:
# openai, httpx, jsonschema and pytest from PyPI. Prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
venv=target/serve-venv
if ! "$venv/bin/python" -c "import openai, httpx, jsonschema, pytest" 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check openai httpx jsonschema pytest
fi
echo "$venv/bin/python"
