//! The design-job function on AWS Lambda, triggered by MSK batches of `design.submitted`.

#[tokio::main]
async fn main() -> Result<(), openqq_runtime::lambda::Error> {
    openqq_runtime::lambda::run_consumer(|b| openqq_design_job::DesignJob { store: b.store.clone() }).await
}
