//! The overload experiment as a test, with generous bounds (docs/BENCHMARKS.md has its figures):
//! a tenant's burst of designs to be written by a slow model must not reach the nine tenants
//! submitting netlists and source jobs meanwhile, and with `--bulkheads off` the damage shows.

use openqq_e2e::hdl::tools;
use openqq_e2e::openqq_bin;
use openqq_e2e::overload::{measure, quantile, Figures, Run};
use std::time::Duration;

fn run(bulkheads: bool, burst: usize) -> Run {
    Run {
        bulkheads,
        burst,
        model_latency: Duration::from_millis(1000),
        rounds: 3,
        pace: Duration::from_secs(3),
        within: Duration::from_secs(30),
    }
}

fn p99(f: &Figures) -> Duration {
    quantile(&f.netlist.iter().chain(&f.source).copied().collect::<Vec<_>>(), 0.99)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_slow_generations_holds_up_nobody_else_with_the_bulkheads_and_does_without_them() {
    if !tools() {
        return;
    }
    let bin = openqq_bin();
    let alone = measure(&bin, &run(true, 0)).await.unwrap();
    assert!(alone.errors.is_empty(), "without a burst: {:?}", alone.errors);
    assert_eq!(alone.netlist.len() + alone.source.len(), 27, "nine tenants, three rounds");

    let on = measure(&bin, &run(true, 100)).await.unwrap();
    assert!(on.errors.is_empty(), "with the bulkheads, the burst reached the nine: {:?}", on.errors);
    let allowed = p99(&alone) * 2 + Duration::from_secs(3);
    assert!(p99(&on) <= allowed, "the nine's p99 {:?} with the burst, {:?} without", p99(&on), p99(&alone));
    assert!(on.generated > 0, "the generating tenant got designs through meanwhile");

    // Without them the burst runs in the synthesis lane: the three tenants on its partition wait
    // behind a hundred model calls for their source jobs.
    let off = measure(&bin, &run(false, 100)).await.unwrap();
    let worst = |f: &Figures| quantile(&f.same_partition, 1.0);
    assert!(
        !off.errors.is_empty() || worst(&off) > worst(&on) * 3,
        "with the bulkheads off the burst should show: worst {:?} (on: {:?}), errors {:?}",
        worst(&off),
        worst(&on),
        off.errors
    );
}
