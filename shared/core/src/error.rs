//! The one error type of every port, [`PortError`], with the error underneath it kept as its
//! cause. A leaf: it imports nothing from the rest of the core.

use std::sync::Arc;
use std::time::Duration;

/// The error underneath a port error: what the adapter caught from its backend (a
/// `rusqlite::Error`, an SDK error, a `redis::RedisError`, an `io::Error` …), kept so the chain
/// reaches it through [`std::error::Error::source`].
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong, in words, and the error underneath when the adapter caught one. The words
/// are what the port error shows (in logs and problem details); the cause is its `source`.
#[derive(Debug)]
pub struct Failure {
    message: String,
    cause: Option<Cause>,
}

impl Failure {
    pub fn new(message: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self { message: message.into(), cause: Some(cause.into()) }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error underneath, when one was caught.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// A failure with words only (a deadline passed, a state nothing raised an error for).
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self { message, cause: None }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The one error type of every port. Its variants are semantic, and each is classified: see
/// [`PortError::is_retriable`]. Where the adapter caught an error from its backend, that error
/// is this one's [`source`](std::error::Error::source); the message keeps its text as well, so
/// a log line that prints only the message still says what happened.
#[derive(Debug)]
pub enum PortError {
    /// The thing asked for does not exist (for this tenant). Permanent.
    NotFound,
    /// A conditional write lost against a newer state (S3's `PreconditionFailed`, DynamoDB's
    /// `ConditionalCheckFailed`), or a write refused by a rule on what is stored (a tenant's
    /// webhook limit). `what` names the thing written ("webhook", "upload"). Permanent for that
    /// write.
    ConditionFailed { what: &'static str, why: Failure },
    /// The backend asked us to slow down. Retriable.
    Throttled { retry_after: Option<Duration> },
    /// The backend could not be reached or did not answer in time. Retriable.
    Unavailable(Failure),
    /// The backend's storage is full (the data dir's file system has no space left): nothing
    /// was written, and the same write may succeed once space returns. Retriable.
    StorageFull(Failure),
    /// The request itself is wrong (too large, malformed): the caller's to fix. `what` names the
    /// part that is wrong ("record", "object digest", "cursor"); `why` says how, with the error
    /// underneath when one was caught (a cursor that does not decode). Permanent.
    Invalid { what: &'static str, why: Failure },
    /// Something stored cannot be read back (a row with a malformed column, a report that is not
    /// JSON), or a value the adapter made cannot be written (serialisation failed): the
    /// platform's fault, never the caller's. `what` names the thing ("stored design", "feed
    /// entry"). Permanent.
    Corrupt { what: &'static str, why: Failure },
    /// Anything else the backend reported, with its own classification kept.
    Backend { message: String, retriable: bool, source: Option<Cause> },
    /// A setting the adapter cannot work with (a broker list that is not `HOST:PORT`, a URL it
    /// cannot parse), refused when it was opened or connected: the operator's to fix. Permanent.
    /// Its message is a sentence naming what is wrong; the error underneath, if any, is kept.
    Settings(Failure),
}

impl PortError {
    /// The backend's storage is full, as `cause` says: see [`PortError::StorageFull`].
    pub fn storage_full(message: impl Into<String>, cause: impl Into<Cause>) -> Self {
        PortError::StorageFull(Failure::new(message, cause))
    }

    /// The backend could not be reached or did not answer, because of `cause`.
    pub fn unavailable(message: impl Into<String>, cause: impl Into<Cause>) -> Self {
        PortError::Unavailable(Failure::new(message, cause))
    }

    /// The request's `what` is wrong, as `why` says: see [`PortError::Invalid`].
    pub fn invalid(what: &'static str, why: impl Into<Failure>) -> Self {
        PortError::Invalid { what, why: why.into() }
    }

    /// The conditional write of `what` lost, as `why` says: see [`PortError::ConditionFailed`].
    pub fn condition_failed(what: &'static str, why: impl Into<Failure>) -> Self {
        PortError::ConditionFailed { what, why: why.into() }
    }

    /// The stored (or serialised) `what` is unreadable, as `why` says: see
    /// [`PortError::Corrupt`].
    pub fn corrupt(what: &'static str, why: impl Into<Failure>) -> Self {
        PortError::Corrupt { what, why: why.into() }
    }

    /// Anything else the backend reported (`cause`), retriable or not as the adapter judged it.
    pub fn backend(message: impl Into<String>, retriable: bool, cause: impl Into<Cause>) -> Self {
        PortError::Backend { message: message.into(), retriable, source: Some(cause.into()) }
    }

    /// Like [`backend`](Self::backend) for a failure the adapter detected itself (a checksum
    /// that does not match, a task that did not finish): there is no error underneath.
    pub fn backend_message(message: impl Into<String>, retriable: bool) -> Self {
        PortError::Backend { message: message.into(), retriable, source: None }
    }

    /// Whether trying the same call again may succeed: a consumer fails (and retries) its batch
    /// on a retriable error and dead-letters the record on any other; the API answers 503 to the
    /// first kind and a 4xx or 500 to the rest.
    pub fn is_retriable(&self) -> bool {
        match self {
            PortError::Throttled { .. } | PortError::Unavailable(_) | PortError::StorageFull(_) => true,
            PortError::Backend { retriable, .. } => *retriable,
            PortError::NotFound
            | PortError::ConditionFailed { .. }
            | PortError::Invalid { .. }
            | PortError::Corrupt { .. }
            | PortError::Settings(_) => false,
        }
    }

    /// `n` errors of this one's kind and message, each keeping this one as its cause: what each
    /// caller of a shared write that failed is answered.
    pub fn copies(self, n: usize) -> Vec<PortError> {
        let shared = Arc::new(self);
        (0..n).map(|_| same_kind(&shared)).collect()
    }

    /// A short, bounded name of the variant: tests compare two adapters' errors by it.
    pub fn label(&self) -> &'static str {
        match self {
            PortError::NotFound => "not_found",
            PortError::ConditionFailed { .. } => "condition_failed",
            PortError::Throttled { .. } => "throttled",
            PortError::Unavailable(_) => "unavailable",
            PortError::StorageFull(_) => "storage_full",
            PortError::Invalid { .. } => "invalid",
            PortError::Corrupt { .. } => "corrupt",
            PortError::Backend { .. } => "backend",
            PortError::Settings(_) => "settings",
        }
    }
}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortError::NotFound => f.write_str("not found"),
            PortError::ConditionFailed { what, why } => write!(f, "condition failed on the {what}: {why}"),
            PortError::Throttled { .. } => f.write_str("throttled"),
            PortError::Unavailable(failure) => write!(f, "unavailable: {failure}"),
            PortError::StorageFull(failure) => write!(f, "storage full: {failure}"),
            PortError::Invalid { what, why } => write!(f, "invalid {what}: {why}"),
            PortError::Corrupt { what, why } => write!(f, "corrupt {what}: {why}"),
            PortError::Backend { message, .. } => f.write_str(message),
            PortError::Settings(failure) => write!(f, "{failure}"),
        }
    }
}

/// Written out rather than derived: a port error's cause sits inside its [`Failure`]
/// (one field, so `PortError::Unavailable("…".into())` reads as it always has), and the chain
/// goes from the port error straight to that cause, with no link in between.
impl std::error::Error for PortError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let cause = match self {
            PortError::Unavailable(failure)
            | PortError::StorageFull(failure)
            | PortError::Settings(failure)
            | PortError::Invalid { why: failure, .. }
            | PortError::ConditionFailed { why: failure, .. }
            | PortError::Corrupt { why: failure, .. } => failure.cause(),
            PortError::Backend { source, .. } => source.as_deref(),
            PortError::NotFound | PortError::Throttled { .. } => None,
        };
        cause.map(|e| e as &(dyn std::error::Error + 'static))
    }
}

pub type PortResult<T> = Result<T, PortError>;

/// `e` and the errors under it, each after a colon: the one string a log field, a problem
/// detail or a dead letter's reason has room for. A cause whose words are already shown (a port
/// error's message keeps its cause's text) is not repeated.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let words = c.to_string();
        if !words.is_empty() && !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        cause = c.source();
    }
    text
}

/// An error of the same kind and message as `e`, with `e` kept as its cause.
fn same_kind(e: &Arc<PortError>) -> PortError {
    let cause = || Shared(e.clone());
    match e.as_ref() {
        PortError::NotFound => PortError::NotFound,
        PortError::ConditionFailed { what, why } => {
            PortError::ConditionFailed { what, why: Failure::new(why.message(), cause()) }
        }
        PortError::Throttled { retry_after } => PortError::Throttled { retry_after: *retry_after },
        PortError::Unavailable(f) => PortError::Unavailable(Failure::new(f.message(), cause())),
        PortError::StorageFull(f) => PortError::StorageFull(Failure::new(f.message(), cause())),
        PortError::Invalid { what, why } => PortError::Invalid { what, why: Failure::new(why.message(), cause()) },
        PortError::Corrupt { what, why } => PortError::Corrupt { what, why: Failure::new(why.message(), cause()) },
        PortError::Backend { message, retriable, .. } => {
            PortError::Backend { message: message.clone(), retriable: *retriable, source: Some(Box::new(cause())) }
        }
        PortError::Settings(f) => PortError::Settings(Failure::new(f.message(), cause())),
    }
}

/// The error of a shared write, as the cause of each caller's own error.
#[derive(Debug)]
struct Shared(Arc<PortError>);

impl std::fmt::Display for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the shared write failed: {}", self.0)
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(self.0.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_retriable_or_permanent() {
        assert!(PortError::Unavailable("x".into()).is_retriable());
        assert!(PortError::Throttled { retry_after: None }.is_retriable());
        assert!(!PortError::invalid("record", "x").is_retriable());
        assert!(!PortError::condition_failed("webhook", "x").is_retriable());
        assert!(!PortError::corrupt("stored design", "x").is_retriable());
        assert!(PortError::backend_message("m", true).is_retriable());
        assert!(!PortError::backend_message("m", false).is_retriable());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("the disk is on fire")]
    struct Underneath;

    fn chain(e: &PortError) -> Vec<String> {
        std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source()).map(ToString::to_string).collect()
    }

    #[test]
    fn an_unavailable_or_backend_error_keeps_its_cause_as_its_source() {
        let unavailable = PortError::unavailable("writing failed", Underneath);
        assert_eq!(chain(&unavailable), ["unavailable: writing failed", "the disk is on fire"]);
        let source = std::error::Error::source(&unavailable).unwrap();
        assert!(source.downcast_ref::<Underneath>().is_some(), "the cause itself, not a copy of its text");

        let backend = PortError::backend("the table is gone", false, Underneath);
        assert_eq!(chain(&backend), ["the table is gone", "the disk is on fire"]);
        assert!(!backend.is_retriable());
    }

    #[test]
    fn an_invalid_or_corrupt_error_names_what_and_keeps_its_cause() {
        let invalid = PortError::invalid("cursor", Failure::new("not one this listing returned", Underneath));
        assert_eq!(chain(&invalid), ["invalid cursor: not one this listing returned", "the disk is on fire"]);
        let corrupt = PortError::corrupt("stored report", Failure::new("not JSON", Underneath));
        assert_eq!(chain(&corrupt), ["corrupt stored report: not JSON", "the disk is on fire"]);
        assert_eq!((corrupt.label(), corrupt.is_retriable()), ("corrupt", false));
        let copies = corrupt.copies(2);
        assert!(copies.iter().all(|c| matches!(c, PortError::Corrupt { what: "stored report", .. })));
    }

    #[test]
    fn with_causes_shows_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading the settings")]
        struct Reading(#[source] PortError);
        assert_eq!(with_causes(&Underneath), "the disk is on fire");
        let plain = Reading(PortError::backend("the table is gone", false, Underneath));
        assert_eq!(with_causes(&plain), "reading the settings: the table is gone: the disk is on fire");
        let repeated = Reading(PortError::unavailable("writing failed: the disk is on fire", Underneath));
        assert_eq!(with_causes(&repeated), "reading the settings: unavailable: writing failed: the disk is on fire");
    }

    #[test]
    fn an_error_from_words_only_shows_the_same_text_and_has_no_source() {
        let e = PortError::Unavailable("redis did not answer".into());
        assert_eq!(e.to_string(), "unavailable: redis did not answer");
        assert!(std::error::Error::source(&e).is_none());
        assert_eq!(PortError::backend_message("checksum", false).to_string(), "checksum");
        assert_eq!(PortError::invalid("record", "too large").to_string(), "invalid record: too large");
        assert_eq!(PortError::condition_failed("upload", "lost").to_string(), "condition failed on the upload: lost");
    }
}
