#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what the tests need (FPGA toolchain, Redis, a
# Kafka-protocol broker, a DynamoDB-compatible server, Chromium), starts the servers on
# 127.0.0.1, runs the suites, stops what it started, and ends with each step's time and the test
# totals.
#
#   scripts/test.sh
#
# Heavy things are cached so repeated runs stay fast: Debian packages are installed only when
# missing; cargo builds into ./target (the same build `cargo run --release` uses) unless
# CARGO_TARGET_DIR says otherwise; the tools built or installed from crates.io, PyPI and npm live
# in ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools. Installs and the broker's build run in the
# background while the workspace compiles. The FPGA tools' verdicts are committed with the recipe
# that made them and recorded again only when it changed (shared/fpga/fixtures/oracle.py).
set -euo pipefail
cd "$(dirname "$0")/.."

export STEPS_LOGS
STEPS_LOGS=$(mktemp -d)
# shellcheck source=lib/steps.sh
. scripts/lib/steps.sh

export OPENQQ_SERVICES_DIR
OPENQQ_SERVICES_DIR=$(mktemp -d)
oracle=$(mktemp -d)
stop_services() {
  local service
  for service in redis tansu moto; do
    scripts/services/$service.sh stop >/dev/null 2>&1 || true
  done
  rm -rf "$OPENQQ_SERVICES_DIR"
}
cleanup() {
  # Background steps still running when a step fails end with the script.
  stop_background
  stop_services
  rm -rf "$oracle" "$STEPS_LOGS"
}
trap cleanup EXIT
# A script killed outright (SIGKILL, or its process group killed) runs no trap, and the servers
# it started would run on (moto holding gigabytes): a watcher in a session of its own stops them
# once this script is gone.
setsid bash -c "$(declare -f stop_services)"'
  while kill -0 "$1" 2>/dev/null; do sleep 2; done
  stop_services' _ $$ </dev/null >/dev/null 2>&1 &

cache=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

step "Installing Debian packages when missing"
need_debs=()
command -v yosys >/dev/null || need_debs+=(yosys)
command -v iverilog >/dev/null || need_debs+=(iverilog)
command -v nextpnr-ice40 >/dev/null || need_debs+=(nextpnr-ice40)
command -v icepack >/dev/null || need_debs+=(fpga-icestorm)
# (compgen -G is true when a pattern matches at least one file.)
compgen -G '/usr/share/fpga-icestorm/chipdb/chipdb-*.txt' >/dev/null || compgen -G '/usr/share/icebox/chipdb-*.txt' >/dev/null ||
  need_debs+=(fpga-icestorm-chipdb)
command -v redis-server >/dev/null || need_debs+=(redis-server)
# promtool checks and unit-tests the alert rules; the observability suite scrapes with prometheus.
command -v promtool >/dev/null || need_debs+=(prometheus)
# librdkafka (the Kafka adapter) builds with cmake, and the OpenSSL it links statically from
# source with perl and make. Nothing links the system's OpenSSL: the rest of TLS is rustls.
# librdkafka's CMake config includes curl.h even when built without curl, so the headers must be
# present (the Lambda cross build uses a stub instead; scripts/lambda-build.sh).
command -v cmake >/dev/null || need_debs+=(cmake)
compgen -G '/usr/include/curl/curl.h' >/dev/null || compgen -G '/usr/include/*/curl/curl.h' >/dev/null ||
  need_debs+=(libcurl4-openssl-dev)
command -v perl >/dev/null || need_debs+=(perl)
command -v make >/dev/null || need_debs+=(make)
# The web UI's browser tests (the e2e suite's `ui` module): Debian's Chromium, driven by
# playwright-core (Node.js 20 or later) and checked by axe-core.
command -v chromium >/dev/null || need_debs+=(chromium)
command -v node >/dev/null || need_debs+=(nodejs)
command -v npm >/dev/null || need_debs+=(npm)
if [ ${#need_debs[@]} -gt 0 ]; then
  echo "installing: ${need_debs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_debs[@]}" >/dev/null
fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "the browser tests need Node.js 20 or later; this is $(node --version)" >&2
  exit 1
fi

# Downloads and installs, beside the compiler: the browser tests' npm packages (pinned in
# tests/ui/package-lock.json), and the PyPI tools, each into its own virtualenv once.
install_tools() {
  npm ci --prefix tests/ui --no-audit --no-fund --loglevel=error --cache "$cache/tools/npm"
  scripts/services/moto.sh install
  scripts/services/schemathesis.sh install
  scripts/lambda-build.sh install
  # The deployment template's lint needs nothing built: cfn-lint and `sam validate --lint`, offline.
  scripts/services/cfn-lint.sh
}
background tools install_tools
# The Kafka-protocol broker, built from crates.io once (about 6 minutes), at low priority: it is
# needed only when the suites run.
background tansu nice -n 10 scripts/services/tansu.sh bin
# The FPGA tools' verdicts: the committed recordings stand unless their recipe changed, in which
# case they are recorded live here (yosys, nextpnr-ice40, icepack; Yosys and nextpnr-ecp5 built to
# WebAssembly for ECP5) and the tests read the live ones.
record_oracle() {
  # nextpnr-ice40 re-checks the utilisation recordings of fixtures/cases (seconds).
  python3 shared/fpga/fixtures/generate.py --check
  nice -n 10 python3 shared/fpga/fixtures/oracle.py check "$oracle/live" >"$oracle/vars"
}
background oracle record_oracle

step "Checking formatting (rustfmt.toml)"
cargo fmt --all --check

# Two more builds run in the background, at lower priority than the workspace build, so they use
# the time it leaves a core idle (its links and its long single-crate compiles).
#
# The noisy-neighbour suite measures what an attacker's work costs others, as a deployment would
# pay it: against the release `openqq`. It runs on the embedded backends only, so it is built
# without the cloud ones (no AWS SDK, no librdkafka and OpenSSL from source); `cargo run
# --release` builds those on top of it.
background release nice -n 5 cargo build --locked --release -p openqq-cli --bin openqq --no-default-features
# The Lambda functions for AWS (arm64), once cargo-lambda and Zig are installed. What the artifacts
# suite reads (architecture, glibc symbol versions, needed libraries) does not depend on
# optimisation, so they are built with the lighter `lambda-check` profile; `scripts/lambda-build.sh`
# alone builds them `--release`, as a deployment does.
lambda_artifacts() {
  until [ -s "$STEPS_LOGS/tools.rc" ]; do sleep 2; done
  [ "$(cat "$STEPS_LOGS/tools.rc")" = 0 ] || { echo "the tools step failed"; exit 1; }
  nice -n 5 scripts/lambda-build.sh --profile lambda-check --arm64 >"$STEPS_LOGS/lambda-artifacts.dir"
}
background lambda-artifacts lambda_artifacts

# Clippy lints the workspace's own crates while they are built for the tests: cargo runs them
# through clippy-driver (RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` does) with warnings as errors,
# so the dependencies are compiled once, for the build, instead of once more for a separate check.
step "Building the workspace with clippy's lints (warnings are errors)"
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS=-Dwarnings
RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
cargo build --locked --workspace --all-targets
# The Lambda functions as `cargo lambda watch` runs them in the lambda suite
# (`cargo run -p openqq-lambda -F dev-build`): fresh here, so the suite does not wait for a build.
# `dev-build` gives their dependencies the workspace build's features, so only the four binaries
# compile; the check names any dependency that would be compiled a second time.
cargo build --locked -p openqq-lambda --bins -F dev-build
scripts/lib/same-build.py
# The fuzz targets (fuzz/, not a workspace member), built with libFuzzer's coverage flags into a
# directory of their own and each run for a few seconds from its committed seeds, at the lowest
# priority: a decoder that panics on its seeds or close to them fails the run (scripts/fuzz.sh).
background fuzz nice -n 10 scripts/fuzz.sh 4

step "Checking the build without the backend features (no Kafka client, no AWS SDK) and what the API links"
cargo clippy --locked -p openqq-cli --no-default-features --all-targets -- -D warnings
if cargo tree --locked -p openqq-cli --no-default-features -e normal | grep -E 'rdkafka|aws-sdk-|aws-config'; then
  echo "openqq --no-default-features still links the crates above" >&2
  exit 1
fi
# The API function links no store, limiter or HTTP client of its own: it reaches them through
# the ports the platform hands it.
if cargo tree --locked -p openqq-api -e normal | grep -E 'rusqlite|libsqlite3-sys|redis|reqwest|rdkafka|aws-sdk-'; then
  echo "openqq-api links the crates above" >&2
  exit 1
fi

step "Checking the capacity plan's model (docs/CAPACITY.md, scripts/capacity.py --check)"
python3 scripts/capacity.py --check

step "Checking the Prometheus config and alert rules, and their unit tests (promtool)"
promtool check config infra/prometheus/prometheus.yml
promtool check rules infra/prometheus/rules.yml
promtool test rules infra/prometheus/tests.yml

join tools
export OPENQQ_TEST_CARGO_LAMBDA=$cache/tools/cargo-lambda-venv/bin/cargo-lambda

step "Fuzzing a live openqq up against the API contract (docs/openapi.yaml) with schemathesis"
scripts/services/schemathesis.sh

join release
export OPENQQ_RELEASE_BIN=$CARGO_TARGET_DIR/release/openqq
join lambda-artifacts
OPENQQ_LAMBDA_ARTIFACTS=$(cat "$STEPS_LOGS/lambda-artifacts.dir")
export OPENQQ_LAMBDA_ARTIFACTS
join oracle
while IFS='=' read -r var dir; do
  export "$var=$dir"
  echo "$var=$dir (recorded live)"
done <"$oracle/vars"
join tansu
join fuzz

step "Starting redis-server, tansu and moto (DynamoDB and S3) on 127.0.0.1"
OPENQQ_TEST_REDIS_URL=$(scripts/services/redis.sh start)
OPENQQ_TEST_KAFKA_BROKERS=$(scripts/services/tansu.sh start)
OPENQQ_TEST_DYNAMODB_ENDPOINT=$(scripts/services/moto.sh start)
OPENQQ_TEST_S3_ENDPOINT=$OPENQQ_TEST_DYNAMODB_ENDPOINT # moto serves both
OPENQQ_TANSU_BIN=$(scripts/services/tansu.sh bin)
export OPENQQ_TEST_REDIS_URL OPENQQ_TEST_KAFKA_BROKERS OPENQQ_TEST_DYNAMODB_ENDPOINT OPENQQ_TEST_S3_ENDPOINT OPENQQ_TANSU_BIN
echo "redis at $OPENQQ_TEST_REDIS_URL, tansu at $OPENQQ_TEST_KAFKA_BROKERS, moto at $OPENQQ_TEST_DYNAMODB_ENDPOINT"

# Every suite, the DynamoDB and S3 stores' on moto among them: the workspace build turns on every
# backend feature of openqq-adapters (openqq-cli's defaults).
step "Running every suite"
status=0
# Into a file, shown as it grows, rather than through a pipe: a pipe stays open while any process
# a test started and leaked holds it, and the script would wait for that process too.
cargo test --locked --workspace --no-fail-fast >"$STEPS_LOGS/tests.log" 2>&1 &
tests=$!
tail -n +1 -f --pid="$tests" "$STEPS_LOGS/tests.log"
wait "$tests" || status=$?
count_tests "$STEPS_LOGS/tests.log"
if [ "$status" -ne 0 ]; then
  # A Kafka suite's failure may be the shared broker's: show what it complained of, if anything
  # (creating a topic that exists is every suite's start, not a complaint).
  complaints=$(sed 's/\x1b\[[0-9;]*m//g' "$OPENQQ_SERVICES_DIR/tansu/log" 2>/dev/null |
    grep -E ' (ERROR|WARN) ' | grep -v TopicAlreadyExists | tail -n 40 || true)
  if [ -n "$complaints" ]; then
    echo "The shared Kafka broker (tansu) logged, last 40 lines:"
    echo "$complaints"
  fi
fi
summary
exit $status
