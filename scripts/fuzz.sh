#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/: one per decoder that reads bytes from outside the platform) and
# runs each for a set time, seeded from the committed corpora (fuzz/seeds/<target>/, and the FPGA
# fixtures for the FPGA parsers). Prints each target's runs, coverage and corpus, and the path of
# any crashing input; exits 1 if a target crashed (a panic, a failed assertion, a timeout or
# running out of memory).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     # 60 s each, every target unless named
#
# Stable Rust is enough: cargo-fuzz needs nightly only for its sanitizers. libFuzzer's coverage
# feedback needs just LLVM's sanitizer-coverage pass, which stable rustc runs when asked
# (the flags below are cargo-fuzz's, minus `-Zsanitizer`); debug assertions and overflow checks
# are on, so an overflow is a crash. With nightly, `cargo +nightly fuzz run <target>` from fuzz/
# adds AddressSanitizer.
#
# The build goes to ${CARGO_TARGET_DIR:-target}/fuzz (its own directory: other flags than the
# workspace build's, which it leaves alone), as does each target's working corpus, which grows
# from run to run; crashing inputs are left in fuzz/artifacts/<target>/. A crash becomes a
# regression test in the crate that owns the decoder, reading the input committed beside it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
all=(pcf lpf bitstream ecp5_bitstream netlist validate envelope msk_event design_body batch_body webhook_body upload_body jwt
  upload_token schedule)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

dir=${CARGO_TARGET_DIR:-$PWD/target}/fuzz
host=$(rustc -vV | sed -n 's/^host: //p')
# `--target` keeps these flags off build scripts and proc macros, which run in the compiler.
flags=(-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks)
export RUSTFLAGS="${flags[*]}"
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
cargo build --locked --release --quiet --manifest-path fuzz/Cargo.toml --target "$host" --target-dir "$dir" "${bins[@]}"

# Where each target's seeds are, besides fuzz/seeds/<target>/, and its longest input.
seeds_of() {
  case $1 in
  pcf | bitstream) echo shared/fpga/fixtures/bad/cases ;;
  netlist) echo shared/fpga/src/ecp5/pack/fixtures ;;
  ecp5_bitstream) echo shared/fpga/src/ecp5/bitstream ;;
  esac
}
max_len_of() {
  case $1 in
  bitstream | netlist | validate) echo 65536 ;;
  ecp5_bitstream) echo 131072 ;;
  *) echo 16384 ;;
  esac
}

crashed=0
for t in "${targets[@]}"; do
  corpus=$dir/corpus/$t
  artifacts=$PWD/fuzz/artifacts/$t
  log=$dir/logs/$t.log
  mkdir -p "$corpus" "$artifacts" "$dir/logs"
  seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds+=("fuzz/seeds/$t")
  extra=$(seeds_of "$t")
  [ -n "$extra" ] && seeds+=("$extra")
  status=0
  "$dir/$host/release/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len="$(max_len_of "$t")" -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}" >"$log" 2>&1 || status=$?
  # libFuzzer's last status line: `#RUNS DONE cov: N ft: N corp: N/SIZE ...`.
  done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$done_line")
  if [ "$status" -eq 0 ]; then
    printf '%-15s %9s runs in %ss, cov %s, ft %s, corpus %s\n' "$t" "${runs:-?}" "$seconds" "${cov:-?}" "${ft:-?}" \
      "${corp:-?}"
  else
    crashed=1
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    printf '%-15s CRASHED (exit %s) after %s runs: %s\n' "$t" "$status" "${runs:-?}" "${input:-no input written}"
    grep -E -A12 "panicked at|ERROR: libFuzzer|SUMMARY" "$log" | head -n 30 | sed 's/^/    /'
    echo "    (the whole log: $log)"
  fi
done
exit $crashed
