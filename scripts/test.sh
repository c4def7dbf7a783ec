#!/usr/bin/env bash
# Builds and runs every test: fetches what the tests need, checks formatting and lints, then runs the
# whole suite in release mode (one profile for everything, so candle is built once).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
last=$start
# Prints how long the step just finished took, so a slow CI run shows where its time went.
phase() {
  local now
  now=$(date +%s)
  echo "scripts/test.sh: $1 took $((now - last)) s" >&2
  last=$now
}
mkdir -p target
# Downloads and Python environments wait on the network, not the CPU: they go on in the background
# while the Rust build runs, and each is awaited where it is first needed (its log printed if it
# failed). The model and the BFCL data; BFCL's own Python code (multi-turn and memory backends,
# checkers, decoders) for the bridge tests and the judge; the clients of the serve tests; the
# Python package's test environment (torch: the largest download).
background() {
  local name=$1
  shift
  ("$@") >"target/test-$name.log" 2>&1 &
  eval "job_$name=$!"
}
await() {
  local pid
  eval "pid=\$job_$1"
  if ! wait "$pid"; then
    cat "target/test-$1.log" >&2
    echo "scripts/test.sh: preparing $1 failed" >&2
    exit 1
  fi
}
# A failed step leaves no download running behind it.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
background data bash -c 'scripts/fetch-models.sh && scripts/fetch-bfcl.sh && scripts/bfcl-venv.sh'
background serve scripts/serve-venv.sh
background python scripts/python-venv.sh
cargo fmt --all --check
# The engine alone, as an embedder without the tokenizer loaders builds it.
cargo clippy --release -p structgen-engine --no-default-features --locked -- -D warnings
# The engine crate's public documentation has no broken or private links.
RUSTDOCFLAGS="-D warnings" cargo doc -p structgen-engine --no-deps --release --locked
phase "fmt, engine clippy and docs"
# Clippy lints the workspace's own crates while they are compiled (clippy-driver as cargo's
# workspace wrapper, set as `cargo clippy` sets it), so the dependencies are built once instead of
# once more in check mode: every target the tests build (libraries, binaries, unit and
# integration tests), and the Python crate when the wheel is built below. Every later cargo call
# keeps the same wrapper, so nothing is compiled twice. A lint fails the build.
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
if [ ! -x "$RUSTC_WORKSPACE_WRAPPER" ]; then
  echo "scripts/test.sh: $RUSTC_WORKSPACE_WRAPPER is missing (rustup component add clippy)" >&2
  exit 1
fi
cargo test --release --workspace --locked --no-run
phase "building and linting the tests"
await data
phase "waiting for the models and data"
# Every test must run here: one whose data is missing fails instead of skipping. The fuzz
# targets mutate their corpus for 10 s each here (30 s by default when run alone).
STRUCTGEN_TESTS_REQUIRE_DATA=1 STRUCTGEN_FUZZ_SECONDS="${STRUCTGEN_FUZZ_SECONDS:-10}" \
  cargo test --release --workspace --locked
phase "cargo test"
# `structgen serve` with real clients: the openai SDK, an agent loop, a load test, fault cases.
# It tests the binary `cargo test` just built and uplifted to target/release.
await serve
STRUCTGEN_BIN="$PWD/target/release/structgen" scripts/serve-tests.sh
phase "serve tests"
# BFCL's own checker (bfcl-eval from PyPI) re-scores the ground truth of every category: its
# verdicts and ours must agree on every case.
STRUCTGEN_BIN="$PWD/target/release/structgen" scripts/bfcl-judge.sh --ground-truth
phase "BFCL judge"
# The Python package: its wheel (for this CPU, on the dependencies compiled above), installed in
# its test environment, and its tests (torch included, so none is skipped).
await python
STRUCTGEN_WHEEL_NATIVE=1 STRUCTGEN_TESTS_REQUIRE_DATA=1 scripts/python-tests.sh
phase "Python package"
echo "scripts/test.sh: all checks passed in $(( $(date +%s) - start )) s"
