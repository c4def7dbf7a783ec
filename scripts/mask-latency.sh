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
pct = lambda p: us[min(len(us) - 1, int(p / 100 * len(us)))]
end = lines[-1]
print(f"steps {len(us)}  completed {end.get(\"completed\")}  mask us: p50 {pct(50):.1f}  p90 {pct(90):.1f}  "
      f"p99 {pct(99):.1f}  max {us[-1]:.1f}  mean {sum(us) / len(us):.1f}")
'
