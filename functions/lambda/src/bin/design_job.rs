//! The design-job function on AWS Lambda, triggered by MSK batches of `design.submitted`. Its settings
//! are the environment (`OPENQQ_*`, see `openqq_platform::Settings`).

fn main() -> Result<(), openqq_platform::lambda::Error> {
    // Before the runtime's threads: a thread that has taken a malloc arena keeps it.
    openqq_platform::allocator::cap_malloc_arenas();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(openqq_platform::lambda::consumer(openqq_core::EventKind::DesignSubmitted))
}
