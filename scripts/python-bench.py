#!/usr/bin/env python3
"""Mask-fill latency through Python on a workload file (`../shared/bench/requests/*.jsonl`):
per request, compile its structural tag, then fill a mask before every token of its reference
output (tokenized with the `tokenizers` package) and accept the token. Runs the `structgen`
package, or xgrammar's (`--engine xgrammar`, the same API), so the two can be compared on the
same file, in the same way, one after the other.

Usage: python scripts/python-bench.py FILE.jsonl --tokenizer TOKENIZER.json --stop-token ID
       [--engine structgen|xgrammar] [--limit N]
Prints compile p50 (ms) and mask mean / p50 / p99 (µs) over all steps.
"""

import argparse
import json
import statistics
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--stop-token", type=int, required=True)
    ap.add_argument("--engine", choices=["structgen", "xgrammar"], default="structgen")
    ap.add_argument("--limit", type=int)
    args = ap.parse_args()
    if args.engine == "structgen":
        import structgen as xgr
    else:
        import xgrammar as xgr
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    with open(args.tokenizer, encoding="utf-8") as f:
        text = f.read()
    vocab = tok.get_vocab_size(True)
    encoded = [""] * vocab
    for piece, i in tok.get_vocab(True).items():
        encoded[i] = piece
    special = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    encoded = [("" if p in special else p) for p in encoded]
    info = xgr.TokenizerInfo(encoded, xgr.VocabType.BYTE_LEVEL, vocab_size=vocab, stop_token_ids=[args.stop_token])
    compiler = xgr.GrammarCompiler(info)
    compile_ms, mask_us, failures = [], [], 0
    bitmask = np.zeros((1, (vocab + 31) // 32), dtype=np.int32)
    with open(args.file, encoding="utf-8") as f:
        lines = [json.loads(l) for l in f if l.strip()]
    for req in lines[: args.limit]:
        t0 = time.perf_counter()
        compiled = compiler.compile_structural_tag(json.dumps(req["structural_tag"]))
        compile_ms.append((time.perf_counter() - t0) * 1e3)
        matcher = xgr.GrammarMatcher(compiled)
        ids = tok.encode(req["output"], add_special_tokens=False).ids + [args.stop_token]
        for t in ids:
            t0 = time.perf_counter()
            matcher.fill_next_token_bitmask(bitmask)
            mask_us.append((time.perf_counter() - t0) * 1e6)
            if not matcher.accept_token(t):
                failures += 1
                break
    mask_us.sort()
    p99 = mask_us[min(len(mask_us) - 1, int(0.99 * len(mask_us)))]
    print(
        f"{args.engine}: {len(compile_ms)} requests, {len(mask_us)} masks, {failures} refused; "
        f"compile p50 {statistics.median(compile_ms):.3f} ms; mask mean {statistics.fmean(mask_us):.2f} us, "
        f"p50 {statistics.median(mask_us):.2f} us, p99 {p99:.1f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
