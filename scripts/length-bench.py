#!/usr/bin/env python3
"""JSON Schema length bounds against the same schemas without them: what `minLength` /
`maxLength` (alone, beside a pattern or a format) and `minItems` / `maxItems` cost per mask.

  scripts/length-bench.py [--bin target/release/structgen] [--tokenizer FILE] [--out DIR]

For each case a bounded schema, its unbounded twin and one valid value near the bounds:
1. `structgen trace` over the value, twice per schema, each a fresh process (cold masks):
   masks summed, p50, p90, max; and the ratio bounded / unbounded;
2. `structgen bench --engine both` on all cases (structgen and llguidance in the same run,
   each value twice so the second meets warm caches): compile p50, mask mean / p50 / p99.
"""

import argparse
import json
import os
import random
import subprocess
import sys

WORDS = ("the quick brown fox jumps over lazy dog and then runs away into forest near river "
         "bank while birds sing songs").split()


def words(n, rng):
    """A lowercase text of exactly `n` characters."""
    s = ""
    while len(s) < n:
        s += rng.choice(WORDS) + " "
    return s[:n - 1] + "x"


def cases(rng):
    """(name, bounded schema, unbounded schema, value)."""
    out = []
    a, b = words(144, rng), words(146, rng)
    obj = lambda props: {"type": "object", "properties": props, "required": list(props),
                         "additionalProperties": False}
    out.append(("issue: maxLength 200 + pattern/maxLength 300",
                obj({"a": {"type": "string", "maxLength": 200},
                     "b": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 300}}),
                obj({"a": {"type": "string"}, "b": {"type": "string", "pattern": "^[a-z ]+$"}}),
                {"a": a, "b": b}))
    out.append(("maxLength 64, value of 63",
                obj({"s": {"type": "string", "maxLength": 64}}), obj({"s": {"type": "string"}}),
                {"s": words(63, rng)}))
    out.append(("minLength 20 maxLength 40, value of 40",
                obj({"s": {"type": "string", "minLength": 20, "maxLength": 40}}),
                obj({"s": {"type": "string"}}), {"s": words(40, rng)}))
    out.append(("pattern + maxLength 100, value of 99",
                obj({"s": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 100}}),
                obj({"s": {"type": "string", "pattern": "^[a-z ]+$"}}), {"s": words(99, rng)}))
    out.append(("maxLength 100000 (a file's content), value of 300",
                obj({"content": {"type": "string", "maxLength": 100000}}),
                obj({"content": {"type": "string"}}), {"content": words(300, rng)}))
    out.append(("format email + maxLength 64",
                obj({"e": {"type": "string", "format": "email", "maxLength": 64}}),
                obj({"e": {"type": "string", "format": "email"}}),
                {"e": "someone.with.a.long.name@example.com"}))
    out.append(("array of strings: maxLength 12, minItems 2 maxItems 6",
                obj({"l": {"type": "array", "minItems": 2, "maxItems": 6,
                           "items": {"type": "string", "maxLength": 12}}}),
                obj({"l": {"type": "array", "items": {"type": "string"}}}),
                {"l": [words(11, rng) for _ in range(6)]}))
    return out


def trace(binary, tokenizer, schema_file, text_file):
    cmd = [binary, "trace", "--tokenizer", tokenizer, "--json-schema", schema_file,
           "--text-file", text_file]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    steps = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    if not steps or not steps[-1].get("completed"):
        sys.exit(f"{' '.join(cmd)}: the value was not accepted to the end")
    return [s["mask_us"] for s in steps if "mask_us" in s]


def stats(v):
    s = sorted(v)
    q = lambda p: s[min(len(s) - 1, int(p * len(s)))]
    return sum(v) / 1000, q(0.5), q(0.9), s[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/structgen")
    ap.add_argument("--tokenizer", default="../shared/tokenizers/llama3.tokenizer.json")
    ap.add_argument("--out", default="bench-results/lengths")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(3)
    rows = []
    for kind in ("bounded", "unbounded"):
        os.makedirs(os.path.join(args.out, kind), exist_ok=True)
    lines = {"bounded": [], "unbounded": []}
    print(f"{'case':52} {'':9} {'sum ms':>7} {'p50 µs':>7} {'p90 µs':>7} {'max µs':>7}")
    for i, (name, bounded, unbounded, value) in enumerate(cases(rng)):
        text_file = os.path.join(args.out, f"case{i}.json")
        with open(text_file, "w") as f:
            f.write(json.dumps(value))
        got = {}
        for kind, schema in (("bounded", bounded), ("unbounded", unbounded)):
            schema_file = os.path.join(args.out, f"case{i}-{kind}.schema.json")
            with open(schema_file, "w") as f:
                json.dump(schema, f)
            runs = [stats(trace(args.bin, args.tokenizer, schema_file, text_file)) for _ in range(2)]
            got[kind] = runs
            for r in runs:
                print(f"{name[:52]:52} {kind:9} {r[0]:7.2f} {r[1]:7.1f} {r[2]:7.1f} {r[3]:7.0f}")
            for _ in range(2):
                lines[kind].append(json.dumps({"id": f"case{i}", "schema": schema, "valid": [value],
                                               "invalid": [], "invalid_format_only": []}))
        b, u = got["bounded"], got["unbounded"]
        mid = lambda runs, k: sorted(r[k] for r in runs)[len(runs) // 2]
        rows.append((name, mid(b, 0) / mid(u, 0), mid(b, 2) / max(mid(u, 2), 1e-9)))
    print("\nbounded / unbounded (fresh process, cold masks): masks summed, p90")
    for name, total, p90 in rows:
        print(f"  {name[:60]:60} total {total:5.2f}×  p90 {p90:5.2f}×")
    for kind in lines:
        with open(os.path.join(args.out, kind, "lengths.jsonl"), "w") as f:
            f.write("\n".join(lines[kind]) + "\n")
    print("\nstructgen bench --engine both (each value twice: the second warm)")
    for kind in lines:
        cmd = [args.bin, "bench", "--tokenizer", args.tokenizer, "--jsonschema",
               os.path.join(args.out, kind), "--engine", "both"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        print(f"-- {kind}: {' '.join(cmd)}")
        print(done.stdout.strip() or done.stderr[-2000:])


if __name__ == "__main__":
    main()
