#!/usr/bin/env bash
# `structgen serve` against real clients: the official `openai` SDK (tool-call round trips,
# tool_choice, streaming, json_schema, an agent loop, a 32 × 4 load test) and raw HTTP fault cases,
# on SmolLM2-135M (named explicitly). Installs openai, httpx, jsonschema and pytest into
# target/serve-venv; builds the release binary if needed.
# Usage: scripts/serve-tests.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
scripts/fetch-models.sh smollm2-135m
cargo build --release --locked --quiet
venv=target/serve-venv
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet openai httpx jsonschema pytest
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/serve "$@"
