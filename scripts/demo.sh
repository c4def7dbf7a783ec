#!/usr/bin/env bash
# The main job on the default model: fetch SmolLM2-135M-Instruct (GGUF) if missing, build, and trace
# an assistant answer (a sentence, then a tool call) token by token under the grammar built from
# grammars/tools/weather.json in the Hermes/Qwen call style, with the model's own vocabulary: per-step
# mask size, mask time and jump-forward strings. Free text is open until `<tool_call>` starts a call;
# from there only a valid call of a listed tool is allowed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo build --release --locked --quiet
text=$'Let me check the weather.\n<tool_call>\n{"name": "get_weather", "arguments": {"location": "Zürich", "unit": "celsius"}}\n</tool_call>'
echo "tracing: $text" >&2
./target/release/structgen trace \
  --tokenizer models/SmolLM2-135M-Instruct.Q4_1.gguf \
  --tools grammars/tools/weather.json --style qwen \
  --text "$text"
