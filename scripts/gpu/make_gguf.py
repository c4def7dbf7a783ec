"""Writes a random-weight GGUF file of a real architecture (quantized like a downloaded GGUF), with
the tokenizer files beside it, for latency runs of the quantized CUDA path where real weights
cannot be downloaded.

usage: make_gguf.py CONFIG.json TOKENIZER_DIR OUT_DIR [--type q8_0|q4_0|q4_1|q5_0|q5_1] [--seed N]

OUT_DIR gets model.gguf (llama.cpp's tensor names and metadata keys for llama / qwen2; the 2-D
weights quantized with the gguf package's reference quantizers, norms in f32) and the
tokenizer.json / tokenizer_config.json of TOKENIZER_DIR, which structgen uses instead of GGUF
tokenizer metadata. Weights are normal(0, initializer_range) as in make_checkpoint.py. Llama 3's
RoPE frequency factors (rope_freqs.weight) are not written: they change the values, not the work.
Needs numpy and the gguf package (pure Python; carry its wheel where it is not installed).
"""

import argparse
import pathlib
import shutil
import sys
import time

import numpy as np

import gguf

import shapes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config", type=pathlib.Path)
    ap.add_argument("tokenizer", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--type", default="q8_0", choices=["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    shape = shapes.read(args.config, ("llama", "qwen2"), args.tokenizer)
    cfg, arch = shape.config, shape.kind
    qtype = getattr(gguf.GGMLQuantizationType, args.type.upper())
    h, layers, nh, nkv, hd = shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.head_dim
    ffn, vocab, std = shape.ffn, shape.vocab, shape.std
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(args.out / "model.gguf.part"), arch)
    w.add_block_count(layers)
    w.add_context_length(cfg.get("max_position_embeddings", 4096))
    w.add_embedding_length(h)
    w.add_feed_forward_length(ffn)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_rope_dimension_count(hd)

    def weight(name: str, rows: int, cols: int) -> None:
        x = (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def vector(name: str, n: int, ones: bool) -> None:
        x = np.ones(n, np.float32) if ones else (rng.standard_normal(n, dtype=np.float32) * std)
        w.add_tensor(name, x.astype(np.float32))

    weight("token_embd.weight", vocab, h)
    vector("output_norm.weight", h, True)
    if not shape.tied:
        weight("output.weight", vocab, h)
    for i in range(layers):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", h, True)
        vector(p + "ffn_norm.weight", h, True)
        weight(p + "attn_q.weight", nh * hd, h)
        weight(p + "attn_k.weight", nkv * hd, h)
        weight(p + "attn_v.weight", nkv * hd, h)
        weight(p + "attn_output.weight", h, nh * hd)
        if arch == "qwen2":
            vector(p + "attn_q.bias", nh * hd, False)
            vector(p + "attn_k.bias", nkv * hd, False)
            vector(p + "attn_v.bias", nkv * hd, False)
        weight(p + "ffn_gate.weight", ffn, h)
        weight(p + "ffn_up.weight", ffn, h)
        weight(p + "ffn_down.weight", h, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (args.out / "model.gguf.part").rename(args.out / "model.gguf")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(args.tokenizer / f, args.out / f)
    print(f"{args.out}/model.gguf: {arch} {args.type}, {layers} layers, random (seed {args.seed}) "
          f"in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
