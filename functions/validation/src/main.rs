//! The validation function on AWS Lambda, triggered by MSK batches of `validation.requested`.

use openqq_runtime::Consumer;
use openqq_validation::Validation;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), openqq_runtime::lambda::Error> {
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let (backends, topics) = openqq_runtime::lambda::backends_from_env()?;
    let validation = Validation { store: backends.store.clone() };
    openqq_runtime::lambda::serve(Arc::new(Consumer::new(validation, backends.log, topics))).await
}
