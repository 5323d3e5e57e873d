//! A scripted OpenAI-compatible model server for tests (feature `test-server`).
//!
//! [`TestServer::start`] binds `127.0.0.1:0` and serves `POST /v1/chat/completions` from a
//! directory of designs (see `corpus`): the design the prompt names is answered with the file
//! its [`Reply`] calls for (`design.v`, `broken_synth.v`, `not_equivalent.v`), as JSON when the
//! request asks for `response_format` and as a fenced block otherwise, with token usage. Faults
//! (latency, 429 with `Retry-After`, 5xx, malformed answers, a silent connection, a huge body)
//! are scripted through [`TestServerOptions`], the handle's methods, or the control endpoints:
//!
//! - `POST /control/script` with a JSON list of [`Step`]s: queued, one per request.
//! - `PUT /control/designs/{name}` with a [`Step`]: the standing reply for that design.
//! - `PUT /control/refuse-response-format` with `true`/`false`.
//! - `GET /control/stats`: [`Stats`]. `POST /control/reset`: clears the scripts and counts.

mod corpus;
mod script;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

pub use corpus::CorpusError;
use corpus::Design;
use script::Script;
pub use script::{Reply, Step};

use crate::prompt::FEEDBACK_HEADING;
use crate::wire::{AnswerMessage, ChatRequest, ChatResponse, Choice, WireUsage};

/// How the server starts.
#[derive(Debug, Clone)]
pub struct TestServerOptions {
    /// The designs directory (`<dir>/<design>/design.v`, …).
    pub designs: PathBuf,
    /// The bearer key required (401 with the key echoed, as OpenAI does, on any other); `None`
    /// accepts any request.
    pub api_key: Option<String>,
    /// Answer 400 naming `response_format` to requests carrying one.
    pub refuse_response_format: bool,
    /// The reply when neither the queue nor the design's script says otherwise.
    pub default: Step,
    /// Standing replies per design name.
    pub per_design: HashMap<String, Step>,
    /// Replies queued, one per request, before any other.
    pub script: Vec<Step>,
}

impl TestServerOptions {
    pub fn new(designs: impl Into<PathBuf>) -> Self {
        Self {
            designs: designs.into(),
            api_key: None,
            refuse_response_format: false,
            default: Step::new(Reply::Correct),
            per_design: HashMap::new(),
            script: Vec::new(),
        }
    }
}

/// What the server has seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Chat completion requests, whatever was answered.
    pub requests: u64,
    /// Requests answered 401 for a wrong or missing key.
    pub unauthorized: u64,
    /// Requests that carried `response_format`.
    pub structured: u64,
    /// Requests whose prompt carried feedback from a failed attempt.
    pub with_feedback: u64,
    /// Requests per design recognised in the prompt.
    pub by_design: BTreeMap<String, u64>,
    /// The last request's user message.
    pub last_prompt: Option<String>,
}

struct Shared {
    designs: Vec<Design>,
    api_key: Option<String>,
    state: Mutex<Mutable>,
}

struct Mutable {
    script: Script,
    refuse_response_format: bool,
    stats: Stats,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Mutable> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum TestServerError {
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    #[error("the test server could not listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running server; stopped when dropped.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// Serves on `127.0.0.1:0`.
    pub async fn start(options: TestServerOptions) -> Result<Self, TestServerError> {
        Self::bind(options, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Serves on `addr`.
    pub async fn bind(options: TestServerOptions, addr: SocketAddr) -> Result<Self, TestServerError> {
        let designs = corpus::load(&options.designs)?;
        let shared = Arc::new(Shared {
            designs,
            api_key: options.api_key,
            state: Mutex::new(Mutable {
                script: Script {
                    queue: options.script.into(),
                    per_design: options.per_design,
                    default: options.default,
                },
                refuse_response_format: options.refuse_response_format,
                stats: Stats::default(),
            }),
        });
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|source| TestServerError::Bind { addr, source })?;
        let addr = listener.local_addr().map_err(|source| TestServerError::Bind { addr, source })?;
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "The test model server stopped.");
            }
        });
        Ok(Self { addr, shared, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL a client is given: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues `steps`, one per coming request.
    pub fn push(&self, steps: impl IntoIterator<Item = Step>) {
        self.shared.lock().script.queue.extend(steps);
    }

    /// The standing reply for `design`.
    pub fn set_design(&self, design: &str, step: impl Into<Step>) {
        self.shared.lock().script.per_design.insert(design.to_owned(), step.into());
    }

    pub fn refuse_response_format(&self, refuse: bool) {
        self.shared.lock().refuse_response_format = refuse;
    }

    pub fn stats(&self) -> Stats {
        self.shared.lock().stats.clone()
    }

    /// Chat completion requests so far.
    pub fn requests(&self) -> u64 {
        self.stats().requests
    }

    /// The names of the designs served.
    pub fn designs(&self) -> Vec<String> {
        self.shared.designs.iter().map(|d| d.name.clone()).collect()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/control/script", post(control_script))
        .route("/control/designs/{name}", put(control_design))
        .route("/control/refuse-response-format", put(control_refuse))
        .route("/control/stats", get(control_stats))
        .route("/control/reset", post(control_reset))
        .with_state(shared)
}

async fn control_script(State(shared): State<Arc<Shared>>, Json(steps): Json<Vec<Step>>) -> StatusCode {
    shared.lock().script.queue.extend(steps);
    StatusCode::NO_CONTENT
}

async fn control_design(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    Json(step): Json<Step>,
) -> StatusCode {
    shared.lock().script.per_design.insert(name, step);
    StatusCode::NO_CONTENT
}

async fn control_refuse(State(shared): State<Arc<Shared>>, Json(refuse): Json<bool>) -> StatusCode {
    shared.lock().refuse_response_format = refuse;
    StatusCode::NO_CONTENT
}

async fn control_stats(State(shared): State<Arc<Shared>>) -> Json<Stats> {
    Json(shared.lock().stats.clone())
}

async fn control_reset(State(shared): State<Arc<Shared>>) -> StatusCode {
    let mut state = shared.lock();
    state.script.queue = VecDeque::new();
    state.script.per_design.clear();
    state.stats = Stats::default();
    StatusCode::NO_CONTENT
}

fn error(status: StatusCode, message: &str, param: Option<&str>) -> Response {
    let body = serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "param": param}});
    (status, Json(body)).into_response()
}

/// What one chat request gets, decided under the lock; the answer is built (and slept on) after.
enum Plan {
    Refuse(Response),
    Answer { step: Step, design: Option<Design>, structured: bool, feedback: bool, prompt_chars: usize },
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, Json(req): Json<ChatRequest>) -> Response {
    match plan(&shared, &headers, &req) {
        Plan::Refuse(response) => response,
        Plan::Answer { step, design, structured, feedback, prompt_chars } => {
            tokio::time::sleep(step.latency()).await;
            answer(step.reply, design.as_ref(), structured, feedback, prompt_chars).await
        }
    }
}

fn plan(shared: &Shared, headers: &HeaderMap, req: &ChatRequest) -> Plan {
    let mut state = shared.lock();
    state.stats.requests += 1;
    if let Some(key) = &shared.api_key {
        let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
        if given != format!("Bearer {key}") {
            state.stats.unauthorized += 1;
            let shown = given.strip_prefix("Bearer ").unwrap_or(given);
            // Echoes the key it was given, as OpenAI's 401 does: clients must scrub it.
            return Plan::Refuse(error(
                StatusCode::UNAUTHORIZED,
                &format!("Incorrect API key provided: {shown}."),
                None,
            ));
        }
    }
    let structured = req.response_format.is_some();
    if structured {
        state.stats.structured += 1;
        if state.refuse_response_format {
            return Plan::Refuse(error(
                StatusCode::BAD_REQUEST,
                "response_format is not supported by this server",
                Some("response_format"),
            ));
        }
    }
    let prompt: String = req.messages.iter().filter(|m| m.role == "user").map(|m| m.content.as_str()).collect();
    let feedback = prompt.contains(FEEDBACK_HEADING);
    if feedback {
        state.stats.with_feedback += 1;
    }
    let design = corpus::pick(&shared.designs, &prompt).cloned();
    if let Some(d) = &design {
        *state.stats.by_design.entry(d.name.clone()).or_default() += 1;
    }
    let step = state.script.next(design.as_ref().map(|d| d.name.as_str()));
    let prompt_chars = req.messages.iter().map(|m| m.content.len()).sum();
    state.stats.last_prompt = Some(prompt);
    Plan::Answer { step, design, structured, feedback, prompt_chars }
}

async fn answer(
    reply: Reply,
    design: Option<&Design>,
    structured: bool,
    feedback: bool,
    prompt_chars: usize,
) -> Response {
    let file = match reply {
        Reply::RateLimited { retry_after } => {
            let mut response = error(StatusCode::TOO_MANY_REQUESTS, "Rate limit reached, slow down.", None);
            if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Reply::ServerError { status } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error(status, "The server had an error while processing your request.", None);
        }
        Reply::Hang => {
            std::future::pending::<()>().await;
            unreachable!("a pending future never completes")
        }
        Reply::NotJson => return completion("I am sorry, I cannot produce that design today.".into(), prompt_chars),
        Reply::Huge { bytes } => return completion("x".repeat(bytes), prompt_chars),
        Reply::Correct => "design.v",
        Reply::BrokenSynth => "broken_synth.v",
        Reply::NotEquivalent => "not_equivalent.v",
        Reply::BrokenThenFixed if feedback => "design.v",
        Reply::BrokenThenFixed => "broken_synth.v",
        Reply::MissingFields | Reply::NoCodeBlock => "design.v",
    };
    let Some(design) = design else {
        return error(StatusCode::BAD_REQUEST, "the prompt names no design this server knows", None);
    };
    let Some(code) = design.file(file) else {
        let message = format!("the design {} has no {file}", design.name);
        return error(StatusCode::INTERNAL_SERVER_ERROR, &message, None);
    };
    let top = design.top_of(code);
    let pcf = design.file("design.pcf");
    let content = match reply {
        Reply::MissingFields => serde_json::json!({ "verilog": code }).to_string(),
        Reply::NoCodeBlock => format!("Here is the design:\n\n{code}\nIt should work."),
        _ if structured => serde_json::json!({ "verilog": code, "pcf": pcf, "top": top }).to_string(),
        _ => {
            let mut text = format!("Here is the `{top}` design.\n\n```verilog\n{code}```\n");
            if let Some(pcf) = pcf {
                text.push_str(&format!("\nPins:\n\n```pcf\n{pcf}```\n"));
            }
            text
        }
    };
    completion(content, prompt_chars)
}

/// A chat completion with `content`, usage counted at about four characters a token.
fn completion(content: String, prompt_chars: usize) -> Response {
    let usage = WireUsage {
        prompt_tokens: prompt_chars.div_ceil(4) as u64,
        completion_tokens: content.len().div_ceil(4) as u64,
    };
    let body = ChatResponse {
        choices: vec![Choice {
            message: AnswerMessage { role: Some("assistant".into()), content: Some(content), refusal: None },
            finish_reason: Some("stop".into()),
        }],
        usage: Some(usage),
    };
    Json(body).into_response()
}
