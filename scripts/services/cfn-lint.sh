#!/usr/bin/env bash
# Lints the deployment template (template.yaml) offline with the two tools a platform engineer
# already uses: `cfn-lint template.yaml` and `sam validate --lint`. Both must be clean; exits
# non-zero otherwise. No AWS account, credentials or network are needed or used.
#
#   scripts/services/cfn-lint.sh            # the test command runs exactly this
#
# cfn-lint and aws-sam-cli (PyPI, pinned below) are installed once into a virtualenv under
# ${OPENQQ_CACHE_DIR:-~/.cache/openqq}/tools. Neither tool catches everything (a starting
# position, batch size or runtime that AWS would refuse, a reference to a missing resource inside
# an environment block all pass both): tests/e2e/template.rs holds the template to the code.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
. scripts/services/common.sh

cfn_lint_version=1.58.0
sam_version=1.170.0
venv=${OPENQQ_CACHE_DIR:-$HOME/.cache/openqq}/tools/cfn-lint-venv

log() { echo "cfn-lint.sh: $*" >&2; }

installed() {
  [ "$("$venv/bin/cfn-lint" --version 2>/dev/null)" = "cfn-lint $cfn_lint_version" ] &&
    [ "$("$venv/bin/sam" --version 2>/dev/null)" = "SAM CLI, version $sam_version" ]
}

ensure_installed() {
  if installed; then
    return
  fi
  log "installing cfn-lint $cfn_lint_version and aws-sam-cli $sam_version into $venv"
  fresh_venv "$venv" "cfn-lint==$cfn_lint_version" "aws-sam-cli==$sam_version"
}

ensure_installed

# A region, and no credentials of any kind: nothing here may reach an account.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_ROLE_ARN AWS_WEB_IDENTITY_TOKEN_FILE
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
export SAM_CLI_TELEMETRY=0
# `sam validate --lint` runs the cfn-lint of its own virtualenv.
export PATH=$venv/bin:$PATH

status=0
log "cfn-lint template.yaml"
cfn-lint template.yaml || status=1
log "sam validate --lint"
sam validate --lint --template-file template.yaml || status=1
exit $status
