#!/usr/bin/env bash
# structgen serve and llama.cpp's llama-server (same llama-cpp-python sdist as bench-runtime.sh,
# `--jinja`, `-np N`), side by side on the same GGUF and the same BFCL tool requests (several tool
# lists, `tool_choice: auto`, greedy, streamed): requests/s, output tok/s and time to first token
# p50/p99 at each concurrency, and the calls whose arguments are malformed or violate their schema
# as the `openai` client reads them. Each server is started with as many slots as the concurrency.
#
#   scripts/bench-serve.sh [MODEL] [CONCURRENCY...]      default: qwen2.5-coder-0.5b 1 4 8 16
#   env: THREADS (2), REQUESTS per run (16), MAX_TOKENS (128), OUT (target/bench-serve.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-qwen2.5-coder-0.5b}"
shift || true
levels=("${@:-1 4 8 16}")
read -r -a levels <<<"${levels[*]}"
threads="${THREADS:-2}"
requests="${REQUESTS:-16}"
max_tokens="${MAX_TOKENS:-128}"
out="${OUT:-target/bench-serve.jsonl}"
scripts/fetch-models.sh "$model"
scripts/fetch-bfcl.sh
gguf="models/$(sed -n "/^\[models.\"\{0,1\}$model\"\{0,1\}\]/,/^\[/p" models/manifest.toml | sed -n 's/^path = "\(.*\)"/\1/p' | head -1)"
[ -f "$gguf" ] || { echo "bench-serve.sh: no GGUF file for $model ($gguf)" >&2; exit 2; }
cargo build --release --locked --quiet
bin="$(scripts/build-llama-bench.sh)"
venv=target/serve-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet openai jsonschema
port=18931
wait_up() {
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "bench-serve.sh: server on $port did not come up" >&2
  return 1
}
run_load() { # label concurrency
  "$venv/bin/python" scripts/bench_serve.py --url "http://127.0.0.1:$port/v1" --model "$model" \
    --concurrency "$2" --requests "$requests" --max-tokens "$max_tokens" --label "$1" --out "$out"
}
: >"$out"
for c in "${levels[@]}"; do
  ./target/release/structgen serve --model "$model" --threads "$threads" --parallel "$c" \
    --port "$port" 2>target/bench-serve-structgen.log &
  pid=$!
  wait_up && run_load structgen "$c"
  kill -TERM "$pid"; wait "$pid" || true
  "$bin/llama-server" -m "$gguf" --jinja -np "$c" -c $((4096 * c)) -t "$threads" --alias "$model" \
    --host 127.0.0.1 --port "$port" >target/bench-serve-llama.log 2>&1 &
  pid=$!
  wait_up && run_load llama-server "$c"
  kill -TERM "$pid"; wait "$pid" || true
done
"$venv/bin/python" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["label"], r["concurrency"]): r for r in rows}
print(f"{'conc':>4} | {'structgen req/s':>15} {'tok/s':>7} {'ttft p50/p99 s':>15} {'bad':>5} | "
      f"{'llama-server req/s':>18} {'tok/s':>7} {'ttft p50/p99 s':>15} {'bad':>5} | tok/s ratio")
for c in sorted({r["concurrency"] for r in rows}):
    s, l = by.get(("structgen", c)), by.get(("llama-server", c))
    if not s or not l:
        continue
    f = lambda r: (f"{r['requests_per_s']:>15.3f} {r['output_tok_per_s']:>7.1f} "
                   f"{r['ttft_p50_s']:>7.2f}/{r['ttft_p99_s']:<7.2f} {r['malformed_calls']:>2}/{r['calls']:<2}")
    ratio = s["output_tok_per_s"] / l["output_tok_per_s"] if l["output_tok_per_s"] else float("nan")
    print(f"{c:>4} | {f(s)} | {f(l):>45} | {ratio:.2f}x")
PY
