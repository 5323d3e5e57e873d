//! Order and durability under SIGKILL: many tenants post client-numbered revisions while the
//! runner is killed mid-stream and restarted on the same data dir. Clients retry until 202 and
//! sometimes resend an acknowledged revision, so duplicates reach the log. Every acknowledged
//! revision must reach `results.ready` exactly once, in revision order, and every design must
//! end at its highest revision.

use openqq_e2e::ordering::sigkill_restarts_keep_every_acknowledged_revision_in_order;
use openqq_e2e::{blink_design, Server};
use std::time::Duration;

const TENANTS: usize = 8;
const REVISIONS: u64 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_revision_reaches_results_ready_once_in_order_across_sigkill_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--rate-limit", "100000/1s", "--batch-window", "20ms", "--batch-size", "7"];
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    sigkill_restarts_keep_every_acknowledged_revision_in_order(
        &mut server,
        blink_design("durable"),
        TENANTS,
        REVISIONS,
        Duration::ZERO,
    )
    .await;
}
