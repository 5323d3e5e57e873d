//! OpenQQuantify's HDL toolchain: designs as Verilog/SystemVerilog source, checked by the real
//! tools. Three entry points, each a blocking call that runs tools in a sandbox (call them from
//! `tokio::task::spawn_blocking` in async code):
//!
//! - [`synthesize`]: Yosys `synth_ice40` / `synth_ecp5` to a JSON netlist (the input of
//!   `openqq-fpga`'s validator), with Yosys's errors and warnings as located [`Finding`]s.
//! - [`simulate`]: a self-checking testbench with Icarus Verilog (`iverilog -g2012`, `vvp -N`):
//!   pass, fail, compile error, timeout, output limit; a failing one with its [`Waveform`] around
//!   the first failure (`wave.rs`: the run again with a value change dump, cut by [`vcd`]).
//! - [`check_equivalence`]: a design against a reference with a Yosys miter and SAT: a proof, a
//!   counterexample, or unknown, with the bounded depth used for sequential designs.
//!
//! Every source is hostile. Before any tool runs, [`source`] checks names, counts and sizes
//! against [`Limits`] and [`precheck`] refuses constructs that reach the machine (paths in
//! `` `include ``, `$fopen`, `$readmemh`, …, `$system` and unknown system tasks). Each tool run
//! (`sandbox.rs`) gets a fresh work directory holding only the submitted files, an empty
//! environment, CPU, memory and file-size limits, a wall-clock timeout that kills its process
//! group, and a cap on the output read. Output is parsed by pure functions ([`findings`],
//! [`sat`]) tested without the tools.
//!
//! Errors: [`HdlError::Refused`] is the tenant's input (permanent; the message says what to
//! change); [`HdlError::ToolMissing`] and [`HdlError::Io`] are the platform's. Everything a tool
//! says about the source — syntax errors, failing tests, timeouts — is a verdict in a report.
//!
//! `corpus/` holds small designs (design, testbench, reference, a wrong variant, a broken one,
//! a spec) that the tests drive through all three entry points; see `corpus/README.md`.

mod equiv;
mod error;
pub mod findings;
mod limits;
pub mod precheck;
mod sandbox;
pub mod sat;
mod sim;
pub mod source;
mod synth;
pub mod vcd;
mod wave;

pub use equiv::{
    check_equivalence, port_differences, EquivalenceReport, EquivalenceVerdict, PortDifference, Proof, Side,
    UnknownReason,
};
pub use error::{HdlError, Refusal};
pub use findings::{Finding, Severity};
pub use limits::Limits;
pub use sat::{Counterexample, CounterexampleStep, Port, SignalValue};
pub use sim::{simulate, TestReport, TestVerdict};
pub use source::{Family, Source, SourceFile, Testbench};
pub use synth::{synthesize, SynthVerdict, Synthesis};
pub use wave::Waveform;
