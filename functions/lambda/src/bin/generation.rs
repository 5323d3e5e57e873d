//! The generation function on AWS Lambda, triggered by MSK batches of `generation.requested`:
//! the synthesis function's container image (`functions/lambda/synthesis.Dockerfile`) with this
//! bin as its entry point, since each attempt's Verilog is checked with Yosys and Icarus
//! Verilog. Its settings are the environment (`OPENQQ_*`, see `openqq_platform::Settings`).

fn main() -> Result<(), openqq_platform::lambda::Error> {
    openqq_platform::allocator::runtime()?
        .block_on(openqq_platform::lambda::consumer(openqq_core::EventKind::GenerationRequested))
}
