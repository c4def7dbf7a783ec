#!/usr/bin/env bash
# Builds the `structgen` Python wheel (engine crate only, no candle; CPython >= 3.9 through the
# stable ABI) into target/wheels/. maturin comes from PyPI into target/python-tools on first use.
#
# The wheel is meant for other machines, so it is not built for this CPU (`target-cpu=native`
# of .cargo/config.toml) but for x86-64-v3 (AVX2, 2013 on) on x86_64; STRUCTGEN_WHEEL_RUSTFLAGS
# overrides that.
# STRUCTGEN_WHEEL_NATIVE=1 builds it for this CPU instead, in the workspace's target directory with
# the workspace's flags, so that it reuses the dependencies `cargo test` already compiled: a wheel
# for this machine only, which is what scripts/test.sh installs and tests.
# Usage: scripts/python-wheel.sh [extra maturin build arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
tools=target/python-tools
if [ ! -x "$tools/bin/maturin" ]; then
  "$py" -m venv "$tools"
  "$tools/bin/pip" install --quiet "maturin>=1.5,<2"
fi
if [ -z "${STRUCTGEN_WHEEL_RUSTFLAGS+x}" ]; then
  case "$(uname -m)" in
    x86_64) STRUCTGEN_WHEEL_RUSTFLAGS="-C target-cpu=x86-64-v3" ;;
    *) STRUCTGEN_WHEEL_RUSTFLAGS="" ;;
  esac
fi
if [ "${STRUCTGEN_WHEEL_NATIVE:-0}" = 1 ]; then
  "$tools/bin/maturin" build --release --locked --interpreter "$py" \
    -m crates/python/Cargo.toml -o target/wheels "$@"
else
  # A target directory of its own: other flags than the workspace build, so neither rebuilds the
  # other.
  RUSTFLAGS="$STRUCTGEN_WHEEL_RUSTFLAGS" CARGO_TARGET_DIR=target/wheel-build \
    "$tools/bin/maturin" build --release --locked --interpreter "$py" \
    -m crates/python/Cargo.toml -o target/wheels "$@"
fi
ls -1 target/wheels/structgen-*.whl
