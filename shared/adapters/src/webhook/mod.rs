//! Webhook delivery: the worker that sends the deliveries the store queued
//! ([`openqq_core::webhook`]) to tenants' endpoints, signed as Standard Webhooks says.
//!
//! - [`signing`]: the body (`{type, timestamp, data}`), the `whsec_` form of a secret
//!   ([`parse_secret`], [`format_secret`]) and the `webhook-signature` header ([`sign`], one
//!   signature per signing secret).
//! - [`ssrf`]: where a webhook may point: [`check_target_url`] at registration and before each
//!   attempt, [`GuardedResolver`] when connecting (public addresses only, unless
//!   `allow_private`).
//! - [`client`]: [`WebhookClient`], the HTTP client deliveries go through (guarded resolver, no
//!   proxy, no redirects, a timeout per attempt, a bounded read of the answer).
//! - [`outcome`]: what an attempt comes to: delivered, retried on the schedule, or dead.
//! - [`worker`]: [`DeliveryWorker`], claiming due deliveries and attempting them, fair between
//!   tenants, for a long-running process; [`deliver_due_once`], one claim round, for a scheduled
//!   function.
//!
//! Each recorded attempt counts in `openqq_webhook_deliveries_total{outcome}` (`delivered`,
//! `retried`, `dead`). Logs name a receiver by its host only: a URL's path or credentials may be
//! secret, and signing secrets are never logged.

mod attempt;
pub mod client;
pub mod outcome;
pub mod ssrf;
pub mod worker;

pub use attempt::{attempt, Attempted, DELIVERIES_METRIC};
pub use client::{Message, SendError, WebhookClient, MAX_RESPONSE_BYTES};
/// How deliveries are signed and secrets shown: the core's, which the API shares.
pub use openqq_core::webhook::signing;
pub use signing::{format_secret, parse_secret, payload, sign, signature_header};
pub use ssrf::{check_target_url, is_public, GuardedResolver, ResolveError};
pub use worker::{deliver_due_once, DeliverySettings, DeliveryWorker, RoundReport};
