//! The batch function on AWS Lambda, triggered by MSK batches of `batch.submitted` (batches to fan
//! out) and of `batch.item.ended` (their items' ends): two triggers of one function, whose handler
//! tells the two apart by each record's event kind, so an invocation may carry either. Its
//! settings are the environment (`OPENQQ_*`, see `openqq_platform::Settings`).

fn main() -> Result<(), openqq_platform::lambda::Error> {
    openqq_platform::allocator::runtime()?
        .block_on(openqq_platform::lambda::consumer(openqq_core::EventKind::BatchSubmitted))
}
