#!/usr/bin/env bash
# Fuzzes a live `openqq up` against the API contract (docs/openapi.yaml) with schemathesis:
# every documented operation gets generated valid and invalid requests, and every response must
# be documented (status, media type, headers, schema), no request may get a 5xx, invalid input
# must be refused, and requests without a token must be refused. Exits non-zero on any failure.
#
#   scripts/services/schemathesis.sh            # the test command runs exactly this
#   scripts/services/schemathesis.sh install    # only installs schemathesis
#
# schemathesis (PyPI, pinned below) is installed once into a virtualenv under
# ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools. The server is the debug build of `openqq`
# ($OPENQQ_BIN, else $CARGO_TARGET_DIR/debug/openqq, by default target/debug/openqq: build it
# first), started on a free loopback
# port with a throwaway data dir and stopped at the end.
#
# Knobs: OPENQQ_SCHEMATHESIS_EXAMPLES (test cases per operation and phase, default 40),
# OPENQQ_SCHEMATHESIS_SEED (default fixed, so a failure reproduces), OPENQQ_SCHEMATHESIS_TIMEOUT
# (seconds for the whole run, default 900).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
. scripts/services/common.sh

version=4.32.5
cache=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}
venv=$cache/tools/schemathesis-venv
bin=${OPENQQ_BIN:-${CARGO_TARGET_DIR:-target}/debug/openqq}
examples=${OPENQQ_SCHEMATHESIS_EXAMPLES:-40}
seed=${OPENQQ_SCHEMATHESIS_SEED:-20261130}
budget=${OPENQQ_SCHEMATHESIS_TIMEOUT:-900}

log() { echo "schemathesis.sh: $*" >&2; }

ensure_installed() {
  if [ "$("$venv/bin/st" --version 2>/dev/null)" = "st, version $version" ]; then
    return
  fi
  log "installing schemathesis $version into $venv"
  fresh_venv "$venv" "schemathesis==$version"
}

ensure_installed
[ "${1:-}" != install ] || exit 0
[ -x "$bin" ] || { log "$bin is missing: build it first (cargo build -p openqq-cli --bin openqq)"; exit 1; }

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# A generous request limit: the run checks the contract, not the limiter (429s are documented
# and would only hide the operations behind them).
env -u OPENQQ_JWT_SECRET RUST_LOG=warn "$bin" up --data-dir "$work/data" --listen 127.0.0.1:0 --log-format json \
  --metrics-listen 127.0.0.1:0 --rate-limit 100000/1s >"$work/stdout" 2>"$work/server.log" &
pid=$!
url=
for _ in $(seq 1 600); do
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/stdout" 2>/dev/null | head -n1 || true)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$url" ]; then
  log "openqq up did not start; its log:"
  tail -n 50 "$work/server.log" >&2
  exit 1
fi
token=$(env -u OPENQQ_JWT_SECRET "$bin" token --tenant schemathesis --data-dir "$work/data")
log "fuzzing $url ($examples examples per operation, seed $seed)"

started=$(date +%s)
status=0
# GET /v1/events/stream never ends (server-sent events): the events suite covers it instead.
# The hooks give every request a fresh Idempotency-Key (see the file for why).
# schemathesis keeps a cache of failures in its working directory: run it in the throwaway one.
# One worker: with two, hypothesis parses strategy sources on two threads at once and CPython
# 3.11's parser can fail with "AST constructor recursion depth mismatch" (a runtime error in the
# tool, not a finding about the API).
root=$(pwd)
cd "$work"
OPENQQ_SCHEMATHESIS_TOKEN=$token SCHEMATHESIS_HOOKS=$root/scripts/services/schemathesis_hooks.py \
  timeout --signal=TERM "$budget" "$venv/bin/st" --config-file "$root/scripts/services/schemathesis.toml" \
  run "$root/docs/openapi.yaml" \
  --url "$url" \
  --checks all \
  --exclude-path /v1/events/stream \
  --max-examples "$examples" \
  --seed "$seed" \
  --workers 1 \
  --request-timeout 10 \
  --generation-database none \
  --no-color || status=$?
log "finished in $(($(date +%s) - started)) s with exit status $status"
if [ "$status" -ne 0 ]; then
  [ "$status" -eq 124 ] && log "the run took longer than ${budget} s"
  log "the server's last log lines:"
  tail -n 20 "$work/server.log" >&2
fi
exit "$status"
