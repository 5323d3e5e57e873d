//! Designs given as source: what the platform adds to the tools. The same files (the corpus's
//! counter, its testbench and reference) go through `openqq up` (in process, one design at a
//! time, 202 → `ready`) and straight to the tools on the command line (`yosys` synthesis,
//! `iverilog` + `vvp` for the testbench, a Yosys miter for the reference), side by side in one
//! run; the ratio is the platform's overhead.
//!
//!   cargo run --release -p openqq-e2e --example source -- [JOBS]
//!
//! Three shapes, JOBS (default 10) each: synthesis only, with the testbench, and with the
//! testbench and the reference.

use openqq_e2e::{App, Client};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn corpus(name: &str) -> String {
    openqq_e2e::hdl::corpus("counter", name)
}

fn job(tests: bool, reference: bool) -> Value {
    openqq_e2e::hdl::counter_job("design.v", tests, reference.then_some("reference.v"))
}

fn run(dir: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).current_dir(dir).output().expect("the tool runs");
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The tools alone, as a user would run them on the same files.
fn direct(tests: bool, reference: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, file) in [("counter.v", "design.v"), ("tb.v", "tb.v"), ("ref.v", "reference.v")] {
        std::fs::write(d.join(name), corpus(file)).unwrap();
    }
    let t0 = Instant::now();
    run(d, "yosys", &["-q", "-p", "read_verilog -sv counter.v; synth_ice40 -top counter -json net.json"]);
    if tests {
        run(d, "iverilog", &["-g2012", "-s", "tb", "-o", "tb.vvp", "counter.v", "tb.v"]);
        run(d, "vvp", &["-N", "tb.vvp"]);
    }
    if reference {
        // What the platform's equivalence check runs: each side elaborated on its own, then a
        // miter proven bounded from zero and by induction.
        let prepare = |file: &str, module: &str| {
            format!(
                "read_verilog -sv {file}; hierarchy -check -top counter; proc; flatten; memory; async2sync; \
                 dffunmap; opt; wreduce; opt_clean; rename counter {module}; write_rtlil {module}.il"
            )
        };
        run(d, "yosys", &["-q", "-p", &prepare("counter.v", "gold")]);
        run(d, "yosys", &["-q", "-p", &prepare("ref.v", "gate")]);
        let prove = "read_rtlil gold.il; read_rtlil gate.il; miter -equiv -flatten -make_outputs gold gate m; \
                     hierarchy -top m; opt -fast; sat -verify -seq 10 -prove trigger 0 -set-init-zero m; \
                     sat -tempinduct-inductonly -prove trigger 0 -maxsteps 8 m";
        run(d, "yosys", &["-q", "-p", prove]);
    }
    t0.elapsed()
}

async fn platform(client: &Client, job: &Value) -> Duration {
    let t0 = Instant::now();
    let (status, accepted) = client.post("/v1/designs", job).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["design_id"].as_str().unwrap();
    let design = client.wait_for(id, Duration::from_secs(120), |d| d["status"] == "ready").await.unwrap();
    assert_eq!(design["verdict"], "pass", "{design}");
    t0.elapsed()
}

fn mean_ms(samples: &[Duration]) -> f64 {
    samples.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / samples.len() as f64
}

#[tokio::main]
async fn main() {
    let jobs: usize = std::env::args().nth(1).map(|a| a.parse().expect("a number of jobs")).unwrap_or(10);
    let dir = tempfile::tempdir().unwrap();
    let server = App::start(dir.path(), &[]).unwrap();
    let client = Client::new(&server.url, &server.token("bench"));
    println!("{jobs} jobs of each shape, one at a time; mean milliseconds per job");
    println!("{:<32} {:>10} {:>10} {:>8} {:>10}", "shape", "platform", "tools", "ratio", "jobs/s");
    for (label, tests, reference) in [
        ("synthesis", false, false),
        ("synthesis + testbench", true, false),
        ("synthesis + testbench + proof", true, true),
    ] {
        let body = job(tests, reference);
        let (mut through, mut alone) = (Vec::new(), Vec::new());
        // Interleaved, so load on the shared machine falls on both alike.
        for _ in 0..jobs {
            through.push(platform(&client, &body).await);
            alone.push(tokio::task::spawn_blocking(move || direct(tests, reference)).await.unwrap());
        }
        let (p, t) = (mean_ms(&through), mean_ms(&alone));
        println!("{label:<32} {p:>10.1} {t:>10.1} {:>8.2} {:>10.2}", p / t, 1000.0 / p);
    }
}
