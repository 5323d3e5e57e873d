//! The design-job function on AWS Lambda, triggered by MSK batches of `design.submitted`. Its settings
//! are the environment (`OPENQQ_*`, see `openqq_platform::Settings`).

fn main() -> Result<(), openqq_platform::lambda::Error> {
    openqq_platform::allocator::runtime()?
        .block_on(openqq_platform::lambda::consumer(openqq_core::EventKind::DesignSubmitted))
}
