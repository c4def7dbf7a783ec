"""Writes a random-weight safetensors checkpoint of a real architecture, for latency runs where the
real weights cannot be downloaded: same shapes, so the same kernels run for the same time.

usage: make_checkpoint.py CONFIG.json TOKENIZER_DIR OUT_DIR [--seed N]

CONFIG.json is a published config.json (models/configs/); TOKENIZER_DIR holds tokenizer.json and
tokenizer_config.json (scripts/gpu/prepare.sh). Weights are drawn as Transformers initializes
them: normal(0, initializer_range) for projections and embeddings, ones for norm weights, and
small normal biases where the architecture has them (Qwen2's q/k/v); stored in the config's
torch_dtype. Tensor names follow Transformers' Llama/Qwen2/Qwen3 layout. Needs torch and
safetensors; uses the GPU to draw when there is one.
"""

import argparse
import pathlib
import shutil
import sys
import time

import torch
from safetensors.torch import save_file

import shapes

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config", type=pathlib.Path)
    ap.add_argument("tokenizer", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    shape = shapes.read(args.config, ("llama", "qwen2", "qwen3"), args.tokenizer)
    cfg, kind = shape.config, shape.kind
    h, layers, nh, nkv, hd = shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.head_dim
    ffn, vocab, std = shape.ffn, shape.vocab, shape.std
    dtype = DTYPES[cfg.get("torch_dtype", "bfloat16")]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    t0 = time.time()

    def normal(*dims: int) -> torch.Tensor:
        x = torch.randn(*dims, generator=gen, device=dev, dtype=torch.float32) * std
        return x.to(dtype).cpu().contiguous()

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n, dtype=dtype)

    t = {"model.embed_tokens.weight": normal(vocab, h), "model.norm.weight": ones(h)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = ones(h)
        t[p + "post_attention_layernorm.weight"] = ones(h)
        t[p + "self_attn.q_proj.weight"] = normal(nh * hd, h)
        t[p + "self_attn.k_proj.weight"] = normal(nkv * hd, h)
        t[p + "self_attn.v_proj.weight"] = normal(nkv * hd, h)
        t[p + "self_attn.o_proj.weight"] = normal(h, nh * hd)
        if kind == "qwen2":
            t[p + "self_attn.q_proj.bias"] = normal(nh * hd)
            t[p + "self_attn.k_proj.bias"] = normal(nkv * hd)
            t[p + "self_attn.v_proj.bias"] = normal(nkv * hd)
        if kind == "qwen3":
            t[p + "self_attn.q_norm.weight"] = ones(hd)
            t[p + "self_attn.k_norm.weight"] = ones(hd)
        t[p + "mlp.gate_proj.weight"] = normal(ffn, h)
        t[p + "mlp.up_proj.weight"] = normal(ffn, h)
        t[p + "mlp.down_proj.weight"] = normal(h, ffn)
    if not shape.tied:
        t["lm_head.weight"] = normal(vocab, h)
    args.out.mkdir(parents=True, exist_ok=True)
    save_file(t, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    shutil.copyfile(args.config, args.out / "config.json")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(args.tokenizer / f, args.out / f)
    params = sum(x.numel() for x in t.values())
    print(f"{args.out}: {params / 1e9:.2f}B random parameters ({cfg.get('torch_dtype')}, seed "
          f"{args.seed}) in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
