#!/usr/bin/env bash
# Benchmark 1: limiter decisions/s through RedisRateLimiter against raw `redis-benchmark`
# EVALSHA of the same script on the same Redis, side by side, as a ratio.
#
#   scripts/bench-limiter.sh [--seconds 3] [--rounds 3] [--tasks 64] [--tenants 10000] [--limit 100] ...
#
# Uses OPENQQ_TEST_REDIS_URL when set; otherwise starts a throwaway Redis and stops it after.
# Flags are passed to the bench (see shared/adapters/examples/limiter_bench.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

started_here=
url=${OPENQQ_TEST_REDIS_URL:-}
if [ -z "$url" ]; then
  url=$(scripts/services/redis.sh start)
  started_here=1
fi
cleanup() { [ -n "$started_here" ] && scripts/services/redis.sh stop; }
trap cleanup EXIT

cargo build --release -p openqq-adapters --example limiter_bench
target=${CARGO_TARGET_DIR:-target}
"$target/release/examples/limiter_bench" --url "$url" "$@"
