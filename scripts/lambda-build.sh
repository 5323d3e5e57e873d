#!/usr/bin/env bash
# Builds the Lambda functions for AWS, as `sam build` does: `cargo lambda build --release` of
# every bin of openqq-lambda (api, the consumers, batch, scheduler) for the architecture
# template.yaml deploys (arm64), one `bootstrap` per bin under $CARGO_TARGET_DIR/lambda/<bin>/.
# Prints that directory on stdout.
#
#   scripts/lambda-build.sh                           # --release --arm64, as `sam build` does
#   scripts/lambda-build.sh --profile lambda-check --arm64   # what the test command runs
#   scripts/lambda-build.sh --release --x86-64        # or other cargo lambda build options
#   scripts/lambda-build.sh install                   # only installs what it needs
#
# What it needs, installed once when missing:
# - the Rust target aarch64-unknown-linux-gnu (`rustup target add`);
# - cargo-lambda and the zig compiler it cross-compiles and links with, from PyPI (pinned below),
#   in a virtualenv under ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools. zig links against an old
#   glibc, so the binaries run on provided.al2023 (glibc 2.34) whatever this machine's glibc is;
#   tests/e2e/artifacts.rs checks that, and that they need no library the runtime lacks.
# The C parts (librdkafka, OpenSSL for librdkafka, SQLite, aws-lc) are compiled by zig too and
# linked statically. A cold build takes about 10 minutes on 2 cores; later ones are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=services/common.sh
. scripts/services/common.sh

cargo_lambda_version=1.9.2
ziglang_version=0.17.1
venv=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/cargo-lambda-venv
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

log() { echo "lambda-build.sh: $*" >&2; }

if ! [ "$("$venv/bin/cargo-lambda" lambda --version 2>/dev/null | cut -d' ' -f2)" = "$cargo_lambda_version" ] ||
  ! "$venv/bin/pip" show ziglang 2>/dev/null | grep -x "Version: $ziglang_version" >/dev/null; then
  log "installing cargo-lambda $cargo_lambda_version and ziglang $ziglang_version into $venv"
  fresh_venv "$venv" "cargo-lambda==$cargo_lambda_version" "ziglang==$ziglang_version"
fi
if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  log "adding the Rust target aarch64-unknown-linux-gnu"
  rustup target add aarch64-unknown-linux-gnu >&2
fi
[ "${1:-}" != install ] || exit 0

export PATH=$venv/bin:$PATH
# librdkafka 2.12's CMake build includes <curl/curl.h> even when built without curl; zig searches
# only its own libc headers, so an empty stub stands in (functions/lambda/cross-include), passed
# in the target's CFLAGS (C_INCLUDE_PATH would do for the compiler, but cargo-lambda 1.9.2 panics
# when it is set). It is copied to a fixed place first: a path inside the checkout would differ
# between clones, and the C crates would be rebuilt whenever it did.
stub=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/cross-include
mkdir -p "$stub/curl"
cmp -s functions/lambda/cross-include/curl/curl.h "$stub/curl/curl.h" ||
  cp functions/lambda/cross-include/curl/curl.h "$stub/curl/curl.h"
export CFLAGS_aarch64_unknown_linux_gnu="-isystem $stub" CFLAGS_x86_64_unknown_linux_gnu="-isystem $stub"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--release --arm64)
log "cargo lambda build ${args[*]} --package openqq-lambda"
cargo lambda build --locked "${args[@]}" --package openqq-lambda >&2
echo "$CARGO_TARGET_DIR/lambda"
