//! The results function on AWS Lambda, triggered by MSK batches of `validation.finished`.

use openqq_results::Results;
use openqq_runtime::Consumer;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), openqq_runtime::lambda::Error> {
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let (backends, topics) = openqq_runtime::lambda::backends_from_env()?;
    let results = Results { store: backends.store.clone(), notifier: backends.notifier() };
    openqq_runtime::lambda::serve(Arc::new(Consumer::new(results, backends.log, topics))).await
}
