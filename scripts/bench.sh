#!/usr/bin/env bash
# The full benchmark of issue 6: structgen vs llguidance (same process, one thread) on the 18
# workload files with both tokenizers, JSONSchemaBench, and the ablation table.
# Usage: scripts/bench.sh [OUT_DIR]   (needs ../shared beside the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench-results}"
shared=../shared
[ -d "$shared/bench" ] || { echo "error: $shared/bench not found (run beside ../shared)" >&2; exit 2; }
mkdir -p "$out"
cargo build --release --locked --features llguidance --quiet
bin=./target/release/structgen
for tok in llama3:128009 smollm2-135m:2; do
  name=${tok%%:*}; stop=${tok##*:}
  "$bin" bench --engine both --tokenizer "$shared/tokenizers/$name.tokenizer.json" --stop-token "$stop" \
    --requests "$shared"/bench/requests/*.jsonl --json "$out/$name.json" | tee "$out/$name.txt"
done
"$bin" bench --engine both --tokenizer "$shared/tokenizers/llama3.tokenizer.json" --stop-token 128009 \
  --jsonschema "$shared/jsonschema" --ablation --json "$out/jsonschema.json" | tee "$out/jsonschema.txt"
