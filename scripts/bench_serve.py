#!/usr/bin/env python3
"""Load generator of scripts/bench-serve.sh: BFCL-style tool requests against an OpenAI-compatible
server, streamed so that time to first token is seen; every tool call is parsed as the `openai`
client gives it and validated against its tool's JSON Schema.

Usage: bench_serve.py --url URL --model NAME --concurrency C --requests N --label L --out FILE.jsonl
Appends one JSON line per run: requests/s, output tok/s, TTFT p50/p99, calls, malformed calls.
"""
import argparse
import asyncio
import json
import os
import re
import statistics
import time
import zlib

import jsonschema
import openai

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CATEGORIES = ["simple_python", "multiple", "parallel", "live_multiple", "parallel_multiple"]
ATTEMPT = re.compile(r'<tool_call>|<function=|"name"\s*:\s*"[^"]+"\s*,\s*"(arguments|parameters)"')
TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def schema_of(p):
    """A BFCL parameter description as JSON Schema (BFCL's types mapped, `any` unconstrained)."""
    if not isinstance(p, dict):
        return {}
    out = {}
    for k, v in p.items():
        if k == "type":
            t = TYPES.get(v, v)
            if t is not None:
                out["type"] = t
        elif k == "properties":
            out["properties"] = {n: schema_of(s) for n, s in v.items()}
        elif k == "items":
            out["items"] = schema_of(v)
        elif k in ("required", "enum", "description"):
            out[k] = v
    return out


def workload():
    reqs = []
    for cat in CATEGORIES:
        path = os.path.join(ROOT, "data", "bfcl", f"BFCL_v4_{cat}.json")
        with open(path) as f:
            cases = [json.loads(line) for line in f if line.strip()]
        for c in cases[:40]:
            tools = [{"type": "function", "function": {
                "name": fn["name"].replace(".", "_"), "description": fn.get("description", ""),
                "parameters": schema_of(fn["parameters"])}} for fn in c["function"]]
            reqs.append({"messages": c["question"][0], "tools": tools})
    # Interleave categories so that every run sees several tool lists.
    reqs.sort(key=lambda r: zlib.crc32(json.dumps(r["messages"]).encode()))
    return reqs


def check(calls, tools):
    """How many calls are malformed: unknown name, arguments not a JSON object, or invalid."""
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    bad = []
    for c in calls:
        try:
            args = json.loads(c["arguments"])
            if c["name"] not in by_name:
                raise ValueError(f"unknown tool {c['name']}")
            if not isinstance(args, dict):
                raise ValueError("arguments are not an object")
            jsonschema.validate(args, by_name[c["name"]])
        except Exception as e:  # noqa: BLE001 - every failure is a malformed call
            bad.append(f"{c['name']}: {str(e)[:160]}")
    return bad


async def one(client, model, req, max_tokens):
    t0 = time.perf_counter()
    first = None
    calls, tokens, content = {}, 0, ""
    stream = await client.chat.completions.create(
        model=model, messages=req["messages"], tools=req["tools"], tool_choice="auto",
        temperature=0, max_tokens=max_tokens, stream=True, stream_options={"include_usage": True})
    async for chunk in stream:
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
        for ch in chunk.choices:
            d = ch.delta
            if first is None and (d.content or d.tool_calls):
                first = time.perf_counter() - t0
            content += d.content or ""
            for tc in d.tool_calls or []:
                slot = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                if tc.function and tc.function.name:
                    slot["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
    calls = [calls[k] for k in sorted(calls)]
    bad = check(calls, req["tools"])
    # A call the model wrote that the server did not return as a call (left in the content) is a
    # malformed call too: the agent gets no call.
    if ATTEMPT.search(content):
        bad.append(f"call left in the content: {content[:160]!r}")
    return {"ttft": first if first is not None else time.perf_counter() - t0, "tokens": tokens,
            "calls": len(calls), "bad": bad, "s": time.perf_counter() - t0}


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


async def run(args):
    client = openai.AsyncOpenAI(base_url=args.url, api_key="none", max_retries=0, timeout=3600)
    reqs = workload()[: args.requests]
    queue = list(enumerate(reqs))
    results = []

    async def worker():
        while queue:
            i, r = queue.pop(0)
            try:
                results.append(await one(client, args.model, r, args.max_tokens))
            except Exception as e:  # noqa: BLE001 - a failed request is counted, not fatal
                results.append({"error": str(e)[:300]})

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    wall = time.perf_counter() - t0
    ok = [r for r in results if "error" not in r]
    ttft = [r["ttft"] for r in ok]
    out = {
        "label": args.label, "concurrency": args.concurrency, "requests": len(reqs),
        "errors": len(results) - len(ok), "wall_s": round(wall, 2),
        "requests_per_s": round(len(ok) / wall, 3),
        "output_tok_per_s": round(sum(r["tokens"] for r in ok) / wall, 2),
        "ttft_p50_s": round(pct(ttft, 0.5), 3) if ttft else None,
        "ttft_p99_s": round(pct(ttft, 0.99), 3) if ttft else None,
        "calls": sum(r["calls"] for r in ok),
        "malformed_calls": sum(len(r["bad"]) for r in ok),
        "malformed_examples": [b for r in ok for b in r["bad"]][:5],
        "error_examples": [r["error"] for r in results if "error" in r][:3],
        "mean_request_s": round(statistics.mean(r["s"] for r in ok), 2) if ok else None,
    }
    with open(args.out, "a") as f:
        f.write(json.dumps(out) + "\n")
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
