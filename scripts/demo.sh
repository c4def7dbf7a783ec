#!/usr/bin/env bash
# The main job on the default model: fetch SmolLM2-135M-Instruct (GGUF) if missing, build, and trace
# a tool call's JSON arguments token by token under grammars/get_weather_call.ebnf with the model's own
# vocabulary, printing per-step mask size, mask time and jump-forward strings.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo build --release --locked --quiet
text='{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius", "days": 3}}'
echo "tracing: $text" >&2
./target/release/structgen trace \
  --tokenizer models/SmolLM2-135M-Instruct.Q4_1.gguf \
  --ebnf grammars/get_weather_call.ebnf \
  --text "$text"
