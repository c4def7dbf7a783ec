#!/usr/bin/env bash
# Builds and runs every test: fetches what the tests need, checks formatting and lints, then runs the
# whole suite in release mode (one profile for everything, so candle is built once).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/fetch-models.sh
scripts/fetch-bfcl.sh
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --locked -- -D warnings
# The engine alone, as an embedder without the tokenizer loaders builds it.
cargo clippy --release -p structgen-engine --no-default-features --locked -- -D warnings
# The engine crate's public documentation has no broken or private links.
RUSTDOCFLAGS="-D warnings" cargo doc -p structgen-engine --no-deps --release --locked
# Every test must run here: one whose data is missing fails instead of skipping.
STRUCTGEN_TESTS_REQUIRE_DATA=1 cargo test --release --workspace --locked
# `structgen serve` with real clients: the openai SDK, an agent loop, a load test, fault cases.
scripts/serve-tests.sh
# The Python package: its wheel, installed in a fresh virtual environment, and its tests (torch
# included, so none is skipped).
STRUCTGEN_TESTS_REQUIRE_DATA=1 scripts/python-tests.sh
echo "scripts/test.sh: all checks passed in $(( $(date +%s) - start )) s"
