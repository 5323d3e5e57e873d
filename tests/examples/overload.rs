//! The overload experiment, side by side in one run: nine tenants submit plain netlists and
//! designs given as source with a testbench while (1) nobody else works, (2) a tenant's burst of
//! designs to be written by a slow model runs with the bulkheads on (the default), and (3) the
//! same burst with `--bulkheads off` (the burst in the synthesis lane). Prints the nine's errors
//! and latency percentiles, those of the three sharing the generating tenant's partition, and the
//! generating tenant's throughput meanwhile.
//!
//!   cargo build --release -p openqq-cli --bin openqq
//!   cargo run --release -p openqq-e2e --example overload -- [BURST] [MODEL_LATENCY_MS] [ROUNDS]
//!
//! Defaults: a burst of 200, 2000 ms per model call, 10 rounds (one every 3 s). The `openqq`
//! beside the example is the one measured (`target/release/openqq`).

use openqq_e2e::openqq_bin;
use openqq_e2e::overload::{measure, quantile, Figures, Run};
use std::time::Duration;

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

fn row(name: &str, f: &Figures) {
    let all: Vec<Duration> = f.netlist.iter().chain(&f.source).copied().collect();
    println!(
        "| {name} | {} | {} / {} | {} / {} | {} / {} | {} | {:.1} |",
        f.errors.len(),
        ms(quantile(&f.netlist, 0.5)),
        ms(quantile(&f.netlist, 0.99)),
        ms(quantile(&f.source, 0.5)),
        ms(quantile(&f.source, 0.99)),
        ms(quantile(&f.same_partition, 0.5)),
        ms(quantile(&f.same_partition, 0.99)),
        ms(quantile(&all, 0.99)),
        f.generated as f64 * 60.0 / f.window.as_secs_f64(),
    );
}

/// A bar per run: the nine's p99 (all designs), to scale.
fn plot(runs: &[(&str, &Figures)]) {
    let p99 = |f: &Figures| {
        let all: Vec<Duration> = f.netlist.iter().chain(&f.source).copied().collect();
        quantile(&all, 0.99)
    };
    let top = runs.iter().map(|(_, f)| p99(f)).max().unwrap_or_default().as_secs_f64().max(0.001);
    println!("\n```\nthe nine tenants' p99, submission to ready (errors not counted)");
    for (name, f) in runs {
        let bar = "█".repeat((p99(f).as_secs_f64() / top * 50.0).round() as usize);
        println!("{name:>22} {bar} {} ms, {} errors", ms(p99(f)), f.errors.len());
    }
    println!("```");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let arg = |i: usize, default: u64| -> u64 {
        std::env::args().nth(i).map(|a| a.parse().expect("a number")).unwrap_or(default)
    };
    let (burst, latency, rounds) = (arg(1, 200) as usize, Duration::from_millis(arg(2, 2000)), arg(3, 10) as usize);
    let bin = openqq_bin();
    let run = |bulkheads: bool, burst: usize| Run {
        bulkheads,
        burst,
        model_latency: latency,
        rounds,
        pace: Duration::from_secs(3),
        within: Duration::from_secs(60),
    };
    eprintln!("the nine alone…");
    let alone = measure(&bin, &run(true, 0)).await?;
    eprintln!("a burst of {burst} generations, bulkheads on…");
    let on = measure(&bin, &run(true, burst)).await?;
    eprintln!("the same burst, bulkheads off…");
    let off = measure(&bin, &run(false, burst)).await?;
    println!(
        "burst of {burst} designs written by a model answering in {} ms; nine tenants, {rounds} rounds \
         one every 3 s (a third of the designs source with a testbench), a design counted as an error \
         past 60 s\n",
        latency.as_millis()
    );
    println!(
        "| run | errors | netlist p50 / p99 (ms) | source p50 / p99 (ms) | the 3 on its partition \
         p50 / p99 (ms) | all p99 (ms) | generated / min |"
    );
    println!("|---|---|---|---|---|---|---|");
    row("no burst", &alone);
    row("burst, bulkheads on", &on);
    row("burst, bulkheads off", &off);
    let all_p99 = |f: &Figures| quantile(&f.netlist.iter().chain(&f.source).copied().collect::<Vec<_>>(), 0.99);
    println!(
        "\np99 with the burst ÷ p99 without: bulkheads on {:.2}×, off {:.2}× (errors on: {}, off: {})",
        all_p99(&on).as_secs_f64() / all_p99(&alone).as_secs_f64(),
        all_p99(&off).as_secs_f64() / all_p99(&alone).as_secs_f64(),
        on.errors.len(),
        off.errors.len()
    );
    plot(&[("no burst", &alone), ("burst, bulkheads on", &on), ("burst, bulkheads off", &off)]);
    for e in off.errors.iter().take(3) {
        eprintln!("an error with the bulkheads off: {e}");
    }
    Ok(())
}
