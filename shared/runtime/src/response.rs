//! A consumer function's answer to the MSK trigger: a partial-batch response (the event source
//! mapping has `FunctionResponseTypes: [ReportBatchItemFailures]`) naming, for each partition
//! that failed, the record to resume from.

use crate::consumer::FailedPartitions;
use serde::Serialize;

/// The answer to an MSK or self-managed Kafka trigger with `ReportBatchItemFailures`.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BatchResponse {
    pub batch_item_failures: Vec<BatchItemFailure>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemFailure {
    pub item_identifier: ItemIdentifier,
}

/// A record of a Kafka batch: its `topic-partition` key (as in the event's `records` map) and
/// offset.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ItemIdentifier {
    pub partition: String,
    pub offset: u64,
}

impl BatchResponse {
    /// Every record done (`None`), or the record each failed partition resumes from.
    pub fn new(failed: Option<FailedPartitions>) -> Self {
        let failures = failed.map(|f| f.0).unwrap_or_default();
        Self {
            batch_item_failures: failures
                .into_iter()
                .map(|e| BatchItemFailure {
                    item_identifier: ItemIdentifier {
                        partition: format!("{}-{}", e.topic, e.partition),
                        offset: e.offset,
                    },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BatchError;

    fn at(topic: &str, partition: u32, offset: u64) -> BatchError {
        BatchError { function: "f".into(), topic: topic.into(), partition, offset, reason: "r".into() }
    }

    #[test]
    fn a_batch_that_is_done_answers_no_failures_and_a_failed_one_names_each_partitions_first_failure() {
        assert_eq!(
            serde_json::to_value(BatchResponse::new(None)).unwrap(),
            serde_json::json!({"batchItemFailures": []})
        );
        let failed = FailedPartitions::earliest([at("t", 2, 9), at("t", 0, 5), at("t", 2, 7)]).unwrap();
        assert_eq!(
            serde_json::to_value(BatchResponse::new(Some(failed))).unwrap(),
            serde_json::json!({"batchItemFailures": [
                {"itemIdentifier": {"partition": "t-0", "offset": 5}},
                {"itemIdentifier": {"partition": "t-2", "offset": 7}},
            ]})
        );
    }
}
