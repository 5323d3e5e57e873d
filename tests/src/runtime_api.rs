//! What `cargo lambda watch` serves, on 127.0.0.1: the AWS Lambda Runtime API (2018-06-01) for
//! each function's `bootstrap`, on a port of its own (started with `AWS_LAMBDA_RUNTIME_API` set to
//! [`LambdaEmulator::runtime_api`], it long-polls `invocation/next` and posts each answer back,
//! exactly as on Lambda), and the Lambda Invoke API (`POST /2015-03-31/functions/{name}/
//! invocations`) that hands a function one event and answers with what it returned. Tests invoke
//! directly with [`LambdaEmulator::invoke`]; `openqq up --invoke` uses the Invoke API.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// One function's queue of events not yet taken by its `bootstrap`.
#[derive(Clone)]
struct Queue {
    tx: mpsc::Sender<(String, Value)>,
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<(String, Value)>>>,
}

/// Where each invocation's answer goes: what the function returned, or the error it reported.
type Answers = HashMap<String, oneshot::Sender<Result<Value, Value>>>;

#[derive(Clone, Default)]
struct Shared {
    queues: Arc<Mutex<HashMap<String, Queue>>>,
    pending: Arc<Mutex<Answers>>,
}

impl Shared {
    fn queue(&self, function: &str) -> Queue {
        let mut queues = self.queues.lock().unwrap();
        queues
            .entry(function.to_owned())
            .or_insert_with(|| {
                let (tx, rx) = mpsc::channel(16);
                Queue { tx, rx: Arc::new(tokio::sync::Mutex::new(rx)) }
            })
            .clone()
    }

    async fn invoke(&self, function: &str, event: Value, within: Duration) -> Option<Result<Value, Value>> {
        let id = request_id();
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id.clone(), tx);
        self.queue(function).tx.send((id, event)).await.ok()?;
        tokio::time::timeout(within, rx).await.ok()?.ok()
    }
}

pub struct LambdaEmulator {
    /// `http://HOST:PORT`, the Invoke API's base URL.
    pub url: String,
    shared: Shared,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Serves `app` on a free loopback port: its address and the serving task.
async fn serve(app: Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, task)
}

impl LambdaEmulator {
    pub async fn start() -> Self {
        let shared = Shared::default();
        let app = Router::new()
            .route("/2015-03-31/functions/{function}/invocations", post(invocation))
            .with_state(shared.clone());
        let (addr, task) = serve(app).await;
        Self { url: format!("http://{addr}"), shared, tasks: Mutex::new(vec![task]) }
    }

    /// The value of `AWS_LAMBDA_RUNTIME_API` for `function`'s `bootstrap`: `HOST:PORT` of a
    /// Runtime API serving that function's invocations.
    pub async fn runtime_api(&self, function: &str) -> String {
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(response))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .with_state((self.shared.clone(), function.to_owned()));
        let (addr, task) = serve(app).await;
        self.tasks.lock().unwrap().push(task);
        addr
    }

    /// Invokes `function` with `event`: what it returned, or the error it reported.
    pub async fn invoke(&self, function: &str, event: Value, within: Duration) -> Result<Value, Value> {
        self.shared.invoke(function, event, within).await.expect("the function answered in time")
    }
}

impl Drop for LambdaEmulator {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!("00000000-0000-4000-8000-{:012x}", N.fetch_add(1, Ordering::Relaxed))
}

/// `GET invocation/next`: waits for an event, then hands it over with the invocation's headers.
async fn next(State((s, function)): State<(Shared, String)>) -> (HeaderMap, String) {
    let queue = s.queue(&function);
    let (id, event) = queue.rx.lock().await.recv().await.expect("events keep coming until the test ends");
    let deadline =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap() + Duration::from_secs(120);
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
    headers.insert("lambda-runtime-deadline-ms", deadline.as_millis().to_string().parse().unwrap());
    let arn = format!("arn:aws:lambda:us-east-1:123456789012:function:{function}");
    headers.insert("lambda-runtime-invoked-function-arn", arn.parse().unwrap());
    headers.insert("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    (headers, event.to_string())
}

async fn response(State((s, _)): State<(Shared, String)>, Path(id): Path<String>, body: String) -> StatusCode {
    answer(&s, &id, Ok(serde_json::from_str(&body).unwrap_or(Value::String(body))))
}

async fn error(State((s, _)): State<(Shared, String)>, Path(id): Path<String>, body: String) -> StatusCode {
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

/// The Invoke API: 200 with what the function returned, or with its error and
/// `X-Amz-Function-Error: Unhandled`, as Lambda answers a synchronous invocation.
async fn invocation(State(s): State<Shared>, Path(function): Path<String>, body: Bytes) -> Response {
    let Ok(event) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "the event is not JSON").into_response();
    };
    match s.invoke(&function, event, Duration::from_secs(120)).await {
        Some(Ok(value)) => axum::Json(value).into_response(),
        Some(Err(error)) => ([("x-amz-function-error", "Unhandled")], axum::Json(error)).into_response(),
        None => (StatusCode::GATEWAY_TIMEOUT, "the function did not answer").into_response(),
    }
}
