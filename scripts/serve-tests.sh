#!/usr/bin/env bash
# `structgen serve` against real clients: the official `openai` SDK (tool-call round trips,
# tool_choice, streaming, json_schema, an agent loop, a 32 × 4 load test) and raw HTTP fault cases,
# on SmolLM2-135M (named explicitly). Installs openai, httpx, jsonschema and pytest into
# target/serve-venv (scripts/serve-venv.sh); builds the release binary if needed, or tests STRUCTGEN_BIN when it is set
# (scripts/test.sh passes the binary `cargo test` built: a plain `cargo build` after it would
# compile every crate again, without the test build's dev-dependency features).
# Usage: [STRUCTGEN_BIN=PATH] scripts/serve-tests.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh smollm2-135m
if [ -z "${STRUCTGEN_BIN:-}" ]; then
  cargo build --release --locked --quiet
elif [ ! -x "$STRUCTGEN_BIN" ]; then
  echo "serve-tests.sh: STRUCTGEN_BIN=$STRUCTGEN_BIN is not an executable" >&2
  exit 2
fi
python=$(scripts/serve-venv.sh)
exec "$python" -m pytest -q -p no:cacheprovider tests/serve "$@"
