//! The backends' settings, each a group of `openqq up` flags that are also the environment of a
//! Lambda function: where the event log goes ([`kafka`]), the design store ([`dynamo`]), the
//! objects ([`s3`]), the limiter ([`limiter`]) and the model that writes designs from prompts
//! ([`generation`]). Each checks its values before anything is
//! opened (a bad one is a sentence naming the setting) and applies them to the backends.

pub mod dynamo;
mod endpoint;
pub use endpoint::check as check_endpoint;
pub mod generation;
pub mod kafka;
pub mod limiter;
pub mod s3;
