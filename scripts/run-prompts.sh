#!/usr/bin/env bash
# Runs every prompt of grammars/prompts.jsonl (21 requests over grammars/tools) three ways with the
# default model — constrained with jump-forward, constrained without, unconstrained — and prints
# per-mode medians: mask p50 as % of forward p50, forward passes saved, tokens/s, calls that parse
# and validate. Extra arguments go to every `structgen run` (e.g. --model, --device, --tool-choice).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo build --release --locked --quiet
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
i=0
while IFS= read -r line; do
  tools=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tools"])' "$line")
  prompt=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["prompt"])' "$line")
  for mode in jf nojf free; do
    flags=(--tool-choice required --no-parallel-calls)
    case $mode in
      nojf) flags+=(--no-jump-forward) ;;
      free) flags=(--unconstrained) ;;
    esac
    ./target/release/structgen run --tools "grammars/$tools" --prompt "$prompt" \
      --max-tokens 96 --json "${flags[@]}" "$@" > "$out/$i.$mode.json" 2>/dev/null
  done
  echo "prompt $i done" >&2
  i=$((i + 1))
done < grammars/prompts.jsonl
python3 - "$out" "$i" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
try:
    import jsonschema
except ImportError:
    jsonschema = None
reqs = [json.loads(l) for l in open("grammars/prompts.jsonl")]
def valid(k, call):
    if jsonschema is None:
        return True
    tools = json.load(open(f"grammars/{reqs[k]['tools']}"))
    schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == call["function"]["name"])
    return jsonschema.Draft202012Validator(schema).is_valid(json.loads(call["function"]["arguments"]))
for mode in ["jf", "nojf", "free"]:
    runs = [json.load(open(f"{out}/{k}.{mode}.json")) for k in range(n)]
    all_calls = [(k, c) for k, r in enumerate(runs) for c in r["tool_calls"]]
    print(f"{mode:5} stopped by: " + ", ".join(f"{why} {sum(r['summary']['stop_reason'] == why for r in runs)}"
          for why in ["grammar", "stop token", "max tokens"])
          + f"; calls {len(all_calls)}, schema-valid {sum(valid(k, c) for k, c in all_calls)}"
          + ("" if jsonschema else " (python jsonschema missing: not checked)"))
    s = [r["summary"] for r in runs]
    med = lambda key: statistics.median(x[key] for x in s)
    ratio = statistics.median(x["mask_us_p50"] / 1e3 / x["forward_ms_p50"] * 100 for x in s)
    calls = sum(len(r["tool_calls"]) > 0 for r in runs)
    print(f"{mode:5} runs {n}  calls {calls}/{n}  tokens {sum(x['tokens_generated'] for x in s)}  "
          f"passes {sum(x['forward_passes'] for x in s)}  saved {sum(x['forward_passes_saved'] for x in s)}  "
          f"forced {sum(x['tokens_forced'] for x in s)}  rolled back {sum(x['tokens_rolled_back'] for x in s)}  "
          f"mask p50 {med('mask_us_p50'):.1f} us = {ratio:.2f}% of forward p50 {med('forward_ms_p50'):.2f} ms  "
          f"overhead {med('grammar_overhead_pct'):.2f}%  gen {med('generation_tokens_per_s'):.1f} tok/s")
jf = [json.load(open(f"{out}/{k}.jf.json"))["text"] for k in range(n)]
nojf = [json.load(open(f"{out}/{k}.nojf.json"))["text"] for k in range(n)]
print(f"answers that differ with and without jump-forward: {sum(a != b for a, b in zip(jf, nojf))}/{n}")
PY
