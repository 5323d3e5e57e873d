//! The validation function on AWS Lambda, triggered by MSK batches of `validation.requested`.
//! `OPENQQ_VALIDATION_BUDGET` (a duration, default 5s) bounds each design's validation time; a
//! setting that cannot be read stops the cold start.

#[tokio::main]
async fn main() -> Result<(), openqq_runtime::lambda::Error> {
    let budget = openqq_validation::budget_from_env()?;
    openqq_runtime::lambda::run_consumer(move |b| openqq_validation::Validation {
        store: b.store.clone(),
        objects: b.objects.clone(),
        budget,
    })
    .await
}
