#!/usr/bin/env bash
# Creates the platform's topics (openqq_core::Topics::all, under OPENQQ_TOPIC_PREFIX) on a
# Kafka-protocol broker, as they must exist on MSK before the stack is deployed. Idempotent.
#
#   OPENQQ_KAFKA_BROKERS=127.0.0.1:9092 localstack/init/topics.sh
#
# Uses Apache Kafka's kafka-topics (kafka-topics.sh) or Redpanda's rpk, whichever is on PATH.
# Without either, `openqq up --kafka-brokers HOST:PORT` creates the missing topics itself at start
# (OPENQQ_KAFKA_CREATE_TOPICS defaults to true with --kafka-brokers).
#
# OPENQQ_PARTITIONS (default 12, as `openqq up`) partitions per topic; replication 1.
set -euo pipefail

brokers=${OPENQQ_KAFKA_BROKERS:?set OPENQQ_KAFKA_BROKERS=HOST:PORT}
prefix=${OPENQQ_TOPIC_PREFIX:-}
partitions=${OPENQQ_PARTITIONS:-12}
topics=(design.submitted validation.requested synthesis.requested generation.requested validation.started validation.finished results.ready batch.submitted batch.item.ended batch.design.submitted batch.validation.requested batch.synthesis.requested batch.generation.requested batch.validation.started batch.validation.finished batch.results.ready dead-letter)

log() { echo "topics.sh: $*" >&2; }

if tool=$(command -v kafka-topics || command -v kafka-topics.sh); then
  for t in "${topics[@]}"; do
    log "$prefix$t"
    "$tool" --bootstrap-server "$brokers" --create --if-not-exists --topic "$prefix$t" \
      --partitions "$partitions" --replication-factor 1 >/dev/null
  done
elif command -v rpk >/dev/null; then
  for t in "${topics[@]}"; do
    log "$prefix$t"
    rpk topic create "$prefix$t" --brokers "$brokers" -p "$partitions" -r 1 >/dev/null 2>&1 ||
      rpk topic describe "$prefix$t" --brokers "$brokers" >/dev/null
  done
else
  log "neither kafka-topics nor rpk is on PATH; \`openqq up --kafka-brokers $brokers\` creates the topics at start"
  exit 1
fi
