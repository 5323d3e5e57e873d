//! Wake-ups for consumers waiting on a topic, shared by the event-log adapters: a publish in
//! this process wakes every waiter on its topic at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct AppendSignal(Mutex<HashMap<String, Arc<Notify>>>);

impl AppendSignal {
    fn handle(&self, topic: &str) -> Arc<Notify> {
        self.0.lock().unwrap().entry(topic.to_owned()).or_default().clone()
    }

    /// Something was appended to `topic`.
    pub fn appended(&self, topic: &str) {
        self.handle(topic).notify_waiters();
    }

    /// Resolves on the next append to `topic`, or after `timeout`.
    pub async fn wait(&self, topic: &str, timeout: Duration) {
        let notify = self.handle(topic);
        let _ = tokio::time::timeout(timeout, notify.notified()).await;
    }
}
