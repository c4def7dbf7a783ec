#!/usr/bin/env bash
# The BFCL runs of a closing report: for each model, every AST category (40 cases each, drawn with
# seed 1) and every multi-turn category (20 each), constrained and free on the same cases, read by
# structgen's reader and by BFCL's decoder for the model's family, scored by BFCL's checkers.
#
#   scripts/bfcl-report.sh [OUT_DIR] [MODEL...]   default: bench-results/bfcl-report, the 1.5B and 0.5B
#
# Each step writes OUT_DIR/MODEL-PART.json as cases finish and resumes from it when run again, so
# an interrupted report loses at most the cases in flight. The table of each step goes beside it
# (.table), and the wall time of each invocation is appended to OUT_DIR/times.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench-results/bfcl-report}"
shift || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(qwen2.5-coder-1.5b qwen2.5-coder-0.5b)
mkdir -p "$out"
[ -x target/release/structgen ] || cargo build --release --locked --bin structgen
[ -d data/bfcl ] || scripts/fetch-bfcl.sh
[ -x target/bfcl-venv/bin/python ] || scripts/bfcl-venv.sh
ast=simple_python,simple_java,simple_javascript,multiple,parallel,parallel_multiple,live_simple,live_multiple,live_parallel,live_parallel_multiple,irrelevance,live_irrelevance,live_relevance
multi=multi_turn_base,multi_turn_miss_func,multi_turn_miss_param,multi_turn_long_context
step() {
  local model=$1 part=$2 categories=$3 limit=$4
  local file="$out/$model-$part.json"
  local resume=()
  [ -s "$file" ] && resume=(--resume "$file")
  local start
  start=$(date +%s)
  target/release/structgen bfcl --model "$model" --categories "$categories" --limit "$limit" \
    --shuffle --seed 1 --mode both --parallel 4 --bfcl-python target/bfcl-venv/bin/python \
    --out "$file" "${resume[@]}" >"$out/$model-$part.table" 2>"$out/$model-$part.log"
  echo "$model-$part $(($(date +%s) - start)) s $(date -u +%FT%TZ)" >>"$out/times"
}
for model in "${models[@]}"; do
  step "$model" ast "$ast" 40
  step "$model" multi-turn "$multi" 20
done
