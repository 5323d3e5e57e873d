//! DynamoDB errors, classified into the port's semantic errors. Throttling, server errors and
//! no answer are retriable; a request DynamoDB refuses as malformed or too large, a missing table
//! and refused credentials are permanent. The SDK's whole error chain is written into the message
//! (so a log line that prints only the message says what happened), never just its last line,
//! and the SDK error itself is kept as the port error's source.

pub(crate) use crate::aws_common::error_chain;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::CancellationReason;
use openqq_core::{Failure, PortError};
use std::error::Error as StdError;

/// What an error code (of an operation, or of one item of a cancelled transaction) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A condition expression did not hold: another write got there first.
    ConditionFailed,
    /// Another transaction holds one of the items; re-reading and trying again resolves it.
    Conflict,
    Throttled,
    /// The service failed or could not answer; retriable.
    Unavailable,
    /// The request is wrong (malformed, too large, an item collection full); permanent.
    Invalid,
    /// Anything else; permanent.
    Other,
}

/// Classifies a DynamoDB error code: an operation's (`…Exception`) or a cancellation reason's.
pub(crate) fn class_of(code: &str) -> Class {
    match code {
        "ConditionalCheckFailedException" | "ConditionalCheckFailed" => Class::ConditionFailed,
        "TransactionConflictException" | "TransactionConflict" | "TransactionInProgressException" => Class::Conflict,
        "ProvisionedThroughputExceededException"
        | "ProvisionedThroughputExceeded"
        | "ThrottlingException"
        | "ThrottlingError"
        | "RequestLimitExceeded" => Class::Throttled,
        "InternalServerError" | "InternalServerErrorException" | "ServiceUnavailable" => Class::Unavailable,
        "ValidationException"
        | "ValidationError"
        | "ItemCollectionSizeLimitExceededException"
        | "ItemCollectionSizeLimitExceeded"
        | "SerializationException" => Class::Invalid,
        _ => Class::Other,
    }
}

/// The port error for an SDK error of operation `op` ("apply", "get", …). The SDK error is
/// kept as the cause of a retriable or backend error.
pub(crate) fn classify<E>(op: &str, e: SdkError<E, HttpResponse>) -> PortError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let detail = error_chain(&e);
    let message = format!("DynamoDB {op} failed: {detail}");
    let class = match &e {
        SdkError::ServiceError(service) => match service.err().code().map(class_of) {
            Some(Class::Throttled) => return PortError::Throttled { retry_after: None },
            Some(Class::Unavailable | Class::Conflict) => Class::Unavailable,
            Some(Class::Invalid) => Class::Invalid,
            Some(Class::ConditionFailed) => Class::ConditionFailed,
            _ if service.raw().status().is_server_error() => Class::Unavailable,
            // A missing table, refused credentials, an unknown code with a 4xx: retrying the
            // same request cannot succeed.
            _ => Class::Other,
        },
        SdkError::ConstructionFailure(_) => Class::Invalid,
        // Timeouts, connection failures, unreadable responses.
        _ => Class::Unavailable,
    };
    match class {
        Class::Unavailable => PortError::unavailable(message, e),
        Class::Invalid => PortError::invalid("DynamoDB request", Failure::new(message, e)),
        Class::ConditionFailed => PortError::condition_failed("DynamoDB item", Failure::new(message, e)),
        Class::Throttled | Class::Conflict | Class::Other => PortError::backend(message, false, e),
    }
}

/// How a `TransactWriteItems` call ended, when it did not succeed.
#[derive(Debug)]
pub(crate) enum TransactFailure {
    /// A condition failed or another transaction held an item: the state moved since it was
    /// read. Re-read and decide again.
    LostRace,
    /// Anything else, classified.
    Failed(PortError),
}

/// Sorts a transaction error into a lost race (every reason a condition or a conflict) or a
/// classified failure (the worst reason wins: invalid, then throttled, then unavailable).
pub(crate) fn transact_failure(e: SdkError<TransactWriteItemsError, HttpResponse>) -> TransactFailure {
    transact_failure_of("apply", e)
}

/// [`transact_failure`] of the transaction of operation `op` ("apply", "append to the feed" …).
pub(crate) fn transact_failure_of(op: &str, e: SdkError<TransactWriteItemsError, HttpResponse>) -> TransactFailure {
    let SdkError::ServiceError(service) = &e else { return TransactFailure::Failed(classify(op, e)) };
    let TransactWriteItemsError::TransactionCanceledException(cancelled) = service.err() else {
        return TransactFailure::Failed(classify(op, e));
    };
    let reasons: Vec<(Class, &CancellationReason)> = cancelled
        .cancellation_reasons()
        .iter()
        .filter(|r| r.code().is_some_and(|c| c != "None"))
        .map(|r| (class_of(r.code().unwrap_or_default()), r))
        .collect();
    let detail = || {
        let parts: Vec<String> = cancelled
            .cancellation_reasons()
            .iter()
            .enumerate()
            .map(|(i, r)| format!("item {i}: {} {}", r.code().unwrap_or("?"), r.message().unwrap_or_default()))
            .collect();
        format!("DynamoDB {op} was cancelled: {} ({})", error_chain(&e), parts.join("; "))
    };
    let has = |class: Class| reasons.iter().any(|(c, _)| *c == class);
    if has(Class::Invalid) || has(Class::Other) {
        let message = detail();
        return TransactFailure::Failed(if has(Class::Invalid) {
            PortError::invalid("DynamoDB request", Failure::new(message, e))
        } else {
            PortError::backend(message, false, e)
        });
    }
    if has(Class::Throttled) {
        return TransactFailure::Failed(PortError::Throttled { retry_after: None });
    }
    if has(Class::Unavailable) {
        let message = detail();
        return TransactFailure::Failed(PortError::unavailable(message, e));
    }
    // Only conditions and conflicts (or a cancellation that gave no reasons).
    TransactFailure::LostRace
}

/// Each item's cancellation reason of a cancelled transaction: `None` for an item that was fine
/// (or when DynamoDB gave no reasons), else the class of its code.
pub(crate) fn cancellation_reasons(e: &SdkError<TransactWriteItemsError, HttpResponse>) -> Vec<Option<Class>> {
    match e {
        SdkError::ServiceError(service) => match service.err() {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => cancelled
                .cancellation_reasons()
                .iter()
                .map(|r| r.code().filter(|c| *c != "None").map(class_of))
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Whether `e` is a failed condition of a single-item write (`ConditionalCheckFailedException`).
pub(crate) fn is_condition_failed<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    matches!(e, SdkError::ServiceError(s) if s.err().code() == Some("ConditionalCheckFailedException"))
}
