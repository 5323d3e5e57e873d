//! The chaos run's short form: a minute of combined faults on each log (embedded, and Kafka on a
//! tansu broker of the run's own), then the checker (`openqq_e2e::chaos`). A seed that ever
//! failed stays here as a test of its own. Longer runs and their figures: docs/RELIABILITY.md.

use openqq_e2e::chaos::{run, Config, Mode};
use std::time::Duration;

async fn survives(mode: Mode, seed: u64) {
    let config = Config { mode, seed, duration: Duration::from_secs(60), tenants: 6 };
    let report = run(&config).await.expect("the chaos run starts and finishes");
    eprintln!("{report}");
    assert!(report.passed(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embedded_under_kills_redis_and_disk_faults_poison_and_a_failing_receiver_every_promise_holds() {
    survives(Mode::Embedded, 20261202).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_kafka_under_kills_broker_redis_and_disk_faults_poison_and_a_failing_receiver_every_promise_holds() {
    survives(Mode::Kafka, 20261203).await;
}
