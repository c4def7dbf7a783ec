#!/usr/bin/env bash
# `structgen serve` against real clients: the official `openai` SDK (tool-call round trips,
# tool_choice, streaming, json_schema, an agent loop, a 32 × 4 load test) and raw HTTP fault cases,
# on SmolLM2-135M (named explicitly). Installs openai, httpx, jsonschema and pytest into
# target/serve-venv; builds the release binary if needed, or tests STRUCTGEN_BIN when it is set
# (scripts/test.sh passes the binary `cargo test` built: a plain `cargo build` after it would
# compile every crate again, without the test build's dev-dependency features).
# Usage: [STRUCTGEN_BIN=PATH] scripts/serve-tests.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
scripts/fetch-models.sh smollm2-135m
if [ -z "${STRUCTGEN_BIN:-}" ]; then
  cargo build --release --locked --quiet
elif [ ! -x "$STRUCTGEN_BIN" ]; then
  echo "serve-tests.sh: STRUCTGEN_BIN=$STRUCTGEN_BIN is not an executable" >&2
  exit 2
fi
venv=target/serve-venv
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet openai httpx jsonschema pytest
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/serve "$@"
