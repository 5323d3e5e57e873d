#!/usr/bin/env bash
# A throwaway Kafka-protocol broker for the tests and benchmarks: tansu, a Kafka-compatible
# broker with SQLite storage, on loopback and a free port. Prints the bootstrap address;
# `stop` stops the broker this script started.
#
#   brokers=$(scripts/services/tansu.sh)      # same as `scripts/services/tansu.sh start`
#   openqq up --kafka-brokers "$brokers"
#   scripts/services/tansu.sh stop
#   scripts/services/tansu.sh bin             # installs if needed; prints the binary's path
#
# tansu is not packaged for Debian; the first run builds it from crates.io with cargo into
# ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools, where later runs find it. It is built at
# opt-level 1: 6 minutes on 2 cores (11 CPU-minutes; sources already downloaded) where cargo's
# release default took 22 (about 40 CPU-minutes); a test broker needs correct more than fast.
# Broker state (pid, port, log, tansu.db) lives in
# ${OPENQQ_SERVICES_DIR:-${TMPDIR:-/tmp}/openqq-services}/tansu.
set -euo pipefail

version=0.6.0
root=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/tansu-$version-opt1
bin=$root/bin/tansu
state_dir=${OPENQQ_SERVICES_DIR:-${TMPDIR:-/tmp}/openqq-services}/tansu
pidfile=$state_dir/pid
portfile=$state_dir/port
logfile=$state_dir/log

log() { echo "tansu.sh: $*" >&2; }

ensure_installed() {
  [ -x "$bin" ] && return
  log "building tansu $version with SQLite storage into $root (once; about 6 minutes on 2 cores)"
  # Its own build directory: the project's may be built with other flags meanwhile.
  CARGO_TARGET_DIR=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/tansu-target CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    cargo install tansu --version "=$version" --features libsql --locked --root "$root" >&2
  rm -rf "${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/tansu-target"
}

# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
answers() { accepts "$1"; }

start() {
  ensure_installed
  mkdir -p "$state_dir"
  local port
  if port=$(running_port); then
    echo "127.0.0.1:$port"
    return
  fi
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 30000))
    # tansu panics when its port is taken, so only free ports are tried.
    if accepts "$port"; then continue; fi
    (cd "$state_dir" && RUST_LOG=${TANSU_LOG:-warn} exec "$bin" broker \
      --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
      --storage-engine sqlite://tansu.db >"$logfile" 2>&1) &
    if came_up "$!" "$port"; then
      echo "127.0.0.1:$port"
      return
    fi
  done
  log "tansu did not start; see $logfile"
  exit 1
}

stop() {
  local stuck
  stuck=$(terminate)
  [ -z "$stuck" ] || kill -9 "$stuck" 2>/dev/null || true
  rm -rf "$state_dir"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  bin) ensure_installed && echo "$bin" ;;
  brokers) port=$(running_port) && echo "127.0.0.1:$port" ;;
  *) echo "usage: $0 [start|stop|bin|brokers]" >&2; exit 2 ;;
esac
