//! The OpenAI-compatible backend's settings, their defaults, and the checks made when the backend
//! is built.

use std::time::Duration;

use crate::secret::Secret;

/// Where the model is and how hard to try. Build with [`OpenAiSettings::new`] (the defaults
/// below) and change fields as needed; [`OpenAiBackend::new`](crate::OpenAiBackend::new) checks
/// them.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// The API root the `/chat/completions` path is appended to: `https://api.openai.com/v1`,
    /// `http://127.0.0.1:8000/v1` (vLLM), `http://127.0.0.1:11434/v1` (Ollama),
    /// `http://127.0.0.1:8080/v1` (llama.cpp's server).
    pub base_url: String,
    /// The model name the server knows (`gpt-4o-mini`, `qwen2.5-coder:7b`, …).
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set; local servers usually need none.
    pub api_key: Option<Secret>,
    /// Bound on one HTTP call, from sending the request to the last byte of the answer.
    pub timeout: Duration,
    /// Bound on opening the connection (part of `timeout`, but a dead host fails sooner).
    pub connect_timeout: Duration,
    /// Attempts after the first on a retriable failure (429, 5xx, timeout, connection error).
    pub max_retries: u32,
    /// The first backoff when the server gave no `Retry-After`; doubled per retry, jittered.
    pub backoff_base: Duration,
    /// The longest backoff between two attempts.
    pub backoff_cap: Duration,
    /// The longest `Retry-After` waited for: a server asking for longer gets the rate-limit
    /// error back at once, with its `retry_after`, so the caller can reschedule instead of
    /// holding a worker.
    pub max_retry_after: Duration,
    /// Sampling temperature; `None` leaves the server's default.
    pub temperature: Option<f32>,
    pub breaker: BreakerSettings,
    pub limits: Limits,
}

impl OpenAiSettings {
    /// Settings for `model` at `base_url` with the defaults: a 120 s call timeout, 5 s to
    /// connect, 3 retries backing off from 500 ms up to 20 s, `Retry-After` honoured up to 60 s,
    /// the [`BreakerSettings`] and [`Limits`] defaults, and no API key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(5),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
            temperature: None,
            breaker: BreakerSettings::default(),
            limits: Limits::default(),
        }
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Secret::new(key));
        self
    }

    /// The chat completions URL, checked to be an `http(s)` URL.
    pub(crate) fn endpoint(&self) -> Result<reqwest::Url, SettingsError> {
        let base = self.base_url.trim_end_matches('/');
        let url = reqwest::Url::parse(&format!("{base}/chat/completions"))
            .map_err(|source| SettingsError::BaseUrl { url: self.base_url.clone(), source })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SettingsError::Scheme { url: self.base_url.clone() });
        }
        Ok(url)
    }

    pub(crate) fn check(&self) -> Result<reqwest::Url, SettingsError> {
        if self.model.trim().is_empty() {
            return Err(SettingsError::NoModel);
        }
        if self.timeout.is_zero() {
            return Err(SettingsError::ZeroTimeout);
        }
        if self.breaker.failure_threshold == 0 {
            return Err(SettingsError::ZeroThreshold);
        }
        self.endpoint()
    }
}

/// When the circuit breaker opens and when it lets a probe through.
#[derive(Debug, Clone, Copy)]
pub struct BreakerSettings {
    /// Consecutive failed calls (each after its retries) that open the circuit. Default 5.
    pub failure_threshold: u32,
    /// How long an open circuit refuses calls before letting one probe through. Default 30 s.
    pub cool_down: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self { failure_threshold: 5, cool_down: Duration::from_secs(30) }
    }
}

/// Bounds on what a model's answer may cost us to read.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most bytes read of a response body (refused beyond, before parsing). Default 4 MiB.
    pub max_body_bytes: u64,
    /// Most bytes of Verilog accepted in one answer. Default 1 MiB.
    pub max_verilog_bytes: u64,
    /// Most fenced code blocks looked at in a plain-text answer. Default 32.
    pub max_fenced_blocks: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_body_bytes: 4 << 20, max_verilog_bytes: 1 << 20, max_fenced_blocks: 32 }
    }
}

/// A setting the backend cannot work with, refused when it is built.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("the generation base URL {url:?} is not a URL")]
    BaseUrl {
        url: String,
        #[source]
        source: url::ParseError,
    },
    #[error("the generation base URL {url:?} is not http or https")]
    Scheme { url: String },
    #[error("no generation model is named")]
    NoModel,
    #[error("the generation timeout is zero")]
    ZeroTimeout,
    #[error("the generation circuit breaker's failure threshold is zero")]
    ZeroThreshold,
    #[error("the HTTP client could not be built")]
    Client(#[source] reqwest::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_appends_chat_completions_to_the_base_url() {
        let settings = OpenAiSettings::new("http://127.0.0.1:8000/v1/", "m");
        assert_eq!(settings.check().unwrap().as_str(), "http://127.0.0.1:8000/v1/chat/completions");
    }

    #[test]
    fn settings_without_a_model_or_with_another_scheme_are_refused() {
        assert!(matches!(OpenAiSettings::new("http://h/v1", " ").check(), Err(SettingsError::NoModel)));
        assert!(matches!(OpenAiSettings::new("ftp://h/v1", "m").check(), Err(SettingsError::Scheme { .. })));
        assert!(matches!(OpenAiSettings::new("not a url", "m").check(), Err(SettingsError::BaseUrl { .. })));
    }

    #[test]
    fn settings_debug_does_not_show_the_key() {
        let settings = OpenAiSettings::new("http://h/v1", "m").with_api_key("sk-very-secret");
        assert!(!format!("{settings:?}").contains("sk-very-secret"));
    }
}
