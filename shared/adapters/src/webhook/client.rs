//! The HTTP client that sends deliveries: names resolved through [`GuardedResolver`], literal
//! addresses checked before each request, no proxy (a proxy would connect to addresses nobody
//! checked), no redirects (a 3xx is an answer, and a failed attempt: following it would reach a
//! host nobody checked), a timeout per attempt, and at most [`MAX_RESPONSE_BYTES`] of an answer
//! read.

use super::ssrf::{check_url_host, GuardedResolver};
use crate::SettingsError;
use reqwest::redirect::Policy;
use reqwest::Url;
use std::error::Error as _;
use std::time::Duration;

/// Most bytes of an answer read (and thrown away): enough to keep the connection for the next
/// request, never a receiver's whole stream.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024;

/// One request, signed: what [`WebhookClient::send`] posts.
#[derive(Debug, Clone)]
pub struct Message {
    /// `webhook-id`: [`Delivery::message_id`](openqq_core::webhook::Delivery::message_id).
    pub id: String,
    /// `webhook-timestamp`, Unix seconds of this attempt.
    pub timestamp: i64,
    /// `webhook-signature`: one `v1,` signature per signing secret.
    pub signature: String,
    pub body: Vec<u8>,
}

/// Why an attempt got no HTTP answer. The texts never hold the URL (its path or credentials may
/// be secret), at most the host.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The target is refused before anything is sent: not http(s), or a literal address that is
    /// not public. No retry changes that.
    #[error("the webhook URL is refused: {0}")]
    Refused(String),
    #[error("the receiver did not answer within {0:?}")]
    Timeout(Duration),
    /// Resolving (a name resolving to an address that is not public among it) or connecting failed.
    #[error("connecting to {host} failed: {reason}")]
    Connect {
        host: String,
        reason: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the request to {host} failed: {reason}")]
    Request {
        host: String,
        reason: String,
        #[source]
        source: reqwest::Error,
    },
}

/// The client deliveries go through; build it once and share it (it pools connections).
#[derive(Debug, Clone)]
pub struct WebhookClient {
    http: reqwest::Client,
    allow_private: bool,
}

impl WebhookClient {
    /// A client that reaches public addresses only, or any address when `allow_private`
    /// (development: a receiver on the same machine).
    pub fn new(allow_private: bool) -> Result<Self, SettingsError> {
        let http = reqwest::Client::builder()
            .dns_resolver(GuardedResolver { allow_private })
            .no_proxy()
            .redirect(Policy::none())
            .user_agent(concat!("openqq-webhooks/", env!("CARGO_PKG_VERSION")))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| SettingsError::caused_by("the webhook client cannot be built", e))?;
        Ok(Self { http, allow_private })
    }

    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// Posts `message` to `url` and answers the receiver's status code, within `timeout` from
    /// connecting to the end of the (bounded) answer.
    pub async fn send(&self, url: &str, message: &Message, timeout: Duration) -> Result<u16, SendError> {
        let target = Url::parse(url).map_err(|e| SendError::Refused(format!("it is not a URL: {e}")))?;
        if !matches!(target.scheme(), "http" | "https") {
            return Err(SendError::Refused("it is not http or https".into()));
        }
        check_url_host(&target, self.allow_private).map_err(|e| SendError::Refused(e.to_string()))?;
        let host = target.host_str().unwrap_or_default().to_owned();
        let sent = self
            .http
            .post(target)
            .timeout(timeout)
            .header("content-type", "application/json")
            .header("webhook-id", &message.id)
            .header("webhook-timestamp", message.timestamp.to_string())
            .header("webhook-signature", &message.signature)
            .body(message.body.clone())
            .send()
            .await;
        let mut response = match sent {
            Ok(r) => r,
            Err(e) => return Err(failure(e, host, timeout)),
        };
        let status = response.status().as_u16();
        // The status is the answer; the body is read only so the connection can serve again, and
        // a body that fails or stalls changes nothing.
        let mut read = 0;
        while read < MAX_RESPONSE_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                _ => break,
            }
        }
        Ok(status)
    }
}

/// What went wrong, in words without the URL: the error's own sentence and its causes'.
fn failure(e: reqwest::Error, host: String, timeout: Duration) -> SendError {
    let e = e.without_url();
    if e.is_timeout() {
        return SendError::Timeout(timeout);
    }
    let mut reason = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        reason.push_str(": ");
        reason.push_str(&c.to_string());
        cause = c.source();
    }
    if e.is_connect() {
        SendError::Connect { host, reason, source: e }
    } else {
        SendError::Request { host, reason, source: e }
    }
}
