#!/usr/bin/env bash
# The end-to-end latency table on an NVIDIA GPU: for each model and each prompts file, every request
# unconstrained, constrained, and constrained + jump-forward (`structgen latency --device cuda`):
# forward ms p50, mask µs p50/p99, mask wait µs p50/p99, grammar overhead, generated tokens/s,
# forward passes saved, and how many answers parse to schema-valid calls.
#
#   scripts/gpu-latency.sh [options] MODEL...
#
# MODEL is a checkpoint folder (config.json, *.safetensors, tokenizer.json, tokenizer_config.json;
# or one .gguf with tokenizer.json beside it), or ARCH:TOKENIZER_DIR[:STYLE[:FORMAT]] for a
# random-weight model of models/configs/ARCH.json made here: FORMAT safetensors (the default;
# scripts/gpu/make_checkpoint.py, needs torch and safetensors) or a GGUF quantization q8_0, q4_0,
# q4_1, q5_0, q5_1 (scripts/gpu/make_gguf.py, needs numpy and the gguf package: the bundle's wheel
# is used when it is not installed), e.g.
#   llama-3.2-1b:target/gpu-bundle/tokenizers/llama3   qwen2.5-1.5b:target/gpu-bundle/tokenizers/qwen2.5
#   llama-3.2-1b:target/gpu-bundle/tokenizers/llama3:llama_json:q8_0
# STYLE defaults to llama_json for llama-* and qwen for qwen*.
#
# Options:
#   --binary FILE     structgen built with --features cuda (default: target/cuda/release/structgen,
#                     else target/gpu-bundle/structgen.xz, unpacked to $TMPDIR)
#   --prompts FILE    a prompts file (repeatable; default grammars/prompts.jsonl and the bundle's
#                     prompts/<family>-bench.jsonl when present)
#   --out DIR         where tables and per-run JSON Lines go (default gpu-latency-results/)
#   --max-tokens N    per answer (default 256)
#   --limit N         first N requests of each prompts file
#   --dtype D         auto (default: the checkpoint's bf16), bf16, f16, f32
#   --device D        default cuda
#   --batch LIST      the throughput table instead (`structgen latency --batch LIST`, e.g. 1,16,128):
#                     B requests decoded at once per size and mode, output tok/s, step/mask/wait
#                     p50/p99, grammar overhead; an SVG plot per run (Llama-3.2-1B with the
#                     XGrammar-2 paper's SGLang points, RTX 5090: 441 / 2,933 / 6,640 tok/s)
#   -- ARGS           the rest goes to every `structgen latency` (e.g. --no-overlap, --verify-masks,
#                     --temperature 0.7)
# It needs no network: weights are made locally, and the CUDA libraries are the system's or those
# of PyTorch's pip packages (found and put on LD_LIBRARY_PATH when the binary lacks them).
set -euo pipefail
cd "$(dirname "$0")/.."

binary=""
prompts=()
out=gpu-latency-results
max_tokens=256
limit=()
dtype=auto
device=cuda
batch=""
models=()
extra_args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --binary) binary="${2:?}"; shift 2 ;;
        --prompts) prompts+=("${2:?}"); shift 2 ;;
        --out) out="${2:?}"; shift 2 ;;
        --max-tokens) max_tokens="${2:?}"; shift 2 ;;
        --limit) limit=(--limit "${2:?}"); shift 2 ;;
        --dtype) dtype="${2:?}"; shift 2 ;;
        --device) device="${2:?}"; shift 2 ;;
        --batch) batch="${2:?}"; shift 2 ;;
        --) shift; extra_args=("$@"); break ;;
        -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "gpu-latency.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) models+=("$1"); shift ;;
    esac
done
if [[ ${#models[@]} -eq 0 ]]; then
    echo "gpu-latency.sh: name at least one MODEL (see --help)" >&2
    exit 2
fi
mkdir -p "$out"

if [[ -z "$binary" ]]; then
    if [[ -x target/cuda/release/structgen ]]; then
        binary=target/cuda/release/structgen
    elif [[ -f target/gpu-bundle/structgen.xz ]]; then
        binary="${TMPDIR:-/tmp}/structgen-cuda"
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            target/gpu-bundle/structgen.xz "$binary"
        chmod +x "$binary"
    else
        echo "gpu-latency.sh: no CUDA build: run scripts/build-cuda.sh (or give --binary)" >&2
        exit 2
    fi
fi

# The CUDA libraries the binary links: the system's, else PyTorch's pip packages'.
if ldd "$binary" | grep -q 'not found'; then
    extra=$(python3 - <<'PY' 2>/dev/null || true
import glob, os, site
dirs = set()
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for lib in glob.glob(os.path.join(base, "nvidia", "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(lib))
print(":".join(sorted(dirs)))
PY
)
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
        [[ -d "$d" ]] && extra="$extra:$d"
    done
    export LD_LIBRARY_PATH="${extra#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if ldd "$binary" | grep 'not found'; then
    echo "gpu-latency.sh: $binary is missing the libraries above (a CUDA 13 toolkit or PyTorch cu13)" >&2
    exit 2
fi

{
    echo "# structgen GPU latency, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null \
        | sed 's/^/GPU: /' || echo "GPU: nvidia-smi not available"
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) threads"
    echo "binary: $binary ($("$binary" --version))"
    echo
} | tee "$out/README.md"

for spec in "${models[@]}"; do
    style=()
    if [[ -d "$spec" ]]; then
        ckpt="$spec"
        name=$(basename "$spec")
    else
        IFS=: read -r arch tok st format <<<"$spec"
        config="models/configs/$arch.json"
        [[ -f "$config" ]] || { echo "gpu-latency.sh: no $config (MODEL '$spec')" >&2; exit 2; }
        [[ -n "${tok:-}" ]] || { echo "gpu-latency.sh: '$spec' needs a tokenizer folder: $arch:DIR" >&2; exit 2; }
        if [[ -z "${st:-}" ]]; then
            case "$arch" in llama*) st=llama_json ;; *) st=qwen ;; esac
        fi
        style=(--style "$st")
        format=${format:-safetensors}
        name="$arch-random-$format"
        ckpt="${TMPDIR:-/tmp}/structgen-ckpt/$name"
        if [[ "$format" == safetensors ]]; then
            [[ -f "$ckpt/model.safetensors" ]] || python3 scripts/gpu/make_checkpoint.py "$config" "$tok" "$ckpt"
        elif [[ ! -f "$ckpt/model.gguf" ]]; then
            wheel=$(ls target/gpu-bundle/gguf-*.whl 2>/dev/null | head -1 || true)
            PYTHONPATH="${wheel}${PYTHONPATH:+:$PYTHONPATH}" \
                python3 scripts/gpu/make_gguf.py "$config" "$tok" "$ckpt" --type "$format"
        fi
    fi
    files=("${prompts[@]}")
    if [[ ${#files[@]} -eq 0 ]]; then
        files=(grammars/prompts.jsonl)
        family=qwen
        [[ "$name" == llama* ]] && family=llama
        [[ -f "target/gpu-bundle/prompts/$family-bench.jsonl" ]] && files+=("target/gpu-bundle/prompts/$family-bench.jsonl")
    fi
    for p in "${files[@]}"; do
        tag="$name.$(basename "$p" .jsonl)"
        echo "== $name on $p" | tee -a "$out/README.md"
        batched=()
        if [[ -n "$batch" ]]; then
            batched=(--batch "$batch" --plot "$out/$tag.svg")
            [[ "$name" == llama-3.2-1b* ]] && batched+=(--reference "paper (SGLang, RTX 5090)=1:441,16:2933,128:6640")
        fi
        "$binary" latency "${batched[@]}" --model "$ckpt" --device "$device" --dtype "$dtype" "${style[@]}" \
            --prompts "$p" --max-tokens "$max_tokens" "${limit[@]}" "${extra_args[@]}" \
            --out "$out/$tag.runs.jsonl" --summary "$out/$tag.summary.jsonl" \
            2> "$out/$tag.log" | tee -a "$out/README.md"
        echo | tee -a "$out/README.md"
    done
done
echo "gpu-latency.sh: tables in $out/README.md, runs in $out/*.runs.jsonl"
