//! A chaos run with a checker against a real `openqq up` on 127.0.0.1 (see
//! `openqq_e2e::chaos`): faults for SECONDS, then every promise checked; exit status 1 when one
//! was broken. The seed is printed; the same seed replays the same choice of faults.
//!
//!   cargo build -p openqq-cli --bin openqq
//!   cargo run -p openqq-e2e --example chaos -- [--mode embedded|kafka] [--seconds 120] [--seed N] [--tenants 6]
//!
//! Kafka mode needs tansu (`OPENQQ_TANSU_BIN`, as the test command sets it); the disk-full fault
//! needs root (a tmpfs for the data dir); the Redis faults need redis-server on PATH.

use openqq_e2e::chaos::{run, Config, Mode};
use std::time::Duration;

fn main() {
    let mut config = Config { mode: Mode::Embedded, seed: 0, duration: Duration::from_secs(120), tenants: 6 };
    let mut seed = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--mode" => config.mode = value().parse().unwrap_or_else(|e: String| usage(&e)),
            "--seconds" => config.duration = Duration::from_secs(number(&value(), "--seconds")),
            "--seed" => seed = Some(number(&value(), "--seed")),
            "--tenants" => config.tenants = number(&value(), "--tenants") as usize,
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    config.seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000
    });
    eprintln!("chaos: seed {} (replay with --seed {})", config.seed, config.seed);
    if std::env::var_os("OPENQQ_TEST_LOG").is_none() {
        // The platform's own log: errors only, so that the run's progress stays readable.
        std::env::set_var("OPENQQ_TEST_LOG", "error");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let report = runtime.block_on(run(&config)).unwrap_or_else(|e| {
        eprintln!("chaos: the run could not start or finish: {e:#}");
        std::process::exit(2)
    });
    println!("{report}");
    std::process::exit(if report.passed() { 0 } else { 1 });
}

fn number(s: &str, flag: &str) -> u64 {
    s.parse().unwrap_or_else(|_| usage(&format!("{flag} takes a whole number, not {s:?}")))
}

fn usage(problem: &str) -> ! {
    if !problem.is_empty() {
        eprintln!("chaos: {problem}");
    }
    eprintln!("usage: chaos [--mode embedded|kafka] [--seconds N] [--seed N] [--tenants N]");
    std::process::exit(if problem.is_empty() { 0 } else { 2 })
}
