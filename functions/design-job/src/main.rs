//! The design-job function on AWS Lambda, triggered by MSK batches of `design.submitted`.

use openqq_design_job::DesignJob;
use openqq_runtime::Consumer;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), openqq_runtime::lambda::Error> {
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let (backends, topics) = openqq_runtime::lambda::backends_from_env()?;
    let job = DesignJob { store: backends.store.clone() };
    openqq_runtime::lambda::serve(Arc::new(Consumer::new(job, backends.log, topics))).await
}
