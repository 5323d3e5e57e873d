//! The bucket: created with its lifecycle rule against a local endpoint, only checked against
//! AWS, where the deployment template declares both (docs/OBJECTS.md).

use super::error::{classify, is_not_found};
use super::keys::UPLOADS;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketLocationConstraint, CreateBucketConfiguration,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
};
use aws_sdk_s3::Client;
use openqq_core::ports::PortResult;
use openqq_core::PortError;

/// The lifecycle rule's id, as the deployment template names it too.
pub const UPLOAD_EXPIRY_RULE: &str = "expire-unadopted-uploads";
/// Days after which an upload nobody adopted (and an unfinished multipart upload) is deleted.
pub const UPLOAD_EXPIRY_DAYS: i32 = 1;

/// The one lifecycle rule: everything under `uploads/` expires after [`UPLOAD_EXPIRY_DAYS`].
pub(crate) fn lifecycle() -> BucketLifecycleConfiguration {
    let rule = LifecycleRule::builder()
        .id(UPLOAD_EXPIRY_RULE)
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix(UPLOADS).build())
        .expiration(LifecycleExpiration::builder().days(UPLOAD_EXPIRY_DAYS).build())
        .abort_incomplete_multipart_upload(
            AbortIncompleteMultipartUpload::builder().days_after_initiation(UPLOAD_EXPIRY_DAYS).build(),
        )
        .build()
        .expect("status is set");
    BucketLifecycleConfiguration::builder().rules(rule).build().expect("rules are set")
}

/// Creates `bucket` with the lifecycle rule unless it exists; returns whether it did. For local
/// endpoints only: against AWS the deployment template owns the bucket.
pub(crate) async fn create_bucket_if_missing(client: &Client, bucket: &str) -> PortResult<bool> {
    match client.head_bucket().bucket(bucket).send().await {
        Ok(_) => return Ok(false),
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(classify("head bucket", e)),
    }
    let mut create = client.create_bucket().bucket(bucket);
    // Outside us-east-1, S3 wants the region named again in the request.
    if let Some(region) = client.config().region().map(|r| r.as_ref()).filter(|r| *r != "us-east-1") {
        let constraint = BucketLocationConstraint::from(region);
        create = create
            .create_bucket_configuration(CreateBucketConfiguration::builder().location_constraint(constraint).build());
    }
    match create.send().await {
        Ok(_) => {}
        // Another process created it meanwhile.
        Err(e) if e.as_service_error().is_some_and(|s| s.is_bucket_already_owned_by_you()) => return Ok(false),
        Err(e) => return Err(classify("create bucket", e)),
    }
    client
        .put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(lifecycle())
        .send()
        .await
        .map_err(|e| classify("set the lifecycle rule of the bucket", e))?;
    Ok(true)
}

/// Checks that `bucket` exists and can be reached, for AWS, where nothing is ever created: a
/// missing bucket is a permanent error naming it, before the first request that needs it.
pub(crate) async fn require_bucket(client: &Client, bucket: &str) -> PortResult<()> {
    match client.head_bucket().bucket(bucket).send().await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Err(PortError::Settings(
            format!(
                "the S3 bucket {bucket} does not exist; against AWS it is never created here (the deployment \
             template declares it with its lifecycle rule, docs/OBJECTS.md)"
            )
            .into(),
        )),
        Err(e) => Err(match classify("head bucket", e) {
            PortError::Backend { message, retriable: false, source } => PortError::Backend {
                message: format!("the S3 bucket {bucket} cannot be used with these credentials: {message}"),
                retriable: false,
                source,
            },
            other => other,
        }),
    }
}
