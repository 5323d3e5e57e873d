//! The results function on AWS Lambda, triggered by MSK batches of `validation.finished` and by a
//! schedule; it also sends the webhook deliveries the store queued. Its settings are the
//! environment (`OPENQQ_*`, see `openqq_platform::Settings`).

fn main() -> Result<(), openqq_platform::lambda::Error> {
    openqq_platform::allocator::runtime()?.block_on(openqq_platform::lambda::results())
}
