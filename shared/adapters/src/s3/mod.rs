//! The object store on S3 (cargo feature `s3`): large payloads by tenant and SHA-256 in one
//! bucket, and direct uploads through presigned URLs (docs/OBJECTS.md).
//!
//! - [`keys`]: the key layout (`objects/{tenant}/{sha256}`, `uploads/{tenant}/{sha256}`), the
//!   tenant escaping that keeps every tenant under its own prefix, bucket-name checks.
//! - `objects`: put (content-addressed, checksummed), get (digest checked), usage (listing both
//!   of the tenant's prefixes), stat, presigned uploads and their adoption.
//! - `bucket`: the bucket and its lifecycle rule (uploads expire after a day), created against
//!   a local endpoint, only checked against AWS.
//! - `error`: every SDK error classified (not found, throttled, unavailable, invalid,
//!   permanent), never flattened into one kind of failure.

mod bucket;
mod error;
pub mod keys;
mod objects;

pub use bucket::{UPLOAD_EXPIRY_DAYS, UPLOAD_EXPIRY_RULE};
pub use objects::MAX_UPLOAD_TTL;

use crate::aws_common::{credentials_in_environment, LOCAL_REGION};
use crate::SettingsError;
use async_trait::async_trait;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::Client;
use openqq_core::ports::{PortResult, UploadTarget};
use openqq_core::{ObjectRef, ObjectStore, PresignedUploads, TenantId};
use std::time::Duration;

/// Where the objects are: the bucket and, for a local stand-in, an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// The bucket (`--s3-bucket`).
    pub bucket: String,
    /// An endpoint other than AWS's (`--s3-endpoint`, a local server), addressed path-style.
    /// `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_S3` are honoured too, as by every AWS SDK.
    pub endpoint: Option<String>,
}

pub struct S3ObjectStore {
    client: Client,
    bucket: String,
}

impl S3ObjectStore {
    /// A store on `bucket` through `client` (tests hand in one configured for a local server or
    /// one that replays recorded responses). A local server wants path-style addressing
    /// (`force_path_style`) in the client's configuration.
    pub fn new(client: Client, bucket: impl Into<String>) -> Result<Self, SettingsError> {
        let bucket = bucket.into();
        if !keys::valid_bucket_name(&bucket) {
            return Err(SettingsError::new(format!(
                "the S3 bucket name {bucket:?} is not valid: 3 to 63 lower-case letters, digits, '.' or '-', \
                 beginning and ending with a letter or digit"
            )));
        }
        Ok(Self { client, bucket })
    }

    /// A store with the AWS settings and credentials of the environment. With an endpoint
    /// (given, or in `AWS_ENDPOINT_URL`) requests are path-style, the bucket is created with its
    /// lifecycle rule when missing and, when the environment names no region or credentials, a
    /// local server's stand-ins are used; against AWS nothing is ever created (the deployment
    /// template owns the bucket) and a missing bucket is an error naming it.
    pub async fn connect(settings: &S3Settings) -> PortResult<Self> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(endpoint) = &settings.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        let sdk = loader.load().await;
        let mut config = aws_sdk_s3::config::Builder::from(&sdk);
        // `AWS_ENDPOINT_URL_S3` reaches the client without showing in the shared settings.
        let local = sdk.endpoint_url().is_some() || std::env::var_os("AWS_ENDPOINT_URL_S3").is_some();
        if local {
            // A local server answers on one host; virtual-hosted buckets would need DNS for each.
            config = config.force_path_style(true);
            if sdk.region().is_none() {
                config = config.region(Region::new(LOCAL_REGION));
            }
            if !credentials_in_environment() {
                // A local server accepts any key; without one the SDK would search instance metadata.
                config = config.credentials_provider(Credentials::new("local", "local", None, None, "local-endpoint"));
            }
        }
        let config = config.build();
        if config.region().is_none() {
            return Err(SettingsError::new(
                "the S3 object store needs an AWS region: set AWS_REGION (or give --s3-endpoint)",
            )
            .into());
        }
        let store = Self::new(Client::from_conf(config), settings.bucket.clone())?;
        if local {
            store.create_bucket_if_missing().await?;
        } else {
            bucket::require_bucket(&store.client, &store.bucket).await?;
        }
        Ok(store)
    }

    /// Creates the bucket, with the rule that expires unadopted uploads, unless it exists;
    /// returns whether it did.
    pub async fn create_bucket_if_missing(&self) -> PortResult<bool> {
        bucket::create_bucket_if_missing(&self.client, &self.bucket).await
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }
}

#[async_trait]
impl ObjectStore for S3ObjectStore {
    async fn put(&self, tenant: &TenantId, bytes: Vec<u8>) -> PortResult<ObjectRef> {
        objects::put(&self.client, &self.bucket, keys::OBJECTS, tenant, bytes).await
    }

    async fn get(&self, tenant: &TenantId, digest: &str) -> PortResult<Vec<u8>> {
        objects::get(&self.client, &self.bucket, tenant, digest).await
    }

    async fn usage(&self, tenant: &TenantId) -> PortResult<u64> {
        objects::usage(&self.client, &self.bucket, tenant).await
    }

    async fn stat(&self, tenant: &TenantId, digest: &str) -> PortResult<Option<u64>> {
        objects::stat(&self.client, &self.bucket, tenant, digest).await
    }

    /// Clients of an S3 store upload to presigned targets; bytes that come through the API all
    /// the same are kept as an object at once (so they never expire).
    async fn put_upload(&self, tenant: &TenantId, bytes: Vec<u8>) -> PortResult<ObjectRef> {
        objects::put(&self.client, &self.bucket, keys::UPLOADS, tenant, bytes).await
    }

    async fn adopt_upload(&self, tenant: &TenantId, object: &ObjectRef) -> PortResult<()> {
        objects::adopt_upload(&self.client, &self.bucket, tenant, object).await
    }

    async fn read_upload(&self, tenant: &TenantId, object: &ObjectRef) -> PortResult<Vec<u8>> {
        objects::read_upload(&self.client, &self.bucket, tenant, object).await
    }

    async fn delete(&self, tenant: &TenantId, digest: &str) -> PortResult<bool> {
        objects::delete(&self.client, &self.bucket, tenant, digest).await
    }
}

#[async_trait]
impl PresignedUploads for S3ObjectStore {
    async fn presign_upload(&self, tenant: &TenantId, object: &ObjectRef, ttl: Duration) -> PortResult<UploadTarget> {
        objects::presign_upload(&self.client, &self.bucket, tenant, object, ttl).await
    }
}

#[cfg(test)]
mod tests;
