//! The API key never in logs. Its own test binary: a tracing subscriber set for one thread
//! shares the callsites' cached interest with every other thread of the process, so tests
//! running beside it could make it miss events.

#[allow(dead_code)]
#[path = "generation/helpers.rs"]
mod helpers;

use std::io::Write;
use std::sync::{Arc, Mutex};

use openqq_core::generation::GenerationBackend;
use openqq_generation::test_server::{Reply, Step};

use helpers::{counter, spawn};

const RIGHT: &str = "sk-right-0123456789abcdef";
const WRONG: &str = "sk-wrong-fedcba9876543210";

#[tokio::test]
async fn the_key_never_appears_in_logs() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = spawn(|o| {
        o.api_key = Some(RIGHT.into());
        o.script = vec![Step::new(Reply::ServerError { status: 500 })];
    })
    .await;
    let right = app.backend(|s| *s = s.clone().with_api_key(RIGHT));
    right.generate(&counter()).await.unwrap();
    tracing::debug!(backend = ?right, "the backend, as a log line would show it");
    let wrong = app.backend(|s| *s = s.clone().with_api_key(WRONG));
    wrong.generate(&counter()).await.unwrap_err();

    let text = logs.text();
    assert!(text.contains("Asking the model."), "nothing was logged: {text}");
    assert!(text.contains("trying again"), "the retry was not logged: {text}");
    assert!(text.contains("Generation failed."), "the failure was not logged: {text}");
    assert!(!text.contains(RIGHT) && !text.contains(WRONG), "a key shows in the logs:\n{text}");
}

/// A log buffer to hand a tracing subscriber.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
