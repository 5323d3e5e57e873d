#!/bin/sh
# Our validation (parse + pack + resource checks, release build) vs nextpnr-ice40 --pack-only on
# the same recorded netlists. Prints one row per case and the overall ratio.
#   shared/fpga/scripts/bench.sh [case.json ...]   (default: a representative set)
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-fpga}
cd "$here"
[ $# -gt 0 ] || set -- fixtures/cases/counter26-hx8k.json fixtures/cases/random3x01-hx8k.json \
  fixtures/cases/random6x03-lp384.json fixtures/cases/dsp-hx8k.json fixtures/cases/random3x04-up5k.json
cargo build -q --release -p openqq-fpga --example pack_bench
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '%-28s %12s %12s %8s %10s %10s\n' case ours_us nextpnr_us ratio our_LCs np_LCs
"$CARGO_TARGET_DIR/release/examples/pack_bench" "$@" > "$tmp/ours"
total_ours=0; total_np=0
while read -r path ours lcs; do
  python3 -c "import json,sys;d=json.load(open(sys.argv[1]));json.dump(d['netlist'],open(sys.argv[2],'w'))" "$path" "$tmp/n.json"
  dev=$(python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(d['device'],d['package'])" "$path")
  set -- $dev
  best=""
  for i in 1 2 3; do
    s=$(date +%s%N)
    nextpnr-ice40 --"$1" --package "$2" --json "$tmp/n.json" --pack-only --report "$tmp/r.json" -q >/dev/null 2>&1
    e=$(( ($(date +%s%N) - s) / 1000 ))
    if [ -z "$best" ] || [ "$e" -lt "$best" ]; then best=$e; fi
  done
  np_lcs=$(python3 -c "import json;print(json.load(open('$tmp/r.json'))['utilization']['ICESTORM_LC']['used'])")
  ratio=$(python3 -c "print(f'{$best/max($ours,1):.0f}x')")
  printf '%-28s %12s %12s %8s %10s %10s\n' "$(basename "$path" .json)" "$ours" "$best" "$ratio" "$lcs" "$np_lcs"
  total_ours=$((total_ours + ours)); total_np=$((total_np + best))
done < "$tmp/ours"
python3 -c "print(f'total: ours {$total_ours} us, nextpnr {$total_np} us, ratio {$total_np/max($total_ours,1):.0f}x')"
