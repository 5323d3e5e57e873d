//! Consumer functions invoked over the Lambda Invoke API instead of in process: what
//! `openqq up --invoke URL` runs, with the real Lambda binaries serving under `cargo lambda
//! watch` (or any server of the Invoke API) at `URL`. The event-source-mapping emulator drives a
//! [`RemoteFunction`] exactly as it drives an in-process consumer: MSK-shaped batches in, a
//! partial-batch response (`batchItemFailures`) back.

use async_trait::async_trait;
use aws_lambda_events::event::kafka::KafkaEvent;
use openqq_core::{DesignWrites, PortError};
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
    /// Where revisions the trigger gives up on are marked failed (the store the function shares).
    store: Arc<dyn DesignWrites>,
}

impl RemoteFunction {
    /// The function `name` at the Invoke API `base` (e.g. `http://127.0.0.1:9000`); each
    /// invocation may take up to `timeout`.
    pub fn new(base: &str, name: &str, store: Arc<dyn DesignWrites>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder().timeout(timeout).build().expect("a plain HTTP client builds");
        let url = format!("{}/2015-03-31/functions/{name}/invocations", base.trim_end_matches('/'));
        Self { name: name.to_owned(), url, http, store }
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
        for rec in records {
            openqq_runtime::dead_letter::fail_revision(self.store.as_ref(), rec, reason).await?;
        }
        Ok(())
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
    use openqq_core::LogRecord;

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

    async fn outcome(answer: &'static str, error: bool) -> Result<(), Vec<(u32, u64)>> {
        let dir = tempfile::tempdir().unwrap();
        let store =
            openqq_adapters::Backends::embedded(dir.path(), 2, openqq_adapters::Durability::Process).unwrap().store;
        let f = RemoteFunction::new(&invoke_api(answer, error).await, "design-job", store, Duration::from_secs(5));
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
}
