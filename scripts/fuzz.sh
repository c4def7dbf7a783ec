#!/usr/bin/env bash
# Runs the cargo fuzz targets of crates/engine/fuzz/ one after another, each for SECONDS (default 60). The working
# corpus crates/engine/fuzz/corpus/<target>/ (git-ignored) is seeded from the tree and ../shared
# (scripts/fuzz-seeds.py); the committed inputs are read too: crates/engine/fuzz/seeds/<target>/ (a minimized
# corpus, refreshed with --minimize) and crates/engine/fuzz/regressions/<target>/ (what the fuzzers found, named
# after it). Prints executions per target and writes them to crates/engine/fuzz/last-run.tsv.
# A crash or timeout leaves its input in crates/engine/fuzz/artifacts/<target>/ and fails the script; turn it
# into a regression with `scripts/fuzz.sh --keep TARGET FILE NAME` once fixed.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   scripts/fuzz.sh --keep TARGET FILE NAME   # copy FILE to crates/engine/fuzz/regressions/TARGET/NAME
#   scripts/fuzz.sh --minimize [TARGET...]    # crates/engine/fuzz/seeds/TARGET := minimized corpus (cargo fuzz cmin)
#
# Needs a nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

targets_all=(ebnf json_schema structural_tag regex gguf tokenizer_json matcher_ops)

max_len() {
  case "$1" in
    gguf | tokenizer_json) echo 65536 ;;
    json_schema | structural_tag) echo 16384 ;;
    *) echo 4096 ;;
  esac
}


if [[ "${1:-}" == "--keep" ]]; then
  [[ $# -eq 4 ]] || { echo "usage: scripts/fuzz.sh --keep TARGET FILE NAME" >&2; exit 2; }
  mkdir -p "crates/engine/fuzz/regressions/$2"
  cp "$3" "crates/engine/fuzz/regressions/$2/$4"
  echo "crates/engine/fuzz/regressions/$2/$4"
  exit 0
fi

if [[ "${1:-}" == "--minimize" ]]; then
  shift
  targets=("$@")
  [[ ${#targets[@]} -gt 0 ]] || targets=("${targets_all[@]}")
  for t in "${targets[@]}"; do
    mkdir -p "crates/engine/fuzz/corpus/$t" "crates/engine/fuzz/seeds/$t"
    cp -n crates/engine/fuzz/seeds/"$t"/* "crates/engine/fuzz/corpus/$t/" 2>/dev/null || true
    (cd crates/engine/fuzz && cargo +nightly fuzz cmin -O "$t" "corpus/$t" -- -max_len="$(max_len "$t")" >/dev/null 2>&1)
    rm -rf "crates/engine/fuzz/seeds/$t" && cp -r "crates/engine/fuzz/corpus/$t" "crates/engine/fuzz/seeds/$t"
    echo "$t: $(ls "crates/engine/fuzz/seeds/$t" | wc -l) inputs, $(du -sh "crates/engine/fuzz/seeds/$t" | cut -f1)"
  done
  exit 0
fi

seconds=60
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${targets_all[@]}")
for t in "${targets[@]}"; do
  [[ " ${targets_all[*]} " == *" $t "* ]] || { echo "unknown target '$t' (one of: ${targets_all[*]})" >&2; exit 2; }
done

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: needs cargo-fuzz: cargo install cargo-fuzz" >&2
  exit 2
fi

python3 scripts/fuzz-seeds.py "$repo" "$repo/../shared" >/dev/null
echo "building the fuzz targets (cargo +nightly fuzz build -O)"
(cd crates/engine/fuzz && cargo +nightly fuzz build -O)

summary=crates/engine/fuzz/last-run.tsv
printf 'target\tseconds\texecs\texecs_per_s\tcorpus\tresult\n' >"$summary"
failed=0
for t in "${targets[@]}"; do
  mkdir -p "crates/engine/fuzz/corpus/$t" "crates/engine/fuzz/seeds/$t" "crates/engine/fuzz/regressions/$t" "crates/engine/fuzz/artifacts/$t"
  log="crates/engine/fuzz/artifacts/$t/last.log"
  echo "== $t: ${seconds}s"
  set +e
  (cd crates/engine/fuzz && cargo +nightly fuzz run -O "$t" "corpus/$t" "seeds/$t" "regressions/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len="$(max_len "$t")" \
    -print_final_stats=1) >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  corpus=$(ls "crates/engine/fuzz/corpus/$t" | wc -l)
  result=ok
  if [[ $rc -ne 0 ]]; then
    result="FAILED (rc $rc, see $log and crates/engine/fuzz/artifacts/$t/)"
    failed=1
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -8 || true
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "$corpus" "$result" | tee -a "$summary"
done
column -t -s $'\t' "$summary"
exit $failed
