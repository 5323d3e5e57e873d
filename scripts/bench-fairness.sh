#!/usr/bin/env bash
# Fairness and bursts: the per-tenant limiter and the bounded pool under load, measured with
# `openqq load` against a release `openqq up` on 127.0.0.1 with a fresh data dir per server.
#
#   scripts/bench-fairness.sh            # builds, runs both experiments (~2.5 min), writes
#                                        # docs/BENCHMARKS-fairness.md and docs/bench-fairness/*.json
#   SECONDS_PER_RUN=10 scripts/bench-fairness.sh     # shorter runs
#
# 1. Noisy tenant: 9 compliant tenants and 1 noisy one at 25 requests/s each; the noisy one
#    bursts to 10x. Limiter ON (10/250ms per tenant) vs OFF (1,000,000/1s), each with and
#    without the burst. The server has a simulated slow downstream (20 ms, 8 at once: ~400
#    requests/s) behind a pool of 8 workers and a queue of 32.
# 2. Pool: 20 tenants at 12/s (240/s) against a downstream of 50 ms, 8 at once (~160/s), so
#    1.5x overload. Unbounded (a task per request: --workers 1000000 --queue 0) vs bounded
#    (--workers 8 --queue 16). Limiter off.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${SECONDS_PER_RUN:-15}
cargo build --release -p openqq-cli
bin=${CARGO_TARGET_DIR:-target}/release/openqq
out=docs/bench-fairness
mkdir -p "$out"
work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME UP-FLAGS...: a fresh `openqq up` on a free port; sets $url and $data.
start() {
  local name=$1; shift
  data="$work/$name"
  mkdir -p "$data"
  RUST_LOG=warn "$bin" up --data-dir "$data" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --log-format json "$@" >"$work/$name.stdout" 2>"$work/$name.stderr" &
  pid=$!
  url=
  for _ in $(seq 200); do
    url=$(grep -o 'http://[^ ]*' "$work/$name.stdout" | head -n1 || true)
    [ -n "$url" ] && return
    sleep 0.05
  done
  echo "openqq up ($name) did not start:" >&2; cat "$work/$name.stderr" >&2; exit 1
}

stop() { kill -TERM "$pid"; wait "$pid" || true; pid=; }

# load NAME LOAD-FLAGS...
load() {
  local name=$1; shift
  echo "==> $name" >&2
  "$bin" load --url "$url" --data-dir "$data" --duration "${secs}s" --tenant-prefix "$name" --out "$out/$name.json" "$@"
}

slow20=(--simulated-downstream-latency 20ms --simulated-downstream-capacity 8 --workers 8 --queue 32)
tenants=(--tenants 9 --noisy 1 --rate 25 --burst-start "$((secs / 3))s" --burst-length "$((secs / 3))s")

start limiter-on --rate-limit 10/250ms "${slow20[@]}"
load noisy-on-steady "${tenants[@]}" --burst-factor 1
load noisy-on-burst "${tenants[@]}" --burst-factor 10
stop
start limiter-off --rate-limit 1000000/1s "${slow20[@]}"
load noisy-off-steady "${tenants[@]}" --burst-factor 1
load noisy-off-burst "${tenants[@]}" --burst-factor 10
stop

slow50=(--rate-limit 1000000/1s --simulated-downstream-latency 50ms --simulated-downstream-capacity 8)
overload=(--tenants 20 --noisy 0 --rate 12 --timeout 5s)
start unbounded "${slow50[@]}" --workers 1000000 --queue 0
load pool-unbounded "${overload[@]}"
stop
start bounded "${slow50[@]}" --workers 8 --queue 16
load pool-bounded "${overload[@]}"
stop

python3 scripts/bench-fairness-report.py "$out" > docs/BENCHMARKS-fairness.md
echo "wrote docs/BENCHMARKS-fairness.md" >&2

# Plots, with matplotlib from PyPI in a cached virtualenv.
venv=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/plot-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$venv" && "$venv/bin/pip" install -q matplotlib
fi
"$venv/bin/python" scripts/plot-fairness.py "$out" && echo "wrote $out/noisy.png and $out/pool.png" >&2
