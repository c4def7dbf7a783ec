#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench`, `llama-batched-bench`, `llama-completion` and `llama-server`,
# the reference runtime of scripts/bench-runtime.sh and scripts/bench-serve.sh, from the
# llama-cpp-python sdist on PyPI (the one source of llama.cpp reachable from where this project is
# built) into target/llama.cpp/. Does nothing when all four
# binaries are there. Prints the directory holding them.
#
# AMX is switched off: some VMs report it in /proc/cpuinfo but die with SIGILL on `ldtilecfg`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="0.3.36"
work="$root/target/llama.cpp"
bin="$work/build/bin"
if [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-batched-bench" ] && [ -x "$bin/llama-completion" ] \
  && [ -x "$bin/llama-server" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$work"
if ! command -v cmake >/dev/null 2>&1; then
  echo "build-llama-bench.sh: installing cmake from PyPI into $work/venv" >&2
  python3 -m venv "$work/venv" >&2
  "$work/venv/bin/pip" install --disable-pip-version-check -q cmake >&2
  export PATH="$work/venv/bin:$PATH"
fi
if [ ! -d "$work/src/vendor/llama.cpp" ]; then
  echo "build-llama-bench.sh: downloading llama-cpp-python==$version (sdist)" >&2
  rm -rf "$work/sdist" "$work/src"
  python3 -m pip download --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$version" -d "$work/sdist" >&2
  mkdir -p "$work/src.tmp"
  tar -xzf "$work/sdist/"llama_cpp_python-"$version".tar.gz -C "$work/src.tmp" --strip-components=1
  mv "$work/src.tmp" "$work/src"
fi
echo "build-llama-bench.sh: building llama-bench, llama-batched-bench, llama-completion and llama-server (a few minutes)" >&2
flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake -S "$work/src/vendor/llama.cpp" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >&2
cmake --build "$work/build" --target llama-bench llama-batched-bench llama-completion llama-server -j "$(nproc)" >&2
echo "$bin"
