#!/usr/bin/env bash
# Makes target/serve-venv, the clients scripts/serve-tests.sh drives `structgen serve` with:
# openai, httpx, jsonschema and pytest from PyPI. Prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/venv.sh target/serve-venv "openai, httpx, jsonschema, pytest" \
  openai httpx jsonschema pytest
