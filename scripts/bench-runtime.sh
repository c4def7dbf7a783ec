#!/usr/bin/env bash
# The model runtime side by side with llama.cpp, same GGUF files, same thread count, one run:
#
#   scripts/bench-runtime.sh [THREADS]      THREADS: default 2
#
# For each model of models/manifest.toml whose file is downloaded: llama.cpp's `llama-bench`
# (pp256 and tg64, built from the llama-cpp-python sdist on PyPI by scripts/build-llama-bench.sh
# when missing), `structgen speed` (the same two tests on our kernels), and structgen's
# constrained generation of a tool call with and without jump-forward (`structgen run`, tokens
# generated per second of decoding), and for qwen2.5-coder-1.5b with qwen2.5-coder-0.5b drafting
# (`--draft-model`, when both are downloaded). Then many sequences at once: llama.cpp's
# `llama-batched-bench` and `structgen speed --batch` (the same measurement: B sequences with
# prompts of their own, 128 tokens each, prefilled together, then 32 one-token passes of all B),
# aggregate generation tok/s at B = 1, 2, 4, 8, 16. Prints two Markdown tables; the raw results go
# to bench-results/runtime-*.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
threads="${1:-2}"
reps=3
bin="$(scripts/build-llama-bench.sh)"
cargo build --release --locked -q
sg="$root/target/release/structgen"
out="$root/bench-results"
mkdir -p "$out"
tools="$root/bench-results/runtime-tools.json"
cat >"$tools" <<'JSON'
[{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
  "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "City name"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
   "required": ["city", "unit"]}}}]
JSON
prompt="What is the weather in Paris, in celsius? Also tell me about Lyon."

rows=()
for name in smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do
  file="$(python3 - "$name" <<'PY'
import sys, tomllib
m = tomllib.load(open("models/manifest.toml", "rb"))["models"].get(sys.argv[1], {})
print(m.get("path", ""))
PY
)"
  [ -n "$file" ] && [ -s "models/$file" ] || { echo "skipping $name: models/$file is not downloaded" >&2; continue; }
  echo "== $name: llama-bench" >&2
  "$bin/llama-bench" -m "models/$file" -t "$threads" -p 256 -n 64 -r "$reps" -o json \
    >"$out/runtime-$name-llama.json" 2>/dev/null
  echo "== $name: structgen speed" >&2
  "$sg" speed --model "$name" --threads "$threads" -p 256 -n 64 -r "$reps" --json \
    >"$out/runtime-$name-structgen.json" 2>/dev/null
  for jf in on off; do
    flag=""
    [ "$jf" = off ] && flag="--no-jump-forward"
    "$sg" run --model "$name" --threads "$threads" --tools "$tools" --tool-choice required \
      --prompt "$prompt" --max-tokens 64 --json $flag \
      >"$out/runtime-$name-run-jf-$jf.json" 2>/dev/null
  done
  if [ "$name" = qwen2.5-coder-1.5b ] && [ -s models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf ]; then
    "$sg" run --model "$name" --threads "$threads" --tools "$tools" --tool-choice required \
      --prompt "$prompt" --max-tokens 64 --json --draft-model qwen2.5-coder-0.5b \
      >"$out/runtime-$name-run-draft.json" 2>/dev/null
  fi
  echo "== $name: llama-batched-bench and structgen speed --batch" >&2
  "$bin/llama-batched-bench" -m "models/$file" -t "$threads" -c 4096 -b 2048 -ub 512 \
    -npp 128 -ntg 32 -npl 1,2,4,8,16 --output-format jsonl \
    >"$out/runtime-$name-llama-batched.jsonl" 2>/dev/null
  "$sg" speed --model "$name" --threads "$threads" -p 128 -n 32 -r "$reps" --batch 1,2,4,8,16 --json \
    >"$out/runtime-$name-structgen-batched.json" 2>/dev/null
  rows+=("$name")
done

python3 - "$out" "$threads" "${rows[@]}" <<'PY'
import json, sys
out, threads, names = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"\n{threads} threads; tok/s, median of 3 runs (structgen run: one request)\n")
print("| model | llama.cpp pp256 | structgen pp256 | ratio | llama.cpp tg64 | structgen tg64 | ratio "
      "| constrained tool call, tok/s | + jump-forward | + draft model (accepted) |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for n in names:
    llama = {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in json.load(open(f"{out}/runtime-{n}-llama.json"))}
    ours = {t["test"][:2]: t["tokens_per_s"] for t in json.load(open(f"{out}/runtime-{n}-structgen.json"))["tests"]}
    def run(tag):
        s = json.load(open(f"{out}/runtime-{n}-run-{tag}.json"))["summary"]
        return s["tokens_generated"], s["decode_ms"], s.get("speculation")
    (n_off, ms_off, _), (n_on, ms_on, _) = run("jf-off"), run("jf-on")
    draft = "–"
    try:
        n_d, ms_d, spec = run("draft")
        draft = f"{1000 * n_d / ms_d:.1f} ({spec['accepted']}/{spec['drafted']})"
    except FileNotFoundError:
        pass
    print(f"| {n} | {llama['pp']:.1f} | {ours['pp']:.1f} | {ours['pp'] / llama['pp']:.2f}× "
          f"| {llama['tg']:.1f} | {ours['tg']:.1f} | {ours['tg'] / llama['tg']:.2f}× "
          f"| {1000 * n_off / ms_off:.1f} | {1000 * n_on / ms_on:.1f} | {draft} |")
PY

python3 - "$out" "$threads" "${rows[@]}" <<'PY'
import json, sys
out, threads, names = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"\n{threads} threads; B sequences, prompts of 128 tokens, 32 generated each; aggregate "
      "generation tok/s (llama-batched-bench S_TG; structgen speed --batch, median of 3)\n")
sizes = [1, 2, 4, 8, 16]
print("| model | " + " | ".join(f"B={b} llama.cpp / structgen (ratio)" for b in sizes) + " |")
print("|---|" + "--:|" * len(sizes))
for n in names:
    llama = {}
    for line in open(f"{out}/runtime-{n}-llama-batched.jsonl"):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            llama[r["pl"]] = r["speed_tg"]
    ours = {r["batch"]: r["tg_tokens_per_s"] for r in json.load(open(f"{out}/runtime-{n}-structgen-batched.json"))["batched"]}
    cells = []
    for b in sizes:
        l, o = llama.get(b), ours.get(b)
        cells.append(f"{l:.1f} / {o:.1f} ({o / l:.2f}×)" if l and o else "–")
    print(f"| {n} | " + " | ".join(cells) + " |")
PY
