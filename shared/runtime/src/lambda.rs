//! Serving a consumer on AWS Lambda: the MSK trigger invokes the function with a `KafkaEvent`;
//! a batch error fails the invocation so the trigger retries the batch.

use crate::consumer::BatchHandler;
use crate::kafka::parse_event;
use lambda_runtime::{service_fn, LambdaEvent};
use std::sync::Arc;

/// Runs `handler` under the Lambda runtime until the sandbox is shut down.
pub async fn serve(handler: Arc<dyn BatchHandler>) -> Result<(), Error> {
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let handler = handler.clone();
        async move {
            let kafka = parse_event(event.payload)?;
            handler.handle(kafka).await?;
            Ok::<(), Error>(())
        }
    }))
    .await
}

pub use lambda_runtime::Error;

/// Backends for a function on Lambda, from the environment. Until the cloud adapters land
/// (DynamoDB, MSK) this is the embedded backend in `OPENQQ_DATA_DIR` (default `/tmp/openqq`),
/// which serves `cargo lambda watch` on one machine, not a fleet.
pub fn backends_from_env() -> Result<(openqq_adapters::Backends, openqq_core::Topics), Error> {
    let dir = std::path::PathBuf::from(std::env::var("OPENQQ_DATA_DIR").unwrap_or_else(|_| "/tmp/openqq".into()));
    let partitions = match std::env::var("OPENQQ_PARTITIONS") {
        Ok(p) => p.parse().map_err(|_| format!("OPENQQ_PARTITIONS={p:?} is not a number"))?,
        Err(_) => 12,
    };
    let backends = openqq_adapters::Backends::embedded(&dir, partitions, openqq_adapters::Durability::Process)?;
    let topics = openqq_core::Topics::new(std::env::var("OPENQQ_TOPIC_PREFIX").unwrap_or_default());
    Ok((backends, topics))
}

/// The whole `main` of a consumer function on Lambda: JSON logs, backends from the environment
/// (built once, at cold start), the handler `make` builds from them, wrapped in a [`Consumer`].
pub async fn run_consumer<H, F>(make: F) -> Result<(), Error>
where
    H: crate::RecordHandler + 'static,
    F: FnOnce(&openqq_adapters::Backends) -> H,
{
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let (backends, topics) = backends_from_env()?;
    let handler = make(&backends);
    serve(Arc::new(crate::Consumer::new(handler, backends.log, topics))).await
}
