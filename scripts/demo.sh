#!/usr/bin/env bash
# The main job on the default model: fetch SmolLM2-135M-Instruct (Q4_1 GGUF) if missing, build in
# release, and let the model answer a question that needs a tool, under the grammar built from
# grammars/tools/weather.json (Hermes-style calls): the live per-token table (sampled or forced by
# jump-forward, mask / apply / forward / sample time, rollbacks), the answer, the parsed OpenAI
# tool_calls and the timing summary. `--tool-choice required --no-parallel-calls`: a 135M model
# rarely decides to call a tool on its own, so the grammar makes the answer one call, after which the
# turn ends (as an agent would then run the tool); extra arguments are passed on (e.g.
# `scripts/demo.sh --no-jump-forward`, `--tool-choice auto`, `--device cuda`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo build --release --locked --quiet
./target/release/structgen run \
  --tools grammars/tools/weather.json \
  --prompt "What's the weather like in Paris right now? Use celsius." \
  --tool-choice required --no-parallel-calls --max-tokens 96 -v "$@"
