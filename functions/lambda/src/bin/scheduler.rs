//! The scheduler function on AWS Lambda, invoked every minute by an EventBridge rule: fires the
//! due schedules of every tenant from the store, a pass a second for most of the minute, through
//! the same scheduler and fire ledger as `openqq up`. Any other event is refused. Its settings are
//! the environment (`OPENQQ_*`, see `openqq_platform::Settings`).

fn main() -> Result<(), openqq_platform::lambda::Error> {
    openqq_platform::allocator::runtime()?.block_on(openqq_platform::lambda::scheduler())
}
