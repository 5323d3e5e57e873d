#!/usr/bin/env bash
# A throwaway AWS stand-in for the tests and benchmarks: moto's server (DynamoDB with conditions,
# transactions and TTL; S3), in memory, on loopback and a free port. Prints the endpoint URL;
# `stop` stops the server this script started.
#
#   endpoint=$(scripts/services/moto.sh)      # same as `scripts/services/moto.sh start`
#   OPENQQ_TEST_DYNAMODB_ENDPOINT=$endpoint \
#     cargo test -p openqq-adapters --features dynamodb --test dynamo_conformance
#   scripts/services/moto.sh stop
#
# Starting again while the server runs prints the same URL. moto (PyPI `moto[server]`, pinned
# below) is installed once into a virtualenv under ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools.
# Server state (pid, port, log) lives in ${OPENQQ_SERVICES_DIR:-${TMPDIR:-/tmp}/openqq-services}/moto.
# The server accepts any credentials; clients still need some (AWS_ACCESS_KEY_ID=test …).
set -euo pipefail

version=5.2.5
venv=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/moto-venv
state_dir=${OPENQQ_SERVICES_DIR:-${TMPDIR:-/tmp}/openqq-services}/moto
pidfile=$state_dir/pid
portfile=$state_dir/port
logfile=$state_dir/log

log() { echo "moto.sh: $*" >&2; }

ensure_installed() {
  if [ -x "$venv/bin/moto_server" ] &&
    [ "$("$venv/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null)" = "$version" ]; then
    return
  fi
  log "installing moto[server] $version into $venv"
  fresh_venv "$venv" "moto[server]==$version"
}

# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
# moto answers its own dashboard path once its routes are loaded.
answers() {
  accepts "$1" && "$venv/bin/python" -c 'import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/moto-api/" % sys.argv[1], timeout=2)' "$1" 2>/dev/null
}

start() {
  ensure_installed
  mkdir -p "$state_dir"
  local port
  if port=$(running_port); then
    echo "http://127.0.0.1:$port"
    return
  fi
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 30000))
    if accepts "$port"; then continue; fi
    # One request at a time: moto's DynamoDB undoes a cancelled transaction by restoring a
    # copy of the whole table taken when it began, which, with requests served in parallel
    # threads, also undoes (or half-undoes) writes that committed meanwhile.
    "$venv/bin/python" -c 'import sys
from moto import server
run = server.run_simple
server.run_simple = lambda *a, **k: run(*a, **{**k, "threaded": False})
server.main(sys.argv[1:])' -H 127.0.0.1 -p "$port" >"$logfile" 2>&1 &
    if came_up "$!" "$port"; then
      echo "http://127.0.0.1:$port"
      return
    fi
  done
  log "moto_server did not start; see $logfile"
  exit 1
}

stop() {
  local stuck
  stuck=$(terminate)
  [ -z "$stuck" ] || kill -9 "$stuck" 2>/dev/null || true
  rm -f "$pidfile" "$portfile"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  install) ensure_installed ;;
  url) port=$(running_port) && echo "http://127.0.0.1:$port" ;;
  *) echo "usage: $0 [start|stop|install|url]" >&2; exit 2 ;;
esac
