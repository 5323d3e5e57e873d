//! Consumer functions invoked over the Lambda Invoke API instead of in process: what
//! `openqq up --invoke URL` runs, with the real Lambda binaries serving under `cargo lambda
//! watch` (or any server of the Invoke API) at `URL`. The event-source-mapping emulator drives a
//! [`RemoteFunction`] exactly as it drives an in-process consumer: MSK-shaped batches in, a
//! partial-batch response (`batchItemFailures`) back. Records the trigger gives up on mean to the
//! platform what they mean in process (a revision marked failed, a batch item ended), so the
//! [`RemoteFunction`] hands them to the function's in-process twin.

use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use openqq_core::PortError;
use openqq_runtime::kafka::{records, Incoming};
use openqq_runtime::{BatchError, BatchHandler, FailedPartitions};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// One consumer function behind the Invoke API.
pub struct RemoteFunction {
    name: String,
    url: String,
    http: reqwest::Client,
    /// The same function in process, on the backends the remote one shares: it records what
    /// giving up on records means (their revisions failed and, for a batch's items, a
    /// `batch.item.ended` each), exactly as when it runs in process. It handles no batch.
    local: Arc<dyn BatchHandler>,
}

impl RemoteFunction {
    /// The function `local` names (its in-process twin, see [`RemoteFunction`]) at the Invoke
    /// API `base` (e.g. `http://127.0.0.1:9000`); each invocation may take up to `timeout`.
    pub fn new(base: &str, local: Arc<dyn BatchHandler>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder().timeout(timeout).build().expect("a plain HTTP client builds");
        let name = local.name().to_owned();
        let url = format!("{}/2015-03-31/functions/{name}/invocations", base.trim_end_matches('/'));
        Self { name, url, http, local }
    }

    async fn invoke(&self, event: &KafkaEvent) -> Result<Answer, InvokeError> {
        let resp = self.http.post(&self.url).json(event).send().await.map_err(InvokeError::Send)?;
        let status = resp.status();
        let function_error = resp.headers().get("x-amz-function-error").map(|v| v.to_str().unwrap_or("").to_owned());
        let body = resp.text().await.map_err(InvokeError::Read)?;
        if !status.is_success() || function_error.is_some() {
            let kind = function_error.unwrap_or_default();
            return Err(InvokeError::Failed { status, kind, body: truncate(&body, 512).to_owned() });
        }
        serde_json::from_str(&body)
            .map_err(|source| InvokeError::NotPartialBatch { body: truncate(&body, 512).to_owned(), source })
    }
}

/// Why an invocation gave no partial-batch response: every partition of the batch then fails.
#[derive(Debug, thiserror::Error)]
enum InvokeError {
    #[error("invoking")]
    Send(#[source] reqwest::Error),
    #[error("reading the answer")]
    Read(#[source] reqwest::Error),
    /// A status other than 2xx, or `X-Amz-Function-Error` (its value is `kind`); the body is
    /// clipped to 512 characters.
    #[error("the function answered {status} {kind}: {body}")]
    Failed { status: reqwest::StatusCode, kind: String, body: String },
    /// The body (clipped to 512 characters) is not a partial-batch response.
    #[error("the answer is no partial-batch response: {body}")]
    NotPartialBatch {
        body: String,
        #[source]
        source: serde_json::Error,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    batch_item_failures: Option<Vec<Failure>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Failure {
    item_identifier: Item,
}

#[derive(Deserialize)]
struct Item {
    partition: String,
    offset: u64,
}

#[async_trait]
impl BatchHandler for RemoteFunction {
    fn name(&self) -> &str {
        &self.name
    }

    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions> {
        let batch = records(&event);
        let answer = match self.invoke(&event).await {
            Ok(answer) => answer,
            // A failed invocation fails every partition of the batch from its first record.
            Err(e) => return Err(whole_batch(&self.name, &batch, &openqq_core::error::with_causes(&e))),
        };
        let failures = answer.batch_item_failures.unwrap_or_default();
        let mut failed = Vec::new();
        for f in failures {
            // The identifier must name a record of this batch; anything else fails the batch.
            let Some(rec) = batch.iter().find(|r| {
                format!("{}-{}", r.topic, r.partition) == f.item_identifier.partition
                    && r.offset == f.item_identifier.offset
            }) else {
                let reason = format!(
                    "the function named a record not in the batch: {}@{}",
                    f.item_identifier.partition, f.item_identifier.offset
                );
                return Err(whole_batch(&self.name, &batch, &reason));
            };
            failed.push(at(&self.name, rec, "the function reported this record failed"));
        }
        match FailedPartitions::earliest(failed) {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    async fn dead_lettered(&self, records: &[Incoming], reason: &str) -> Result<(), PortError> {
        self.local.dead_lettered(records, reason).await
    }
}

fn at(function: &str, rec: &Incoming, reason: &str) -> BatchError {
    BatchError {
        function: function.to_owned(),
        topic: rec.topic.clone(),
        partition: rec.partition,
        offset: rec.offset,
        reason: reason.to_owned(),
    }
}

/// Every partition of `batch` failed from its first record.
fn whole_batch(function: &str, batch: &[Incoming], reason: &str) -> FailedPartitions {
    FailedPartitions::earliest(batch.iter().map(|r| at(function, r, reason)))
        .unwrap_or_else(|| FailedPartitions(Vec::new()))
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openqq_core::batch::{BatchId, BatchItemEnded, ItemRef, ItemStatus};
    use openqq_core::event::Origin;
    use openqq_core::{CorrelationId, DesignId, Envelope, EventKind, LogRecord, TenantId};

    /// An Invoke API that always answers `answer` (with `X-Amz-Function-Error` when `error`).
    async fn invoke_api(answer: &'static str, error: bool) -> String {
        let app = axum::Router::new().route(
            "/2015-03-31/functions/{name}/invocations",
            axum::routing::post(move || async move {
                let mut headers = axum::http::HeaderMap::new();
                if error {
                    headers.insert("x-amz-function-error", "Unhandled".parse().unwrap());
                }
                (headers, answer)
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn batch() -> KafkaEvent {
        let rec = |partition, offset| LogRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp_ms: 0,
            key: "acme".into(),
            value: b"{}".to_vec(),
            headers: vec![],
        };
        openqq_runtime::kafka::to_event(&[rec(0, 4), rec(0, 5), rec(1, 9)])
    }

    /// The platform on embedded storage in `dir`, with two partitions per topic.
    async fn platform(dir: &std::path::Path) -> crate::Platform {
        let args = ["--data-dir", dir.to_str().unwrap(), "--partitions", "2"];
        crate::Platform::build(crate::Settings::from_args(args).unwrap()).await.unwrap()
    }

    async fn outcome(answer: &'static str, error: bool) -> Result<(), Vec<(u32, u64)>> {
        let dir = tempfile::tempdir().unwrap();
        let local = platform(dir.path()).await.handler(EventKind::DesignSubmitted).unwrap();
        let f = RemoteFunction::new(&invoke_api(answer, error).await, local, Duration::from_secs(5));
        f.handle(batch()).await.map_err(|failed| failed.0.iter().map(|e| (e.partition, e.offset)).collect())
    }

    #[tokio::test]
    async fn the_functions_partial_batch_answer_becomes_the_partitions_to_resume() {
        assert_eq!(outcome(r#"{"batchItemFailures":[]}"#, false).await, Ok(()));
        assert_eq!(outcome("null", false).await, Err(vec![(0, 4), (1, 9)]), "not a partial-batch response");
        let one = r#"{"batchItemFailures":[{"itemIdentifier":{"partition":"t-0","offset":5}}]}"#;
        assert_eq!(outcome(one, false).await, Err(vec![(0, 5)]));
        let unknown = r#"{"batchItemFailures":[{"itemIdentifier":{"partition":"t-0","offset":77}}]}"#;
        assert_eq!(outcome(unknown, false).await, Err(vec![(0, 4), (1, 9)]), "a record not in the batch fails it all");
        assert_eq!(outcome(r#"{"errorType":"Panic"}"#, true).await, Err(vec![(0, 4), (1, 9)]), "a function error");
    }

    /// What a remote function's trigger gives up on means what it means in process: a batch
    /// item's revision is failed and its batch hears that the item ended (failed), so the batch
    /// releases its next item; the batch function's own records name no item to end.
    #[tokio::test]
    async fn a_batch_item_the_trigger_gives_up_on_is_failed_and_ended_as_in_process() {
        let dir = tempfile::tempdir().unwrap();
        let platform = platform(dir.path()).await;
        let url = invoke_api(r#"{"batchItemFailures":[]}"#, false).await;
        let (tenant, design) = (TenantId::parse("acme").unwrap(), DesignId::parse("item-3").unwrap());
        let item = ItemRef { batch_id: BatchId::generate(), index: 3 };
        let origin = Origin {
            tenant_id: tenant.clone(),
            design_id: design.clone(),
            revision: 1,
            correlation_id: CorrelationId::parse("corr-item-3").unwrap(),
            batch: Some(item.clone()),
        };
        let record = Envelope::new(EventKind::DesignSubmitted, &origin, "batch", serde_json::json!({})).to_record();
        let given_up = LogRecord {
            topic: platform.topics.lane(EventKind::DesignSubmitted, true),
            partition: 0,
            offset: 7,
            timestamp_ms: 0,
            key: record.key,
            value: record.value,
            headers: record.headers,
        };
        let local = platform.handler(EventKind::DesignSubmitted).unwrap();
        let design_job = RemoteFunction::new(&url, local, Duration::from_secs(5));
        let reason = "the trigger gave up after every retry";
        design_job.dead_lettered(&openqq_runtime::kafka::in_event_order(&[given_up]), reason).await.unwrap();

        let stored = platform.backends.store.get(&tenant, &design).await.unwrap().expect("the revision is recorded");
        assert_eq!(stored.status, openqq_core::DesignStatus::Failed, "{stored:?}");
        let ended_topic = platform.topics.of(EventKind::BatchItemEnded);
        let partition = openqq_core::partition::partition_for(tenant.as_str(), 2);
        let ended = platform.backends.source.read(&ended_topic, partition, 0, 10).await.unwrap();
        assert_eq!(ended.len(), 1, "one batch.item.ended for the item");
        let env = Envelope::decode(&ended[0].value).unwrap();
        assert_eq!((env.kind, env.batch.as_ref()), (EventKind::BatchItemEnded, Some(&item)));
        let payload: BatchItemEnded = serde_json::from_str(env.payload.get()).unwrap();
        assert_eq!(payload.status, ItemStatus::Failed);

        let local = platform.handler(EventKind::BatchItemEnded).unwrap();
        let batch = RemoteFunction::new(&url, local, Duration::from_secs(5));
        batch.dead_lettered(&openqq_runtime::kafka::in_event_order(&ended), reason).await.unwrap();
        let after = platform.backends.source.read(&ended_topic, partition, 0, 10).await.unwrap();
        assert_eq!(after.len(), 1, "an item end given up on ends nothing more");
    }
}
