//! The AWS Lambda Runtime API (2018-06-01), as Lambda serves it to a function's `bootstrap`, on
//! 127.0.0.1: a function binary started with `AWS_LAMBDA_RUNTIME_API` set to [`RuntimeApi::addr`]
//! long-polls `invocation/next` and posts each answer back, exactly as on Lambda, and
//! [`RuntimeApi::invoke`] hands it one event and waits for that answer.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>>;

#[derive(Clone)]
struct Shared {
    events: Arc<tokio::sync::Mutex<mpsc::Receiver<(String, Value)>>>,
    pending: Pending,
}

pub struct RuntimeApi {
    /// `HOST:PORT`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub addr: String,
    queue: mpsc::Sender<(String, Value)>,
    pending: Pending,
    task: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    pub async fn start() -> Self {
        let (queue, events) = mpsc::channel(16);
        let pending: Pending = Arc::default();
        let shared = Shared { events: Arc::new(tokio::sync::Mutex::new(events)), pending: pending.clone() };
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(response))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, queue, pending, task }
    }

    /// Invokes the function with `event`; its answer, or the error it reported, within `within`.
    pub async fn invoke(&self, event: Value, within: Duration) -> Result<Value, Value> {
        let id = uuid_like();
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id.clone(), tx);
        self.queue.send((id, event)).await.expect("the Runtime API is running");
        tokio::time::timeout(within, rx).await.expect("the function answered in time").expect("an answer")
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!("00000000-0000-4000-8000-{:012x}", N.fetch_add(1, Ordering::Relaxed))
}

/// `GET invocation/next`: waits for an event, then hands it over with the invocation's headers.
async fn next(State(s): State<Shared>) -> (HeaderMap, String) {
    let (id, event) = s.events.lock().await.recv().await.expect("events keep coming until the test ends");
    let deadline =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap() + Duration::from_secs(60);
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
    headers.insert("lambda-runtime-deadline-ms", deadline.as_millis().to_string().parse().unwrap());
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:openqq-test".parse().unwrap(),
    );
    headers.insert("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    (headers, event.to_string())
}

async fn response(State(s): State<Shared>, Path(id): Path<String>, body: String) -> StatusCode {
    answer(&s, &id, Ok(serde_json::from_str(&body).unwrap_or(Value::String(body))))
}

async fn error(State(s): State<Shared>, Path(id): Path<String>, body: String) -> StatusCode {
    answer(&s, &id, Err(serde_json::from_str(&body).unwrap_or(Value::String(body))))
}

fn answer(s: &Shared, id: &str, result: Result<Value, Value>) -> StatusCode {
    match s.pending.lock().unwrap().remove(id) {
        Some(tx) => {
            let _ = tx.send(result);
            StatusCode::ACCEPTED
        }
        None => StatusCode::NOT_FOUND,
    }
}
