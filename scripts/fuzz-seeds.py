#!/usr/bin/env python3
"""Seeds fuzz/corpus/<target>/ for scripts/fuzz.sh from data already in the tree and in ../shared
(nothing is copied into git: the generated corpus is ignored). Usage: fuzz-seeds.py REPO [SHARED]."""
import glob
import hashlib
import json
import os
import struct
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

repo = sys.argv[1]
shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(repo, "..", "shared")
corpus = os.path.join(repo, "crates", "engine", "fuzz", "corpus")


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def toml_values(pattern, key):
    if tomllib is None:
        return []
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as f:
            doc = tomllib.load(f)
        for case in doc.get("case", []):
            if key in case:
                out.append(case[key])
    return out


# EBNF: the grammar cases and the malformed ones.
for g in toml_values(os.path.join(repo, "tests/data/cases/*.toml"), "grammar"):
    put("ebnf", g)
for g in toml_values(os.path.join(repo, "tests/data/malformed.toml"), "grammar"):
    put("ebnf", g)

# JSON Schema: the schema cases and the first schemas of every JSONSchemaBench file; regexes:
# every `pattern` found in them.
patterns = set()


def walk_patterns(v):
    if isinstance(v, dict):
        p = v.get("pattern")
        if isinstance(p, str):
            patterns.add(p)
        for x in v.values():
            walk_patterns(x)
    elif isinstance(v, list):
        for x in v:
            walk_patterns(x)


for s in toml_values(os.path.join(repo, "tests/data/schema_cases/*.toml"), "schema"):
    text = s if isinstance(s, str) else json.dumps(s)
    put("json_schema", text)
for path in sorted(glob.glob(os.path.join(shared, "jsonschema", "*.jsonl"))):
    with open(path) as f:
        for i, line in enumerate(f):
            if i >= 40:
                break
            schema = json.loads(line)["schema"]
            text = json.dumps(schema, separators=(",", ":"))
            if len(text) <= 8192:
                put("json_schema", text)
            walk_patterns(schema)
for p in sorted(patterns)[:400]:
    put("regex", p)
for p in [r"[a-z]+@[a-z]+\.com", r"\d{3}-\d{4}", r"(ab|cd)*e?", r"^\w{2,8}$", r"[^\n]{0,20}"]:
    put("regex", p)

# Structural tags: the first requests of every shared workload.
for path in sorted(glob.glob(os.path.join(shared, "bench", "requests", "*.jsonl"))):
    with open(path) as f:
        for i, line in enumerate(f):
            if i >= 3:
                break
            tag = json.loads(line).get("structural_tag")
            if tag is not None:
                text = json.dumps(tag, separators=(",", ":"))
                if len(text) <= 16384:
                    put("structural_tag", text)

# GGUF: small files holding only tokenizer metadata (GGUF v3, no tensors).


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, payload):
    return gguf_string(key) + struct.pack("<I", vtype) + payload


def gguf_array(vtype, items):
    return struct.pack("<IQ", vtype, len(items)) + b"".join(items)


def gguf(model, tokens, merges=None, types=None, extra=()):
    kvs = [
        gguf_kv("general.architecture", 8, gguf_string("llama")),
        gguf_kv("tokenizer.ggml.model", 8, gguf_string(model)),
        gguf_kv("tokenizer.ggml.tokens", 9, gguf_array(8, [gguf_string(t) for t in tokens])),
        gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 0)),
    ]
    if merges is not None:
        kvs.append(gguf_kv("tokenizer.ggml.merges", 9, gguf_array(8, [gguf_string(m) for m in merges])))
    if types is not None:
        kvs.append(gguf_kv("tokenizer.ggml.token_type", 9, gguf_array(5, [struct.pack("<i", t) for t in types])))
    kvs.extend(extra)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)


bpe_tokens = ["<|endoftext|>", "a", "b", "c", "Ġ", "ab", "Ġa", "abc"]
put("gguf", gguf("gpt2", bpe_tokens, merges=["a b", "Ġ a", "ab c"], types=[3, 1, 1, 1, 1, 1, 1, 1]))
put("gguf", gguf("gpt2", bpe_tokens, merges=["a b"], extra=[gguf_kv("tokenizer.ggml.pre", 8, gguf_string("llama-bpe"))]))
sp_tokens = ["</s>", "<unk>", "<0x0A>", "▁", "a", "b", "▁a", "ab"]
put("gguf", gguf("llama", sp_tokens, types=[3, 2, 6, 1, 1, 1, 1, 1]))
put("gguf", gguf("llama", sp_tokens, extra=[gguf_kv("general.alignment", 4, struct.pack("<I", 64))]))

# tokenizer.json: small BPE, WordPiece-like and added-token files.
bpe = {
    "version": "1.0",
    "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
              "vocab": {"<|endoftext|>": 0, "a": 1, "b": 2, "c": 3, "Ġ": 4, "ab": 5, "Ġa": 6},
              "merges": ["a b", "Ġ a"]},
}
put("tokenizer_json", json.dumps(bpe))
sp = json.loads(json.dumps(bpe))
sp["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
sp["decoder"] = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]}
sp["model"]["vocab"] = {"<|endoftext|>": 0, "<0x0A>": 1, "▁": 2, "a": 3, "▁a": 4}
sp["model"]["merges"] = ["▁ a"]
sp["model"]["byte_fallback"] = True
put("tokenizer_json", json.dumps(sp))
wl = json.loads(json.dumps(bpe))
wl["model"] = {"type": "WordLevel", "vocab": {"<|endoftext|>": 0, "hello": 1, "world": 2}, "unk_token": "<|endoftext|>"}
put("tokenizer_json", json.dumps(wl))

# Matcher operations: a few random op strings per grammar.
for g in range(6):
    for n in (8, 32, 96):
        put("matcher_ops", bytes([g]) + hashlib.sha256(bytes([g, n])).digest() * (n // 32 + 1))

for t in sorted(os.listdir(corpus)):
    print(f"{t}: {len(os.listdir(os.path.join(corpus, t)))} seeds")
