#!/usr/bin/env python3
"""`--verify-masks` over the Llama tool workloads with their calls triggered by a special token:
each request's tags are rewritten so that `<|python_tag|>` (a token of its own) begins a call
(`token_triggered_tags`: begin `{"type": "token"}`, then the call as the workload writes it, then
"\n"), and the request's expected output, with that token before each of its calls, is stepped
token by token. At
every step the mask must allow the next token, and `verify_next_token_bitmask` tries SAMPLE random
allowed and SAMPLE random refused tokens with `accept_token` on copies (an exception on a
disagreement); at every EVERYth step the whole mask is also compared with every id tried on a fork.

  scripts/token-dispatch-verify.py [--requests F.jsonl ...] [--limit N] [--sample S] [--every K]

Needs the structgen wheel installed in the interpreter that runs it (scripts/xgrammar-tests.sh
leaves one in target/xgrammar-venv) and ../shared (the workloads, the Llama 3 tokenizer).
Prints per workload: requests, tokens verified, tokens tried, full masks compared, disagreements.
"""

import argparse
import glob
import json
import os
import re
import sys

import numpy as np
import structgen as sg
from tokenizers import Tokenizer

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared")
TOKENIZER = os.path.join(SHARED, "tokenizers", "llama3.tokenizer.json")
PYTHON_TAG = "<|python_tag|>"


def token_triggered(fmt, trigger):
    """The workload's triggered_tags with each call begun by the trigger token instead."""
    if fmt.get("type") != "triggered_tags":
        raise ValueError(f"expected a triggered_tags format, found {fmt.get('type')!r}")
    tags = []
    for tag in fmt["tags"]:
        content = {"type": "sequence", "elements": [
            {"type": "const_string", "value": tag["begin"]}, tag["content"],
            {"type": "const_string", "value": tag["end"]}]}
        tags.append({"type": "tag", "begin": {"type": "token", "token": trigger},
                     "content": content, "end": "\n"})
    return {"type": "structural_tag", "format": {
        "type": "token_triggered_tags", "trigger_tokens": [trigger], "tags": tags}}


def full_mask_equal(matcher, size, words):
    """The engine's mask equals every id tried with accept_token on a fork."""
    mask = np.zeros((1, words), dtype=np.int32)
    matcher.fill_next_token_bitmask(mask)
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:size]
    fork = matcher.fork()
    for t in range(size):
        ok = fork.accept_token(t)
        if ok:
            fork.rollback(1)
        if bool(bits[t]) != ok:
            return t
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", nargs="*")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--sample", type=int, default=32)
    ap.add_argument("--every", type=int, default=25)
    args = ap.parse_args()
    files = args.requests or sorted(glob.glob(os.path.join(SHARED, "bench", "requests", "llama-*.jsonl")))
    info = sg.TokenizerInfo.from_tokenizer_json(TOKENIZER)
    tok = Tokenizer.from_file(TOKENIZER)
    trigger = tok.token_to_id(PYTHON_TAG)
    compiler = sg.GrammarCompiler(info)
    size, words = info.vocab_size, (info.vocab_size + 31) // 32
    total_bad = 0
    for path in files:
        reqs = [json.loads(line) for line in open(path, encoding="utf-8")][: args.limit]
        steps = tried = full = bad = 0
        for r in reqs:
            tag = token_triggered(r["structural_tag"]["format"], trigger)
            m = sg.GrammarMatcher(compiler.compile_structural_tag(tag))
            ids = []
            # Each call of the expected output, begun by the trigger token and ended by "\n".
            for k, part in enumerate(re.split(r"(<function=[^>]*>.*?</function>)", r["output"], flags=re.S)):
                if k % 2:
                    ids.append(trigger)
                    part += "\n"
                if part:
                    ids += tok.encode(part, add_special_tokens=False).ids
            ids.append(m.stop_token_ids[0])
            for k, t in enumerate(ids):
                try:
                    tried += m.verify_next_token_bitmask(sample=args.sample, seed=k)
                except RuntimeError as e:
                    bad += 1
                    print(f"{r['id']} step {k}: {e}", file=sys.stderr)
                if k % args.every == 0:
                    full += 1
                    wrong = full_mask_equal(m, size, words)
                    if wrong is not None:
                        bad += 1
                        print(f"{r['id']} step {k}: full mask differs at token {wrong}", file=sys.stderr)
                if not m.accept_token(t):
                    bad += 1
                    print(f"{r['id']} step {k}: token {t} refused", file=sys.stderr)
                    break
                steps += 1
            if not m.is_terminated():
                bad += 1
                print(f"{r['id']}: not terminated after the stop token", file=sys.stderr)
        total_bad += bad
        print(f"{os.path.basename(path)}: {len(reqs)} requests, {steps} tokens verified, "
              f"{tried} tokens tried, {full} full masks compared, {bad} disagreements")
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
