//! The validation function on AWS Lambda, triggered by MSK batches of `validation.requested`.

#[tokio::main]
async fn main() -> Result<(), openqq_runtime::lambda::Error> {
    openqq_runtime::lambda::run_consumer(|b| openqq_validation::Validation {
        store: b.store.clone(),
        objects: b.objects.clone(),
    })
    .await
}
