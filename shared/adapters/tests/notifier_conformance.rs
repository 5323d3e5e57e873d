//! The broadcast notifier (live-stream subscribers in one process) against the notifier
//! conformance suite.

use openqq_adapters::conformance::notifier::{self, Harness};
use openqq_adapters::conformance::unique;
use openqq_adapters::BroadcastNotifier;
use openqq_core::{Notification, Notifier, TenantId};
use std::sync::Arc;
use tokio::sync::mpsc::{self, UnboundedSender};

fn tenants() -> Vec<TenantId> {
    vec![TenantId::parse(unique("a")).unwrap(), TenantId::parse(unique("b")).unwrap()]
}

/// A broadcast notifier with one subscriber reporting what it receives.
fn stream(report: UnboundedSender<uuid::Uuid>) -> Arc<BroadcastNotifier> {
    let broadcast = Arc::new(BroadcastNotifier::new(1024));
    let mut subscriber = broadcast.subscribe();
    tokio::spawn(async move {
        while let Ok(n) = subscriber.recv().await {
            let _ = report.send(n.event_id);
        }
    });
    broadcast
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broadcast_notifier_passes_the_notifier_suite() {
    let (report, received) = mpsc::unbounded_channel();
    notifier::run(Harness { notifier: stream(report), received, tenants: tenants() }).await;
}

/// A notifier that reports each notification twice.
struct Stuttering(UnboundedSender<uuid::Uuid>);

#[async_trait::async_trait]
impl Notifier for Stuttering {
    async fn notify(&self, n: &Notification) -> openqq_core::ports::PortResult<()> {
        let _ = self.0.send(n.event_id);
        let _ = self.0.send(n.event_id);
        Ok(())
    }
}

/// The suite means something: a notifier that delivers a notification twice fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "the subscriber gets every notification once, in the order notified")]
async fn the_suite_fails_a_notifier_that_delivers_twice() {
    let (report, received) = mpsc::unbounded_channel();
    notifier::run(Harness { notifier: Arc::new(Stuttering(report)), received, tenants: tenants() }).await;
}
