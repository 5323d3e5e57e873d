#!/usr/bin/env bash
# Creates the platform's table and bucket, as template.yaml declares them, on any AWS-compatible
# endpoint: LocalStack, moto's server, DynamoDB Local (table only). Idempotent: what exists is
# left alone. Uses the AWS CLI.
#
#   AWS_ENDPOINT_URL=http://127.0.0.1:4566 localstack/init/resources.sh
#   AWS_ENDPOINT_URL=$(scripts/services/moto.sh) localstack/init/resources.sh
#
# In LocalStack, mount this file into /etc/localstack/init/ready.d and it runs once the services
# are ready (AWS_ENDPOINT_URL defaults to LocalStack's own http://localhost:4566).
#
# Names: OPENQQ_DYNAMODB_TABLE (default openqq), OPENQQ_S3_BUCKET (default openqq-objects), the
# same variables `openqq up` reads, so a shell that sets them for one sets them for the other.
# A local endpoint takes any credentials; the defaults below are only set when none are.
set -euo pipefail

endpoint=${AWS_ENDPOINT_URL:-http://localhost:4566}
table=${OPENQQ_DYNAMODB_TABLE:-openqq}
bucket=${OPENQQ_S3_BUCKET:-openqq-objects}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-${AWS_REGION:-us-east-1}}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}

# LocalStack's image may carry only its wrapper, awslocal, which sets the endpoint itself.
if command -v aws >/dev/null; then
  aws() { command aws --endpoint-url "$endpoint" --output text "$@"; }
else
  aws() { awslocal --output text "$@"; }
fi
log() { echo "resources.sh: $*" >&2; }

# The table: docs/DYNAMODB.md, openqq_adapters::dynamo::table::DEFINITION.
if aws dynamodb describe-table --table-name "$table" >/dev/null 2>&1; then
  log "table $table exists"
else
  log "creating table $table"
  aws dynamodb create-table --table-name "$table" \
    --billing-mode PAY_PER_REQUEST \
    --attribute-definitions AttributeName=pk,AttributeType=S AttributeName=sk,AttributeType=S \
      AttributeName=due_pk,AttributeType=S AttributeName=due_sk,AttributeType=S \
    --key-schema AttributeName=pk,KeyType=HASH AttributeName=sk,KeyType=RANGE \
    --global-secondary-indexes \
      'IndexName=due,KeySchema=[{AttributeName=due_pk,KeyType=HASH},{AttributeName=due_sk,KeyType=RANGE}],Projection={ProjectionType=KEYS_ONLY}' \
    >/dev/null
  aws dynamodb wait table-exists --table-name "$table"
  aws dynamodb update-time-to-live --table-name "$table" \
    --time-to-live-specification Enabled=true,AttributeName=expires_at >/dev/null
fi

# The bucket: objects/ kept, uploads/ expired after a day (docs/OBJECTS.md), no public access.
if aws s3api head-bucket --bucket "$bucket" >/dev/null 2>&1; then
  log "bucket $bucket exists"
else
  log "creating bucket $bucket"
  if [ "$AWS_DEFAULT_REGION" = us-east-1 ]; then
    aws s3api create-bucket --bucket "$bucket" >/dev/null
  else
    aws s3api create-bucket --bucket "$bucket" \
      --create-bucket-configuration "LocationConstraint=$AWS_DEFAULT_REGION" >/dev/null
  fi
  aws s3api put-public-access-block --bucket "$bucket" --public-access-block-configuration \
    BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true
  aws s3api put-bucket-lifecycle-configuration --bucket "$bucket" --lifecycle-configuration '{
    "Rules": [{
      "ID": "expire-unadopted-uploads",
      "Status": "Enabled",
      "Filter": {"Prefix": "uploads/"},
      "Expiration": {"Days": 1},
      "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}
    }]
  }'
fi
log "ready: OPENQQ_DYNAMODB_TABLE=$table OPENQQ_S3_BUCKET=$bucket at $endpoint"
