//! In-process notifier: results-ready notifications on a broadcast channel, which live streams
//! (the UI) subscribe to. A slow subscriber misses old notifications rather than slowing the
//! results function down.

use async_trait::async_trait;
use openqq_core::ports::PortResult;
use openqq_core::{Notification, Notifier};
use tokio::sync::broadcast;

pub struct BroadcastNotifier {
    tx: broadcast::Sender<Notification>,
}

impl BroadcastNotifier {
    /// A notifier whose subscribers may lag by up to `capacity` notifications.
    pub fn new(capacity: usize) -> Self {
        Self { tx: broadcast::channel(capacity.max(1)).0 }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Notification> {
        self.tx.subscribe()
    }
}

#[async_trait]
impl Notifier for BroadcastNotifier {
    async fn notify(&self, notification: &Notification) -> PortResult<()> {
        // No subscribers is not an error: nobody is watching.
        let _ = self.tx.send(notification.clone());
        Ok(())
    }
}
