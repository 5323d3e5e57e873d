//! The results function on AWS Lambda, triggered by MSK batches of `validation.finished`.

#[tokio::main]
async fn main() -> Result<(), openqq_runtime::lambda::Error> {
    openqq_runtime::lambda::run_consumer(|b| openqq_results::Results { store: b.store.clone(), notifier: b.notifier() })
        .await
}
