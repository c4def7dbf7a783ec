"""The shape of a published config.json, read once for make_checkpoint.py and make_gguf.py."""

import json
import pathlib
import sys
from dataclasses import dataclass


@dataclass
class Shape:
    """What a random-weight model of a config needs: sizes, initializer scale, tie flag."""

    config: dict
    kind: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    std: float
    tied: bool


def read(path: pathlib.Path, kinds: tuple[str, ...], tokenizer: pathlib.Path) -> Shape:
    """The shape of config `path`; exits with a message when its model_type is not one of
    `kinds` or `tokenizer` lacks tokenizer.json / tokenizer_config.json."""
    cfg = json.loads(path.read_text())
    kind = cfg.get("model_type")
    if kind not in kinds:
        sys.exit(f"{path}: model_type {kind!r} is not one of {', '.join(kinds)}")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if not (tokenizer / f).is_file():
            sys.exit(f"{tokenizer}: {f} is missing")
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    return Shape(
        config=cfg,
        kind=kind,
        hidden=h,
        layers=cfg["num_hidden_layers"],
        heads=nh,
        kv_heads=cfg.get("num_key_value_heads", nh),
        head_dim=cfg.get("head_dim") or h // nh,
        ffn=cfg["intermediate_size"],
        vocab=cfg["vocab_size"],
        std=cfg.get("initializer_range", 0.02),
        tied=cfg.get("tie_word_embeddings", False),
    )
