#!/usr/bin/env bash
# Mask-time percentiles of `structgen trace`: scripts/mask-latency.sh TOKENIZER GRAMMAR TEXTFILE
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 TOKENIZER GRAMMAR TEXTFILE" >&2; exit 2; }
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
./target/release/structgen trace --tokenizer "$1" --ebnf "$2" --text-file "$3" | python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
us = sorted(l["mask_us"] for l in lines)
def pct(p):
    return us[min(len(us) - 1, int(p / 100 * len(us)))]
done = lines[-1].get("completed")
print("steps %d  completed %s  mask us: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean %.1f"
      % (len(us), done, pct(50), pct(90), pct(99), us[-1], sum(us) / len(us)))
'
