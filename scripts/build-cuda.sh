#!/usr/bin/env bash
# Builds `structgen` with `--features cuda` on a machine with no CUDA toolkit and no GPU.
#
#   scripts/build-cuda.sh [COMPUTE_CAP] [--target-cpu CPU]
#
# COMPUTE_CAP: the GPU's compute capability without the dot (default 90: H100/H200; 89: L4/RTX 40xx,
# 86: RTX 30xx/A10, 80: A100). --target-cpu: the CPU the binary may use (default x86-64-v3, i.e. AVX2 +
# FMA, so that it runs on the GPU machine's CPU, not only on this one's).
#
# nvcc, the CUDA headers and the libraries come from NVIDIA's wheels on PyPI, pinned by version and
# hash in scripts/cuda/requirements-13.0.txt (CUDA 13.0: the GPU machine needs a driver >= 580).
# They are unpacked into target/cuda-toolkit/13.0. cudarc links against the driver library, which
# only a GPU machine has, so a stand-in libcuda.so.1 is generated for linking (scripts/cuda/
# driver_stub.py); the binary finds the real driver on a GPU machine.
#
# The build lands in target/cuda/release/structgen (a target folder of its own, so the CPU build is
# untouched). Then the script checks that the binary starts (--help), that `--device cuda` fails with
# a clear error on this GPU-less machine instead of crashing, and, when the default model is there,
# that a constrained CPU generation with this binary parses to a tool call.
#
# On the GPU machine the binary needs libcublas.so.13, libcublasLt.so.13, libcurand.so.10,
# libnvrtc.so.13 and libcudart.so.13: a CUDA 13 toolkit, or PyTorch's cu13 wheels
# (scripts/gpu-latency.sh adds their folder to LD_LIBRARY_PATH itself).
set -euo pipefail
cd "$(dirname "$0")/.."

cap=90
target_cpu=x86-64-v3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --target-cpu) target_cpu="${2:?--target-cpu needs a value}"; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        [0-9]*) cap="$1"; shift ;;
        *) echo "build-cuda.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if ! [[ "$cap" =~ ^[0-9]{2,3}$ ]]; then
    echo "build-cuda.sh: the compute capability is two or three digits (90 for H100), not '$cap'" >&2
    exit 2
fi

root=$(pwd)
tk="$root/target/cuda-toolkit/13.0"
wheels="$root/target/cuda-toolkit/wheels"
req="$root/scripts/cuda/requirements-13.0.txt"
stamp="$tk/.installed"

if [[ ! -f "$stamp" || "$req" -nt "$stamp" ]]; then
    echo "== CUDA 13.0 toolkit from PyPI wheels → $tk"
    mkdir -p "$wheels"
    python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
        --python-version 3.11 -d "$wheels" -r "$req"
    rm -rf "$root/target/cuda-toolkit/unpacked" "$tk"
    mkdir -p "$root/target/cuda-toolkit/unpacked"
    grep -oE '^[a-z0-9-]+==[0-9.]+' "$req" | while read -r pin; do
        name=${pin%%==*}
        version=${pin##*==}
        whl=$(ls "$wheels/${name//-/_}-${version}-"*.whl)
        python3 -m zipfile -e "$whl" "$root/target/cuda-toolkit/unpacked"
    done
    mv "$root/target/cuda-toolkit/unpacked/nvidia/cu13" "$tk"
    rm -rf "$root/target/cuda-toolkit/unpacked"
    chmod +x "$tk"/bin/* "$tk"/nvvm/bin/*
    # The linker looks for the unversioned names; the binary records the versioned sonames.
    for lib in cudart cublas cublasLt nvrtc; do ln -sf "lib$lib.so.13" "$tk/lib/lib$lib.so"; done
    ln -sf libcurand.so.10 "$tk/lib/libcurand.so"
    touch "$stamp"
fi

cudarc=$(cargo metadata --format-version 1 --locked --features cuda 2>/dev/null | python3 -c '
import json, sys
pkgs = json.load(sys.stdin)["packages"]
print(next(p["manifest_path"] for p in pkgs if p["name"] == "cudarc").rsplit("/", 1)[0])')
mkdir -p "$tk/lib/stubs"
if [[ ! -f "$tk/lib/stubs/libcuda.so.1" || "$root/scripts/cuda/driver_stub.py" -nt "$tk/lib/stubs/libcuda.so.1" ]]; then
    python3 scripts/cuda/driver_stub.py "$cudarc" "$tk/lib/stubs/libcuda_stub.c"
    cc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o "$tk/lib/stubs/libcuda.so.1" "$tk/lib/stubs/libcuda_stub.c"
    ln -sf libcuda.so.1 "$tk/lib/stubs/libcuda.so"
fi

export CUDA_HOME="$tk" CUDA_PATH="$tk" CUDA_ROOT="$tk"
export PATH="$tk/bin:$PATH"
export CUDA_COMPUTE_CAP="$cap"
export CUDARC_CUDA_VERSION=13000
export LIBRARY_PATH="$tk/lib:$tk/lib/stubs${LIBRARY_PATH:+:$LIBRARY_PATH}"
export RUSTFLAGS="-C target-cpu=$target_cpu -L native=$tk/lib -L native=$tk/lib/stubs"
export CARGO_TARGET_DIR="$root/target/cuda"

echo "== cargo build --release --features cuda (compute capability $cap, target-cpu $target_cpu)"
start=$(date +%s)
cargo build --release --locked --features cuda --bin structgen
echo "   built in $(( $(date +%s) - start )) s"

bin="$CARGO_TARGET_DIR/release/structgen"
# Only for the checks on this machine: the stand-in driver and the wheels' libraries.
local_env=(env LD_LIBRARY_PATH="$tk/lib/stubs:$tk/lib")

echo "== check: the binary starts"
"${local_env[@]}" "$bin" --help >/dev/null
"${local_env[@]}" "$bin" run --help | grep -q -- '--device'

echo "== check: --device cuda without a GPU is a clear error"
set +e
msg=$("${local_env[@]}" "$bin" run --model /nonexistent.gguf --device cuda --prompt hi 2>&1)
rc=$?
set -e
if [[ $rc -eq 0 || $rc -ge 101 ]] || ! grep -qi 'cuda' <<<"$msg"; then
    echo "build-cuda.sh: expected a CUDA error (exit 1 or 2), got exit $rc:" >&2
    echo "$msg" >&2
    exit 1
fi
echo "   $(head -1 <<<"$msg")"

model=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ -f "$model" ]]; then
    echo "== check: a constrained generation on the CPU with this binary"
    "${local_env[@]}" "$bin" run --model "$model" --tools grammars/tools/weather.json \
        --tool-choice required --prompt "What's the weather like in Paris right now?" \
        --max-tokens 48 --json 2>/dev/null | python3 -c '
import json, sys
out = json.load(sys.stdin)
calls = out["tool_calls"]
if not calls or out["parse_errors"]:
    sys.exit("build-cuda.sh: no tool call parsed from " + repr(out["text"]))
print("   " + json.dumps(calls[0]["function"]))'
fi
echo "build-cuda.sh: $bin (compute capability $cap) built and checked"
