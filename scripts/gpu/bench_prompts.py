"""Turns the shared tool-calling workloads (bench/requests/*.jsonl with bench/tools-pool.json) into
a prompts file for `structgen latency`: per request, its tools (inline, from the pool) and a user
message asking for the request's first reference call by name and arguments, so that a real model
is asked for the very call the workload expects, and the grammar spans the request's 5, 20 or 50
tools.

usage: bench_prompts.py BENCH_DIR FORMAT PER_FILE OUT.jsonl

FORMAT picks the rendering the reference outputs are read from (llama or qwen); the tools and calls
are the same in every format. PER_FILE requests are taken from the top of each of the six files of
that format (static/dynamic × 5/20/50 tools).
"""

import json
import pathlib
import re
import sys


def first_call(fmt: str, output: str) -> tuple[str, object]:
    if fmt == "llama":
        m = re.search(r"<function=([^>]+)>(.*?)</function>", output, re.S)
        if not m:
            raise ValueError(f"no <function=...> call in {output!r}")
        return m.group(1), json.loads(m.group(2))
    m = re.search(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", output, re.S)
    if not m:
        raise ValueError(f"no <tool_call> in {output!r}")
    call = json.loads(m.group(1))
    return call["name"], call["arguments"]


def main() -> None:
    bench, fmt, per_file, out = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    pool = {t["function"]["name"]: t for t in json.loads((bench / "tools-pool.json").read_text())}
    lines = []
    for setting in ("static", "dynamic"):
        for n in (5, 20, 50):
            path = bench / "requests" / f"{fmt}-{setting}-{n}.jsonl"
            with path.open() as f:
                for k, line in zip(range(per_file), f):
                    req = json.loads(line)
                    name, args = first_call(fmt, req["output"])
                    prompt = (f"Call {name} with these arguments: "
                              f"{json.dumps(args, ensure_ascii=False)}")
                    lines.append({"id": req["id"], "tools": [pool[t] for t in req["tools"]],
                                  "prompt": prompt})
    with open(out, "w") as f:
        for l in lines:
            f.write(json.dumps(l, ensure_ascii=False) + "\n")
    print(f"{out}: {len(lines)} requests from {bench}/requests/{fmt}-*", file=sys.stderr)


if __name__ == "__main__":
    main()
