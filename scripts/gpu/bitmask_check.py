#!/usr/bin/env python3
"""Checks and times the structgen package's masks on a CUDA device, the way a serving engine uses
them: fill a mask on the CPU, copy it to the GPU, apply it to the logits there.

    python3 scripts/gpu/bitmask_check.py TOKENIZER_JSON [--xgrammar]

The CUDA C++ kernel is built (or loaded from torch's cache) first, and the time it took printed.
1. Exactness: `apply_token_bitmask_inplace` on CUDA logits (float32, float16, bfloat16; whole
   batch and `indices`; a vocabulary wider than the mask) against a reference built on the CPU
   bit by bit; with `--xgrammar`, also against xgrammar's own CUDA kernels on the same inputs.
2. A serving loop on the GPU: a Llama 3 style tool call, masks filled by a matcher into pinned
   memory, copied to the device, applied to random logits, the argmax accepted by the matcher
   (every chosen token must be accepted: the mask on the device is the matcher's).
3. Time per call of `apply_token_bitmask_inplace` on the device (CUDA events around each call,
   Python included, since an engine calls it once per step), p50 and p99 per batch size, for
   each of structgen's GPU backends, beside xgrammar's when `--xgrammar` is given.
Prints one JSON object per result line; exits 1 when a check fails.
"""

import argparse
import functools
import json
import statistics
import sys
import time

import numpy as np
import torch

import structgen as sg
from structgen.kernels import apply_token_bitmask_inplace_cuda as cuda_kernel

VOCAB = 128256
# structgen's GPU kernels: the default (the CUDA C++ one once built), CUDA C++, Triton, torch operations.
BACKENDS = ("auto", "cuda", "triton", "torch_native")


def engines(xgr):
    """(name, apply function) for each kernel compared."""
    out = [(f"structgen-{b}", functools.partial(sg.apply_token_bitmask_inplace, backend=b)) for b in BACKENDS]
    if xgr:
        out.append(("xgrammar", xgr.apply_token_bitmask_inplace))
    return out


def reference(logits, bitmask, vocab_size, indices):
    """Expected logits, computed on the CPU one bit at a time (NumPy, independent of torch's
    bit operations)."""
    out = logits.detach().float().cpu().numpy().copy()
    bits = bitmask.cpu().numpy().view(np.uint32)
    rows = range(out.shape[0]) if indices is None else indices
    for r in rows:
        unpacked = ((bits[r][:, None] >> np.arange(32, dtype=np.uint32)) & 1).reshape(-1)[:vocab_size]
        out[r, :vocab_size][unpacked == 0] = -np.inf
    return torch.from_numpy(out)


def check_exact(xgr, results):
    ok = True
    gen = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for batch, width, indices in ((1, VOCAB, None), (16, VOCAB, None), (16, VOCAB, [0, 3, 15]),
                                      (4, VOCAB + 1000, None)):
            logits = torch.randn(batch, width, generator=gen).to(dtype)
            words = (VOCAB + 31) // 32
            bitmask = torch.randint(-(2**31), 2**31 - 1, (batch, words), generator=gen, dtype=torch.int32)
            want = reference(logits, bitmask, VOCAB, indices)
            for name, fn in engines(xgr):
                got = logits.clone().cuda()
                fn(got, bitmask.cuda(), vocab_size=VOCAB, indices=indices)
                torch.cuda.synchronize()
                same = torch.equal(got.float().cpu(), want)
                ok &= same
                results.append({"check": "exact", "engine": name, "dtype": str(dtype), "batch": batch,
                                "width": width, "indices": indices, "equal": same})
    return ok


def serving_loop(info, results):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}}]
    compiled = sg.GrammarCompiler(info).compile_tools(tools, "llama", tool_choice="required")
    matcher = sg.GrammarMatcher(compiled)
    host = torch.zeros(sg.get_bitmask_shape(1, info.vocab_size), dtype=torch.int32).pin_memory()
    gen = torch.Generator(device="cuda").manual_seed(11)
    steps = refused = 0
    while not matcher.is_terminated() and steps < 300:
        matcher.fill_next_token_bitmask(host)
        logits = torch.randn(1, info.vocab_size, device="cuda", generator=gen, dtype=torch.bfloat16)
        # Random logits wander inside strings forever: lean towards the stop token and quotes.
        logits[0, 128009] += 3.0
        sg.apply_token_bitmask_inplace(logits, host.to("cuda", non_blocking=True))
        token = int(torch.argmax(logits[0]).item())
        if not matcher.accept_token(token):
            refused += 1
            break
        steps += 1
    results.append({"check": "serving_loop", "steps": steps, "terminated": matcher.is_terminated(),
                    "refused_argmax": refused})
    return refused == 0 and steps > 0


def timing(xgr, results):
    words = (VOCAB + 31) // 32
    for batch in (1, 16, 64, 256):
        logits = torch.randn(batch, VOCAB, device="cuda", dtype=torch.bfloat16)
        bitmask = torch.randint(-(2**31), 2**31 - 1, (batch, words), device="cuda", dtype=torch.int32)
        for name, fn in engines(xgr):
            for _ in range(20):
                fn(logits, bitmask)
            times = []
            for _ in range(300):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(logits, bitmask)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1000.0)
            times.sort()
            results.append({"check": "time", "engine": name, "batch": batch, "dtype": "bfloat16",
                            "p50_us": round(statistics.median(times), 1),
                            "p99_us": round(times[int(len(times) * 0.99) - 1], 1)})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tokenizer")
    ap.add_argument("--xgrammar", action="store_true", help="compare with xgrammar's package")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bitmask_check: torch sees no CUDA device")
    xgr = None
    if args.xgrammar:
        import xgrammar as xgr  # noqa: PLC0415
    info = sg.TokenizerInfo.from_tokenizer_json(args.tokenizer)
    # Built here, before anything is timed, so that "auto" means the CUDA kernel throughout
    # (it would use the Triton kernel while its build runs on a thread of its own).
    start = time.monotonic()
    cuda_kernel._load()
    results = [{"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "xgrammar": getattr(xgr, "__version__", None) if xgr else None,
                "cuda_kernel_build_or_load_s": round(time.monotonic() - start, 1)}]
    cuda_kernel.ready()
    ok = check_exact(xgr, results)
    ok &= serving_loop(info, results)
    timing(xgr, results)
    for r in results:
        print(json.dumps(r))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
