#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what the tests need (FPGA toolchain, Redis, a
# Kafka-protocol broker), starts the servers on 127.0.0.1, runs the suites, and stops what it
# started.
#
#   scripts/test.sh
#
# Heavy things are cached so repeated runs stay fast: Debian packages are installed only when
# missing, cargo's build directory lives in ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/target unless
# CARGO_TARGET_DIR is set, and the Kafka-protocol broker (tansu, built from crates.io: about 6
# minutes the first time) in ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

need_debs=()
command -v yosys >/dev/null || need_debs+=(yosys)
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
if [ ${#need_debs[@]} -gt 0 ]; then
  step "Installing Debian packages: ${need_debs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_debs[@]}" >/dev/null
fi

# The web UI's browser tests (the e2e suite's `ui` module): Debian's Chromium, driven by
# playwright-core and checked by axe-core, both pinned in tests/ui/package-lock.json and installed
# into tests/ui/node_modules (ignored by git) with npm's cache under the tools cache.
install_ui_test_tools() {
  local debs=()
  command -v chromium >/dev/null || debs+=(chromium)
  command -v node >/dev/null || debs+=(nodejs)
  command -v npm >/dev/null || debs+=(npm)
  if [ ${#debs[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
  fi
  # playwright-core needs Node.js 20 or later.
  if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    echo "the browser tests need Node.js 20 or later; this is $(node --version)" >&2
    exit 1
  fi
  npm ci --prefix tests/ui --no-audit --no-fund --loglevel=error \
    --cache "${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/npm"
}
step "Installing the browser tests' tools: chromium, and playwright-core and axe-core from npm"
install_ui_test_tools

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

step "Installing tansu, a Kafka-protocol broker (built once, then cached)"
OPENQQ_TANSU_BIN=$(scripts/services/tansu.sh bin)
export OPENQQ_TANSU_BIN

step "Starting redis-server, tansu and moto (DynamoDB) on 127.0.0.1"
export OPENQQ_SERVICES_DIR=$(mktemp -d)
cleanup() {
  scripts/services/redis.sh stop >/dev/null 2>&1 || true
  scripts/services/tansu.sh stop >/dev/null 2>&1 || true
  scripts/services/moto.sh stop >/dev/null 2>&1 || true
  rm -rf "$OPENQQ_SERVICES_DIR"
}
trap cleanup EXIT
OPENQQ_TEST_REDIS_URL=$(scripts/services/redis.sh start)
export OPENQQ_TEST_REDIS_URL
echo "redis at $OPENQQ_TEST_REDIS_URL"
OPENQQ_TEST_KAFKA_BROKERS=$(scripts/services/tansu.sh start)
export OPENQQ_TEST_KAFKA_BROKERS
echo "tansu at $OPENQQ_TEST_KAFKA_BROKERS"
OPENQQ_TEST_DYNAMODB_ENDPOINT=$(scripts/services/moto.sh start)
export OPENQQ_TEST_DYNAMODB_ENDPOINT OPENQQ_TEST_S3_ENDPOINT=$OPENQQ_TEST_DYNAMODB_ENDPOINT # moto serves both
echo "moto (DynamoDB) at $OPENQQ_TEST_DYNAMODB_ENDPOINT"

step "Recording the FPGA tools' verdicts live (yosys, nextpnr-ice40, icepack)"
oracle=$(mktemp -d)
trap 'cleanup; rm -rf "$oracle"' EXIT
python3 shared/fpga/fixtures/generate.py --check
bash shared/fpga/fixtures/bad/generate.sh "$oracle"
export FPGA_ORACLE_DIR=$oracle
# The hard-IP corpus: 630 seeded designs, synthesised and run through nextpnr-ice40's packer and
# full flow (3½ to 6 minutes on 2 cores; shared/fpga/HARDIP.md).
python3 shared/fpga/fixtures/hardip/generate.py "$oracle/hardip"
export FPGA_HARDIP_DIR=$oracle/hardip
# The ECP5 corpus: 177 seeded designs, synthesised and placed by Yosys and nextpnr-ecp5 built to
# WebAssembly (YoWASP, from PyPI once, into the tools cache: shared/fpga/scripts/ecp5-tools.sh;
# shared/fpga/fixtures/ecp5/README.md says what it costs).
python3 shared/fpga/fixtures/ecp5/generate.py "$oracle/ecp5"
export FPGA_ECP5_DIR=$oracle/ecp5

step "Checking formatting (rustfmt.toml) and lints (clippy, warnings are errors)"
cargo fmt --all --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The backend features can be turned off: without them openqq builds and links no Kafka client
# and no AWS SDK.
cargo clippy --locked -p openqq-cli --no-default-features --all-targets -- -D warnings
if cargo tree --locked -p openqq-cli --no-default-features -e normal | grep -E 'rdkafka|aws-sdk-|aws-config'; then
  echo "openqq --no-default-features still links the crates above" >&2
  exit 1
fi

step "Linting the deployment template (template.yaml): cfn-lint and sam validate --lint, offline"
scripts/services/cfn-lint.sh

step "Checking the Prometheus config and alert rules, and their unit tests (promtool)"
promtool check config infra/prometheus/prometheus.yml
promtool check rules infra/prometheus/rules.yml
promtool test rules infra/prometheus/tests.yml

step "Building"
cargo build --locked --workspace --all-targets
# The fuzz targets are not a workspace member (fuzzing needs nightly); they must still build.
cargo build --locked --manifest-path shared/fpga/fuzz/Cargo.toml
# The noisy-neighbour suite measures what an attacker's work costs others, as a deployment
# would pay it: against the release build.
cargo build --locked --release -p openqq-cli --bin openqq
export OPENQQ_RELEASE_BIN=$CARGO_TARGET_DIR/release/openqq
# The Lambda functions as `cargo lambda watch` runs them (`cargo run -p openqq-lambda`) in the
# lambda suite: fresh here, so the suite does not wait for a build.
cargo build --locked -p openqq-lambda --bins
export OPENQQ_TEST_CARGO_LAMBDA=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/cargo-lambda-venv/bin/cargo-lambda

step "Building the Lambda artifacts for AWS (cargo lambda build --release --arm64)"
OPENQQ_LAMBDA_ARTIFACTS=$(scripts/lambda-build.sh)
export OPENQQ_LAMBDA_ARTIFACTS

step "Fuzzing a live openqq up against the API contract (docs/openapi.yaml) with schemathesis"
scripts/services/schemathesis.sh

step "Running every suite"
status=0
cargo test --locked --workspace --no-fail-fast || status=$?

step "Running the DynamoDB store's suites and the webhook worker on it (feature dynamodb) against moto"
cargo test --locked -p openqq-adapters --features dynamodb,s3 --lib --test dynamo_conformance --test s3_conformance \
  --test webhook_delivery || status=$?
exit $status
