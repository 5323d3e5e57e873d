#!/bin/sh
# Our validation vs nextpnr-ice40 --pack-only on the same netlist files, side by side.
#   shared/fpga/scripts/bench.sh [case.json ...]   (default: a representative set)
# Columns: ours_us = median in-process validate() call (release build); ours_proc_us = best of 3
# wall-clock runs of a process that reads the file and validates once; nextpnr_us = best of 3
# wall-clock runs of nextpnr-ice40 --pack-only --report (process start and chip database load
# included). Both tools read the identical netlist file.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
# Case paths may be given relative to the caller's directory; make them absolute before cd.
for arg in "$@"; do set -- "$@" "$(realpath "$arg")"; shift; done
cd "$here"
[ $# -gt 0 ] || set -- fixtures/cases/counter26-hx8k.json fixtures/cases/random3x01-hx8k.json \
  fixtures/cases/random6x03-lp384.json fixtures/cases/dsp-hx8k.json fixtures/cases/random3x04-up5k.json \
  fixtures/cases/hardip_up5k-up5k.json
cargo build -q --release -p openqq-fpga --example pack_bench
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c "import json,sys; print(json.load(sys.stdin)['target_directory'])")
bench="$target_dir/release/examples/pack_bench"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
best_of_3() { # prints the best wall time in µs of running "$@" three times
  best=""
  for i in 1 2 3; do
    s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(( ($(date +%s%N) - s) / 1000 ))
    if [ -z "$best" ] || [ "$e" -lt "$best" ]; then best=$e; fi
  done
  echo "$best"
}
printf '%-20s %8s %12s %11s %9s %10s %7s %7s\n' case ours_us ours_proc_us nextpnr_us ratio proc_ratio our_LC np_LC
t_ours=0; t_proc=0; t_np=0
for path in "$@"; do
  name=$(basename "$path" .json)
  set -- $(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));json.dump(d['netlist'],open(sys.argv[2],'w'));print(d['device'],d['package'])" "$path" "$tmp/n.json")
  dev=$1; pkg=$2
  set -- $("$bench" "$dev" "$pkg" "$tmp/n.json"); ours=$1; lcs=$2
  proc=$(best_of_3 "$bench" --once "$dev" "$pkg" "$tmp/n.json")
  np=$(best_of_3 nextpnr-ice40 --"$dev" --package "$pkg" --json "$tmp/n.json" --pack-only --report "$tmp/r.json" -q)
  np_lcs=$(python3 -c "import json;print(json.load(open('$tmp/r.json'))['utilization']['ICESTORM_LC']['used'])")
  printf '%-20s %8s %12s %11s %8sx %9sx %7s %7s\n' "$name" "$ours" "$proc" "$np" $((np / (ours > 0 ? ours : 1))) $((np / proc)) "$lcs" "$np_lcs"
  t_ours=$((t_ours + ours)); t_proc=$((t_proc + proc)); t_np=$((t_np + np))
done
floor=$(best_of_3 /bin/true)
echo "harness floor (best of 3 runs of /bin/true, included in both process columns): ${floor} us"
echo "total: ours ${t_ours} us in-process, ${t_proc} us as a process; nextpnr ${t_np} us;" \
  "ratio $((t_np / t_ours))x in-process, $((t_np / t_proc))x process to process"
