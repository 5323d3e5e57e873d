//! The S3 flags of `openqq up`, which are also the environment of a function on Lambda
//! (`OPENQQ_S3_BUCKET`, `OPENQQ_S3_ENDPOINT`): whether the object store (full reports, large
//! netlists, direct uploads) is on an S3 bucket, and where that bucket is served. The standard
//! `AWS_REGION` and `AWS_ENDPOINT_URL` work through the AWS SDK.
//!
//! The values are checked before anything is opened or connected; a bad one stops the process
//! with a sentence naming the setting.

use anyhow::{bail, Result};
use clap::Args;

/// The S3 flags; each has an environment variable too.
#[derive(Args, Clone, Debug, Default)]
pub struct S3Args {
    /// Put the object store (full reports, large netlists, direct uploads) in this S3 bucket.
    /// Against AWS the bucket must exist, with the lifecycle rule that expires `uploads/`; with
    /// --s3-endpoint (or AWS_ENDPOINT_URL) a missing one is created with that rule.
    #[arg(long, env = "OPENQQ_S3_BUCKET")]
    pub s3_bucket: Option<String>,
    /// An S3 endpoint other than AWS's, e.g. http://127.0.0.1:5000 (a local server, addressed
    /// path-style).
    #[arg(long, env = "OPENQQ_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
}

/// The bucket setting's name, as the messages give it.
const BUCKET: &str = "--s3-bucket (OPENQQ_S3_BUCKET)";
/// The endpoint setting's name, as the messages give it.
const ENDPOINT: &str = "--s3-endpoint (OPENQQ_S3_ENDPOINT)";

impl S3Args {
    /// The bucket and endpoint, checked; `None` when the objects stay in the data dir. Pure.
    fn checked(&self) -> Result<Option<(String, Option<String>)>> {
        let Some(bucket) = &self.s3_bucket else {
            if self.s3_endpoint.is_some() {
                bail!("{ENDPOINT} says where the S3 object store is served, which needs {BUCKET}");
            }
            return Ok(None);
        };
        if !valid_bucket_name(bucket) {
            bail!(
                "{BUCKET} must be an S3 bucket name of 3 to 63 lower-case letters, digits, '.' or '-', beginning and \
                 ending with a letter or digit, not {bucket:?}"
            );
        }
        if let Some(endpoint) = &self.s3_endpoint {
            super::endpoint::check(ENDPOINT, endpoint)?;
        }
        Ok(Some((bucket.clone(), self.s3_endpoint.clone())))
    }
}

/// What S3 accepts as a new bucket's name (the adapter checks the same).
fn valid_bucket_name(name: &str) -> bool {
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (3..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
        && edge(name.as_bytes().first())
        && edge(name.as_bytes().last())
        && !name.contains("..")
}

#[cfg(feature = "s3")]
pub type S3Settings = openqq_adapters::S3Settings;
#[cfg(not(feature = "s3"))]
pub type S3Settings = std::convert::Infallible;

/// The S3 settings the flags ask for, checked; `None` when the objects stay in the data dir.
#[cfg(feature = "s3")]
pub fn settings(args: &S3Args) -> Result<Option<S3Settings>> {
    Ok(args.checked()?.map(|(bucket, endpoint)| S3Settings { bucket, endpoint }))
}

/// Without the `s3` feature, the S3 flags are refused.
#[cfg(not(feature = "s3"))]
pub fn settings(args: &S3Args) -> Result<Option<S3Settings>> {
    if args.checked()?.is_some() {
        bail!("{BUCKET} and {ENDPOINT} need an openqq built with the `s3` feature");
    }
    Ok(None)
}

/// The S3 object store, as the objects port and as the presigned-uploads capability.
pub type S3Objects = (std::sync::Arc<dyn openqq_core::ObjectStore>, std::sync::Arc<dyn openqq_core::PresignedUploads>);

/// The object store on S3 when `settings` says so (`None` when objects stay in the data dir). A
/// bucket that cannot be reached, or is missing on AWS, stops start-up with a sentence naming the
/// setting.
#[cfg(feature = "s3")]
pub async fn connect(settings: Option<S3Settings>) -> Result<Option<S3Objects>> {
    use anyhow::Context;
    let Some(settings) = settings else { return Ok(None) };
    let where_ = settings.endpoint.as_deref().unwrap_or("AWS");
    let objects = openqq_adapters::S3ObjectStore::connect(&settings).await.with_context(|| {
        format!("putting the object store in the S3 bucket {} ({BUCKET}) at {where_}", settings.bucket)
    })?;
    tracing::info!(bucket = settings.bucket, endpoint = where_, "The object store is on S3.");
    let objects = std::sync::Arc::new(objects);
    Ok(Some((objects.clone(), objects)))
}

/// Without the `s3` feature there is no S3 setting to act on.
#[cfg(not(feature = "s3"))]
pub async fn connect(settings: Option<S3Settings>) -> Result<Option<S3Objects>> {
    match settings {
        Some(never) => match never {},
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(bucket: Option<&str>, endpoint: Option<&str>) -> S3Args {
        S3Args { s3_bucket: bucket.map(Into::into), s3_endpoint: endpoint.map(Into::into) }
    }

    #[test]
    fn no_bucket_keeps_the_objects_in_the_data_dir_and_a_bucket_with_an_endpoint_is_taken() {
        assert_eq!(args(None, None).checked().unwrap(), None);
        assert_eq!(
            args(Some("openqq-objects"), Some("http://127.0.0.1:5000")).checked().unwrap(),
            Some(("openqq-objects".into(), Some("http://127.0.0.1:5000".into())))
        );
        assert_eq!(args(Some("a.b-1"), None).checked().unwrap(), Some(("a.b-1".into(), None)));
        for ok in ["https://s3.eu-west-1.amazonaws.com", "http://localhost:9000/", "http://[::1]:5000"] {
            args(Some("bucket"), Some(ok)).checked().unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn a_bad_value_is_refused_with_a_sentence_naming_the_setting_and_its_variable() {
        for (bucket, endpoint, setting) in [
            (Some(""), None, "--s3-bucket (OPENQQ_S3_BUCKET)"),
            (Some("ab"), None, "--s3-bucket (OPENQQ_S3_BUCKET)"),
            (Some("Upper"), None, "--s3-bucket (OPENQQ_S3_BUCKET)"),
            (Some("under_score"), None, "--s3-bucket (OPENQQ_S3_BUCKET)"),
            (Some("-dash"), None, "--s3-bucket (OPENQQ_S3_BUCKET)"),
            (Some("a..b"), None, "--s3-bucket (OPENQQ_S3_BUCKET)"),
            (Some("ok-bucket"), Some("not a url"), "--s3-endpoint (OPENQQ_S3_ENDPOINT)"),
            (Some("ok-bucket"), Some("127.0.0.1:5000"), "--s3-endpoint (OPENQQ_S3_ENDPOINT)"),
            (Some("ok-bucket"), Some("ftp://host"), "--s3-endpoint (OPENQQ_S3_ENDPOINT)"),
            (Some("ok-bucket"), Some("http://"), "--s3-endpoint (OPENQQ_S3_ENDPOINT)"),
            (Some("ok-bucket"), Some("http://host:port"), "--s3-endpoint (OPENQQ_S3_ENDPOINT)"),
            (Some("ok-bucket"), Some("http://[::1]x"), "--s3-endpoint (OPENQQ_S3_ENDPOINT)"),
            (None, Some("http://127.0.0.1:5000"), "needs --s3-bucket (OPENQQ_S3_BUCKET)"),
        ] {
            let message = args(bucket, endpoint).checked().expect_err("refused").to_string();
            assert!(message.contains(setting), "{bucket:?} {endpoint:?}: {message}");
        }
    }
}
