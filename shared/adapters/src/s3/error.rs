//! S3 errors, classified into the port's semantic errors, never flattened into one kind of
//! failure: throttling (`SlowDown` and kin) is throttled; server errors, request timeouts and no
//! answer are unavailable (retriable); a missing key is not found; a request S3 refuses as
//! malformed or too large is invalid; refused credentials, a missing bucket and anything else S3
//! answers with a 4xx are permanent. The SDK's whole error chain is written into the message, and
//! the SDK error itself is kept as the port error's source.

pub(crate) use crate::aws_common::error_chain;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use openqq_core::{Failure, PortError};
use std::error::Error as StdError;

/// What an S3 error code means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// The key (or the multipart upload) is not there.
    NotFound,
    /// A precondition (`If-Match`, `x-amz-copy-source-if-match`) did not hold.
    ConditionFailed,
    Throttled,
    /// S3 failed, or the connection was too slow for it; retriable.
    Unavailable,
    /// The request is wrong (malformed, too large, bytes that do not match their checksum).
    Invalid,
    /// Anything else; permanent unless S3 answered with a 5xx.
    Other,
}

/// Classifies an S3 error code (the `<Code>` of an error body, or the SDK's name for a body-less
/// answer such as HeadObject's 404).
pub(crate) fn class_of(code: &str) -> Class {
    match code {
        "NoSuchKey" | "NotFound" | "NoSuchUpload" => Class::NotFound,
        "PreconditionFailed" => Class::ConditionFailed,
        "SlowDown"
        | "Throttling"
        | "ThrottlingException"
        | "RequestLimitExceeded"
        | "TooManyRequests"
        | "RequestThrottled"
        | "RequestThrottledException" => Class::Throttled,
        // RequestTimeout comes with a 400: the upload was too slow, the next one may not be.
        // ExpiredToken: the credentials provider refreshes them before the next attempt.
        "InternalError" | "ServiceUnavailable" | "RequestTimeout" | "OperationAborted" | "ExpiredToken" => {
            Class::Unavailable
        }
        "InvalidArgument" | "InvalidRequest" | "InvalidDigest" | "BadDigest" | "EntityTooLarge" | "EntityTooSmall"
        | "KeyTooLongError" | "MalformedXML" | "InvalidObjectState" | "IncompleteBody" | "InvalidRange" => {
            Class::Invalid
        }
        _ => Class::Other,
    }
}

/// The port error for an SDK error of operation `op` ("put", "get", …). The SDK error is kept
/// as the cause of a retriable or backend error.
pub(crate) fn classify<E>(op: &str, e: SdkError<E, HttpResponse>) -> PortError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let message = format!("S3 {op} failed: {}", error_chain(&e));
    let class = match &e {
        SdkError::ServiceError(service) => {
            let status = service.raw().status();
            let class = match service.err().code() {
                Some(code) => class_of(code),
                // HEAD answers carry no body, so no code: the status says what happened.
                None if status.as_u16() == 404 => Class::NotFound,
                None if status.as_u16() == 412 => Class::ConditionFailed,
                None if status.as_u16() == 429 => Class::Throttled,
                None => Class::Other,
            };
            match class {
                Class::Other if status.is_server_error() => Class::Unavailable,
                // AccessDenied, NoSuchBucket, InvalidAccessKeyId, SignatureDoesNotMatch, an
                // unknown code with a 4xx: retrying the same request cannot succeed.
                class => class,
            }
        }
        SdkError::ConstructionFailure(_) => Class::Invalid,
        // Timeouts, connection failures, unreadable responses.
        _ => Class::Unavailable,
    };
    match class {
        Class::NotFound => PortError::NotFound,
        Class::ConditionFailed => PortError::condition_failed("S3 object", Failure::new(message, e)),
        Class::Throttled => PortError::Throttled { retry_after: None },
        Class::Unavailable => PortError::unavailable(message, e),
        Class::Invalid => PortError::invalid("S3 request", Failure::new(message, e)),
        Class::Other => PortError::backend(message, false, e),
    }
}

/// Whether `e` says the key (or bucket, for HeadBucket) is not there.
pub(crate) fn is_not_found<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    match e {
        SdkError::ServiceError(s) => match s.err().code() {
            Some(code) => class_of(code) == Class::NotFound || code == "NoSuchBucket",
            None => false,
        },
        _ => false,
    }
}
