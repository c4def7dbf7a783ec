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
scripts/fetch-models.sh
scripts/fetch-bfcl.sh
# BFCL's own Python code (multi-turn backends, checkers, decoders) for the bridge tests and the judge.
scripts/bfcl-venv.sh >/dev/null
phase "fetching models and data"
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --locked -- -D warnings
# The engine alone, as an embedder without the tokenizer loaders builds it.
cargo clippy --release -p structgen-engine --no-default-features --locked -- -D warnings
# The engine crate's public documentation has no broken or private links.
RUSTDOCFLAGS="-D warnings" cargo doc -p structgen-engine --no-deps --release --locked
phase "fmt, clippy and docs"
# Every test must run here: one whose data is missing fails instead of skipping. The fuzz
# targets mutate their corpus for 10 s each here (30 s by default when run alone).
STRUCTGEN_TESTS_REQUIRE_DATA=1 STRUCTGEN_FUZZ_SECONDS="${STRUCTGEN_FUZZ_SECONDS:-10}" \
  cargo test --release --workspace --locked
phase "cargo test"
# `structgen serve` with real clients: the openai SDK, an agent loop, a load test, fault cases.
# It tests the binary `cargo test` just built and uplifted to target/release.
STRUCTGEN_BIN="$PWD/target/release/structgen" scripts/serve-tests.sh
phase "serve tests"
# BFCL's own checker (bfcl-eval from PyPI) re-scores the ground truth of every category: its
# verdicts and ours must agree on every case.
STRUCTGEN_BIN="$PWD/target/release/structgen" scripts/bfcl-judge.sh --ground-truth
phase "BFCL judge"
# The Python package: its wheel, installed in a fresh virtual environment, and its tests (torch
# included, so none is skipped).
STRUCTGEN_TESTS_REQUIRE_DATA=1 scripts/python-tests.sh
phase "Python package"
echo "scripts/test.sh: all checks passed in $(( $(date +%s) - start )) s"
