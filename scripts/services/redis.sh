#!/usr/bin/env bash
# A throwaway redis-server for the tests and benchmarks: loopback only, a free port, no
# persistence. Prints the URL to use; `stop` stops the server this script started.
#
#   url=$(scripts/services/redis.sh)          # same as `scripts/services/redis.sh start`
#   OPENQQ_TEST_REDIS_URL=$url cargo test -p openqq-adapters --test redis_conformance
#   scripts/services/redis.sh stop
#
# Starting again while the server runs prints the same URL. Installs the Debian package
# `redis-server` when it is missing. State (pid, port, log) lives in
# ${OPENQQ_SERVICES_DIR:-${TMPDIR:-/tmp}/openqq-services}.
set -euo pipefail

state_dir=${OPENQQ_SERVICES_DIR:-${TMPDIR:-/tmp}/openqq-services}
pidfile=$state_dir/redis.pid
portfile=$state_dir/redis.port
logfile=$state_dir/redis.log

log() { echo "redis.sh: $*" >&2; }

ensure_installed() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return
  log "redis-server is not installed; installing the Debian package."
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends redis-server >&2; then
    apt-get update >&2
    apt-get install -y --no-install-recommends redis-server >&2
  fi
}

# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
answers() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }

start() {
  ensure_installed
  mkdir -p "$state_dir"
  local port
  if port=$(running_port); then
    echo "redis://127.0.0.1:$port"
    return
  fi
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 30000))
    # Taken if something accepts a connection there.
    if accepts "$port"; then continue; fi
    rm -f "$pidfile"
    redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
      --daemonize yes --pidfile "$pidfile" --logfile "$logfile" --dir "$state_dir" >&2 || continue
    for _ in $(seq 1 100); do
      if answers "$port"; then
        echo "$port" >"$portfile"
        echo "redis://127.0.0.1:$port"
        return
      fi
      sleep 0.05
    done
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  log "redis-server did not start; see $logfile"
  exit 1
}

stop() {
  terminate >/dev/null
  rm -f "$pidfile" "$portfile"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  url) port=$(running_port) && echo "redis://127.0.0.1:$port" ;;
  *) echo "usage: $0 [start|stop|url]" >&2; exit 2 ;;
esac
