#!/usr/bin/env python3
"""Runs `structgen bench` with two binaries (before and after a change) on the same inputs, one
after the other per input so that machine drift hits both alike, and prints one row per input:
accepted requests or instances, the mask-pool counters (which must match for a refactoring), and
compile p50 / mask mean of each with their ratio (after / before).

  scripts/bench-before-after.py OLD_BIN NEW_BIN [--tokenizer FILE] [--requests F.jsonl ...]
                                [--jsonschema DIR] [--out DIR]

Defaults: the Llama 3 tokenizer and every workload of ../shared/bench/requests, plus
../shared/jsonschema. Exits 1 when counts or pool counters differ.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile


def run(binary, args, out):
    cmd = [binary, "bench", *args, "--json", out]
    if os.path.exists(out):
        os.remove(out)
    done = subprocess.run(cmd, capture_output=True, text=True)
    # Exit status 1 with results written: some requests failed, which the counts show.
    if done.returncode != 0 and not (done.returncode == 1 and os.path.exists(out)):
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    with open(out) as f:
        return json.load(f)


def rows(result):
    """(workload, summary, cache) of every structgen row."""
    out = []
    for block in result:
        for row in block["rows"]:
            if row["engine"] == "structgen":
                out.append((block["workload"], row["summary"], row.get("cache", "")))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.path.join(here, "..", "..", "shared")
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--tokenizer", default=os.path.join(shared, "tokenizers", "llama3.tokenizer.json"))
    p.add_argument("--requests", nargs="*")
    p.add_argument("--jsonschema", default=os.path.join(shared, "jsonschema"))
    p.add_argument("--out", default=None, help="keep the JSON results here")
    a = p.parse_args()
    requests = a.requests
    if requests is None:
        requests = sorted(glob.glob(os.path.join(shared, "bench", "requests", "*.jsonl")))
    inputs = [["--requests", r] for r in requests]
    if a.jsonschema:
        inputs.append(["--jsonschema", a.jsonschema])
    out_dir = a.out or tempfile.mkdtemp(prefix="bench-before-after-")
    os.makedirs(out_dir, exist_ok=True)
    print(f"{'input':28} {'ok before':>10} {'ok after':>9} {'pool':>6} "
          f"{'compile p50 ms':>22} {'ratio':>6} {'mask mean µs':>20} {'ratio':>6}")
    differ = 0
    for i, inp in enumerate(inputs):
        common = ["--tokenizer", a.tokenizer, *inp]
        old = rows(run(a.old, common, os.path.join(out_dir, f"{i:02}-before.json")))
        new = rows(run(a.new, common, os.path.join(out_dir, f"{i:02}-after.json")))
        for (name, so, co), (_, sn, cn) in zip(old, new):
            same = (so["ok"], so["tokens"], co) == (sn["ok"], sn["tokens"], cn)
            differ += not same
            cr = sn["compile_p50_ms"] / so["compile_p50_ms"] if so["compile_p50_ms"] else float("nan")
            mr = sn["mask_mean_us"] / so["mask_mean_us"] if so["mask_mean_us"] else float("nan")
            print(f"{os.path.basename(name)[:28]:28} {so['ok']:>5}/{so['requests']:<4} "
                  f"{sn['ok']:>4}/{sn['requests']:<4} {'same' if same else 'DIFF':>6} "
                  f"{so['compile_p50_ms']:>10.3f} {sn['compile_p50_ms']:>10.3f} {cr:>6.2f} "
                  f"{so['mask_mean_us']:>9.2f} {sn['mask_mean_us']:>9.2f} {mr:>6.2f}", flush=True)
            if not same:
                print(f"  before: {so['ok']} ok, {so['tokens']} tokens; {co}\n"
                      f"  after:  {sn['ok']} ok, {sn['tokens']} tokens; {cn}")
    print(f"results in {out_dir}; {differ} input(s) with different counts or pool counters")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
