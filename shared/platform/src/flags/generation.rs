//! The generation flags of `openqq up`, which are also the environment of a function on Lambda
//! (`OPENQQ_GENERATION_URL`, `OPENQQ_GENERATION_MODEL`, `OPENQQ_GENERATION_API_KEY`, …): which
//! OpenAI-compatible model writes designs from prompts (OpenAI, vLLM, Ollama, llama.cpp's
//! server), how long a call may take, and how many attempts a job's repair loop may make.
//! Without a URL there is no model: the API refuses jobs that carry `generate` (422) and the
//! synthesis function answers them "not configured".

use anyhow::{bail, Context, Result};
use clap::Args;
use openqq_core::generation::GenerationBackend;
use openqq_generation::{NotConfiguredBackend, OpenAiBackend, OpenAiSettings, Secret};
use std::sync::Arc;
use std::time::Duration;

/// The generation flags; each has an environment variable too. (No `Debug`: the key.)
#[derive(Args, Clone, Default)]
pub struct GenerationArgs {
    /// The model server's API root (`https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`);
    /// without it, designs are not generated from prompts.
    #[arg(long, env = "OPENQQ_GENERATION_URL")]
    pub generation_url: Option<String>,
    /// The model the server knows (`gpt-4o-mini`, `qwen2.5-coder:7b`).
    #[arg(long, env = "OPENQQ_GENERATION_MODEL")]
    pub generation_model: Option<String>,
    /// Sent as the bearer key; never logged or echoed.
    #[arg(long, env = "OPENQQ_GENERATION_API_KEY", hide_env_values = true)]
    pub generation_api_key: Option<String>,
    /// How long one call to the model may take (retries on 429 and 5xx come on top, at most 2).
    #[arg(long, env = "OPENQQ_GENERATION_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub generation_timeout: Duration,
    /// The most attempts one job's repair loop makes, whatever the job asks (1 to 10).
    #[arg(long, env = "OPENQQ_GENERATION_MAX_ATTEMPTS", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=openqq_core::hdl::MAX_ATTEMPTS as i64))]
    pub generation_max_attempts: u32,
    /// Tokens one tenant's generations may use in a UTC day, across every process (charged in
    /// the store before each call; 429 on new jobs once spent).
    #[arg(long, env = "OPENQQ_GENERATION_DAILY_TOKENS", default_value_t = openqq_api::DEFAULT_DAILY_TOKENS)]
    pub generation_daily_tokens: u64,
    /// Tokens one job's attempts may use together.
    #[arg(long, env = "OPENQQ_GENERATION_JOB_TOKENS", default_value_t = 100_000)]
    pub generation_job_tokens: u64,
}

const URL: &str = "--generation-url (OPENQQ_GENERATION_URL)";
const MODEL: &str = "--generation-model (OPENQQ_GENERATION_MODEL)";

impl GenerationArgs {
    /// Whether a model is configured.
    pub fn configured(&self) -> bool {
        self.generation_url.is_some()
    }

    /// What the API is told: whether jobs may carry `generate`, and the daily budget.
    pub fn policy(&self) -> openqq_api::GenerationPolicy {
        openqq_api::GenerationPolicy { configured: self.configured(), daily_tokens: self.generation_daily_tokens }
    }

    /// The token limits the synthesis function charges against.
    pub fn token_limits(&self) -> openqq_synthesis::repair::TokenLimits {
        openqq_synthesis::repair::TokenLimits {
            daily: self.generation_daily_tokens,
            per_job: self.generation_job_tokens,
        }
    }

    /// The backend the settings name, checked: the OpenAI-compatible client, or one answering
    /// "not configured" when there is no URL.
    pub fn backend(&self) -> Result<Arc<dyn GenerationBackend>> {
        let Some(url) = &self.generation_url else {
            if self.generation_model.is_some() || self.generation_api_key.is_some() {
                bail!("{MODEL} and the API key say which model to use, which needs {URL}");
            }
            return Ok(Arc::new(NotConfiguredBackend::new(format!("set {URL} and {MODEL}"))));
        };
        let Some(model) = &self.generation_model else { bail!("{URL} needs {MODEL}") };
        super::endpoint::check(URL, url)?;
        let mut settings = OpenAiSettings::new(url.clone(), model.clone());
        settings.api_key = self.generation_api_key.clone().map(Secret::new);
        settings.timeout = self.generation_timeout;
        settings.max_retries = 2;
        let backend = OpenAiBackend::new(settings).with_context(|| format!("the generation settings ({URL})"))?;
        Ok(Arc::new(backend))
    }
}
