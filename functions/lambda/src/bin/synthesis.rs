//! The synthesis function on AWS Lambda, triggered by MSK batches of `synthesis.requested`: a
//! container-image function (`functions/lambda/synthesis.Dockerfile`), since it runs Yosys and
//! Icarus Verilog. Its settings are the environment (`OPENQQ_*`, see `openqq_platform::Settings`).

fn main() -> Result<(), openqq_platform::lambda::Error> {
    openqq_platform::allocator::runtime()?
        .block_on(openqq_platform::lambda::consumer(openqq_core::EventKind::SynthesisRequested))
}
