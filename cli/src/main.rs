//! `openqq`: the OpenQQuantify platform on one machine.
//!
//! - `openqq up` runs the API and the three consumer functions over embedded storage.
//! - `openqq token` prints a bearer token the local server accepts.
//! - `openqq load` drives a running server with many tenants, open loop, and writes results.
//! - `openqq validate` validates an FPGA design from files, as the validation function does.
//! - `openqq dead-letters list|show|replay` reads the records the functions gave up on and
//!   publishes them to their source topics again.
//! - `openqq trace` follows one correlation id through the four services in `openqq up`'s log file.
//! - `openqq design show` prints one design as the API tells its tenant: source files, generation
//!   attempts, each check's verdict, a failing testbench's first failure and waveform.
//! - `openqq batch submit|status|items|cancel` submits a JSON-lines file of designs as one batch
//!   (following it to its end with `--wait`), and reads, pages through and cancels batches.
//! - `openqq schedule list|add|show|fires|pause|resume|trigger|backfill|delete` manages the
//!   schedules that submit batches on a timetable and reads each one's fire ledger.

mod batch;
mod batch_api;
mod batch_format;
mod dead_letters;
mod dead_letters_format;
mod design;
mod design_format;
mod design_wave;
mod load;
#[cfg(test)]
mod readme_tests;
mod schedule;
mod schedule_format;
mod token;
mod trace;
mod trace_format;
mod up;
mod validate;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "openqq",
    version,
    args_override_self = true,
    about = "OpenQQuantify: FPGA design jobs as event streams, on one machine or on AWS"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole platform: the API and the three consumer functions.
    Up(Box<up::UpCommand>),
    /// Print a bearer token for a tenant.
    Token(token::TokenArgs),
    /// Drive a running server with steady and bursting tenants; write latency and status results.
    Load(load::LoadArgs),
    /// Validate an FPGA design (exit 0: no errors, 1: errors found, 2: usage or unreadable file).
    Validate(validate::ValidateArgs),
    /// List, show and replay the records the consumer functions dead-lettered.
    DeadLetters(Box<dead_letters::DeadLettersArgs>),
    /// Follow one correlation id through the API and the consumer functions, from the log file.
    Trace(trace::TraceArgs),
    /// Show a design as the API tells its tenant: source files, generation attempts, checks.
    Design(design::DesignArgs),
    /// Submit many designs as one batch from a JSON-lines file; follow, list and cancel batches.
    Batch(batch::BatchArgs),
    /// Submit batches on a timetable: add, list, pause, resume and trigger schedules; read their fires.
    Schedule(schedule::ScheduleArgs),
}

fn main() -> ExitCode {
    // Before any thread exists: a thread that has taken a malloc arena keeps it.
    openqq_platform::allocator::cap_malloc_arenas();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    match cli.command {
        Command::Up(args) => report(up::run(*args)),
        Command::Token(args) => report(token::run(args)),
        Command::Load(args) => report(load::run(args)),
        Command::Validate(args) => validate::run(args),
        Command::DeadLetters(args) => report(dead_letters::run(*args)),
        Command::Trace(args) => report(trace::run(args)),
        Command::Design(args) => report(design::run(args)),
        Command::Batch(args) => report(batch::run(args)),
        Command::Schedule(args) => report(schedule::run(args)),
    }
}

fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
