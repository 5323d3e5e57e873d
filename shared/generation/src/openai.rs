//! [`OpenAiBackend`]: the generation port over an OpenAI-compatible Chat Completions server
//! (OpenAI, vLLM, Ollama, llama.cpp's server).
//!
//! One call: ask the circuit breaker, then try the server up to `1 + max_retries` times. Each try
//! is bounded by the timeout and reads at most `max_body_bytes`. Structured output is asked for
//! until the server refuses `response_format` once; from then on this backend asks for fenced
//! code blocks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use openqq_core::generation::{Generated, GenerationBackend, GenerationError, GenerationRequest, Usage};
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;

use crate::answer::{self, Answer};
use crate::breaker::{Breaker, BreakerState};
use crate::settings::{OpenAiSettings, SettingsError};
use crate::wire::{self, ChatRequest, ChatResponse};
use crate::{prompt, retry};

/// Most characters of a server's error text kept in an error message.
const ERROR_TEXT_CHARS: usize = 300;

/// The OpenAI-compatible backend. Build once (it holds the connection pool and the breaker) and
/// share as `Arc<dyn GenerationBackend>`.
#[derive(Debug)]
pub struct OpenAiBackend {
    settings: OpenAiSettings,
    endpoint: reqwest::Url,
    client: reqwest::Client,
    /// Whether to ask for `response_format`: cleared, for the life of this backend, the first
    /// time the server refuses it.
    structured: AtomicBool,
    breaker: Breaker,
}

/// How one try ended, when it did not produce an answer.
enum TryError {
    /// The server refused `response_format` (a 400 naming it): ask again without it.
    FormatRefused,
    /// Any other failure; `retry_after` when the server said how long to wait.
    Failed { error: GenerationError, retry_after: Option<Duration> },
}

impl From<GenerationError> for TryError {
    fn from(error: GenerationError) -> Self {
        TryError::Failed { error, retry_after: None }
    }
}

impl OpenAiBackend {
    /// A backend with `settings`, checked.
    pub fn new(settings: OpenAiSettings) -> Result<Self, SettingsError> {
        let endpoint = settings.check()?;
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.timeout)
            .build()
            .map_err(SettingsError::Client)?;
        let breaker = Breaker::new(settings.breaker);
        Ok(Self { settings, endpoint, client, structured: AtomicBool::new(true), breaker })
    }

    /// The circuit breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// Whether this backend still asks for structured output (false once the server refused it).
    pub fn uses_structured_output(&self) -> bool {
        self.structured.load(Ordering::Relaxed)
    }

    /// Tries until an answer, a permanent failure, or the retries are spent.
    async fn with_retries(&self, req: &GenerationRequest) -> Result<(Answer, Usage), GenerationError> {
        let mut usage = Usage::default();
        let mut retry = 0;
        loop {
            let structured = self.uses_structured_output();
            let (error, retry_after) = match self.try_once(req, structured, &mut usage).await {
                Ok(answer) => return Ok((answer, usage)),
                Err(TryError::FormatRefused) => {
                    self.structured.store(false, Ordering::Relaxed);
                    tracing::info!(
                        model = %self.settings.model,
                        "The server refused response_format; asking for fenced code blocks from now on."
                    );
                    continue;
                }
                Err(TryError::Failed { error, retry_after }) => (error, retry_after),
            };
            if !error.is_retriable() || retry >= self.settings.max_retries {
                return Err(error);
            }
            let wait = match retry_after {
                Some(wait) if wait > self.settings.max_retry_after => return Err(error),
                Some(wait) => wait,
                None => retry::backoff(retry, self.settings.backoff_base, self.settings.backoff_cap),
            };
            tracing::warn!(
                model = %self.settings.model,
                retry = retry + 1,
                wait_ms = wait.as_millis() as u64,
                error = %error,
                "A generation attempt failed; trying again."
            );
            tokio::time::sleep(wait).await;
            retry += 1;
        }
    }

    /// One HTTP exchange, bounded by the timeout; the tokens it used are added to `usage`.
    async fn try_once(&self, req: &GenerationRequest, structured: bool, usage: &mut Usage) -> Result<Answer, TryError> {
        let body = ChatRequest {
            model: self.settings.model.clone(),
            messages: prompt::messages(req, structured),
            max_tokens: Some(req.max_tokens),
            temperature: self.settings.temperature,
            response_format: structured.then(wire::response_format),
        };
        let body = serde_json::to_vec(&body).map_err(|e| GenerationError::Malformed {
            message: "the request could not be encoded".into(),
            source: Some(Box::new(e)),
        })?;
        let mut request = self.client.post(self.endpoint.clone()).header(CONTENT_TYPE, "application/json").body(body);
        if let Some(key) = &self.settings.api_key {
            // reqwest marks the header sensitive: it is left out of its own debug output.
            request = request.bearer_auth(key.expose());
        }
        tracing::debug!(model = %self.settings.model, structured, "Asking the model.");
        let started = Instant::now();
        let exchange = async {
            let mut response = request.send().await.map_err(|e| self.transport(e))?;
            let body = read_bounded(&mut response, self.settings.limits.max_body_bytes).await?;
            Ok::<_, TryError>((response.status(), retry_after(&response), body))
        };
        let (status, retry_after, body) = tokio::time::timeout(self.settings.timeout, exchange)
            .await
            .map_err(|_| GenerationError::Timeout { after: self.settings.timeout })??;
        tracing::debug!(
            model = %self.settings.model,
            status = status.as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            bytes = body.len(),
            "The model's server answered."
        );
        if !status.is_success() {
            return Err(self.refusal(status, retry_after, &body, structured));
        }
        let response: ChatResponse = serde_json::from_slice(&body).map_err(|e| GenerationError::Malformed {
            message: "the server's answer is not a chat completion".into(),
            source: Some(Box::new(e)),
        })?;
        if let Some(u) = response.usage {
            usage.prompt_tokens += u.prompt_tokens;
            usage.completion_tokens += u.completion_tokens;
        }
        let choice = response
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| GenerationError::malformed("the server's answer has no choices"))?;
        if let Some(refusal) = choice.message.refusal {
            return Err(GenerationError::malformed(format!("the model refused: {}", self.clipped(&refusal))).into());
        }
        let content = choice.message.content.unwrap_or_default();
        answer::read(&content, structured, req.top.as_deref(), &self.settings.limits).map_err(|e| {
            match (e, choice.finish_reason.as_deref()) {
                (GenerationError::Malformed { message, source }, Some("length")) => {
                    TryError::from(GenerationError::Malformed {
                        message: format!("{message} (the answer was cut at max_tokens)"),
                        source,
                    })
                }
                (e, _) => e.into(),
            }
        })
    }

    /// A non-2xx answer as an error.
    fn refusal(&self, status: StatusCode, retry_after: Option<Duration>, body: &[u8], structured: bool) -> TryError {
        let text = wire::error_text(body);
        let names_format = text.param.as_deref() == Some("response_format")
            || ["response_format", "json_schema"].iter().any(|w| text.message.contains(w));
        if structured && status == StatusCode::BAD_REQUEST && names_format {
            return TryError::FormatRefused;
        }
        let message = self.clipped(&text.message);
        let code = status.as_u16();
        let error = match status {
            StatusCode::TOO_MANY_REQUESTS => GenerationError::RateLimited { retry_after },
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => GenerationError::Unauthorized { status: code, message },
            StatusCode::REQUEST_TIMEOUT => {
                GenerationError::Unavailable { message: format!("HTTP {code}: {message}"), source: None }
            }
            s if s.is_server_error() => {
                GenerationError::Unavailable { message: format!("HTTP {code}: {message}"), source: None }
            }
            _ => GenerationError::Rejected { status: code, message },
        };
        TryError::Failed { error, retry_after }
    }

    /// A transport error (connect, reset, timeout) as a retriable error keeping it as source.
    fn transport(&self, e: reqwest::Error) -> TryError {
        if e.is_timeout() {
            return GenerationError::Timeout { after: self.settings.timeout }.into();
        }
        GenerationError::unavailable("the model's server could not be reached", e).into()
    }

    /// Server-supplied text for an error message: the key scrubbed out, clipped.
    fn clipped(&self, text: &str) -> String {
        let text = match &self.settings.api_key {
            Some(key) => key.scrub(text),
            None => text.to_owned(),
        };
        match text.char_indices().nth(ERROR_TEXT_CHARS) {
            Some((end, _)) => format!("{}…", &text[..end]),
            None => text,
        }
    }
}

#[async_trait]
impl GenerationBackend for OpenAiBackend {
    async fn generate(&self, req: &GenerationRequest) -> Result<Generated, GenerationError> {
        let started = Instant::now();
        let permit = self.breaker.admit(started).map_err(|retry_in| GenerationError::CircuitOpen { retry_in })?;
        let result = self.with_retries(req).await;
        // Only failures of the server count against it: an answer the model got wrong, or a
        // request the server refused, shows the server is up.
        match &result {
            Err(e) if e.is_retriable() => permit.failed(),
            _ => permit.succeeded(),
        }
        let duration = started.elapsed();
        match result {
            Ok((answer, usage)) => {
                tracing::info!(
                    model = %self.settings.model,
                    duration_ms = duration.as_millis() as u64,
                    prompt_tokens = usage.prompt_tokens,
                    completion_tokens = usage.completion_tokens,
                    verilog_bytes = answer.verilog.len(),
                    "The model generated a design."
                );
                Ok(Generated { verilog: answer.verilog, pcf: answer.pcf, top: answer.top, usage, duration })
            }
            Err(e) => {
                tracing::warn!(
                    model = %self.settings.model,
                    duration_ms = duration.as_millis() as u64,
                    error = %e,
                    kind = e.label(),
                    "Generation failed."
                );
                Err(e)
            }
        }
    }
}

/// The body of `response`, refused once it is over `limit` bytes (by its declared length before
/// reading, or while reading).
async fn read_bounded(response: &mut reqwest::Response, limit: u64) -> Result<Vec<u8>, TryError> {
    let too_large = || TryError::from(GenerationError::TooLarge { what: "the response body", limit });
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) =
        response.chunk().await.map_err(|e| GenerationError::unavailable("the model's answer could not be read", e))?
    {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(RETRY_AFTER)?.to_str().ok()?;
    retry::parse_retry_after(value, SystemTime::now())
}
