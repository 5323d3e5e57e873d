//! The limiter's Redis on ElastiCache (cargo feature `elasticache`): a cache name resolved to
//! the `rediss://` URL of its endpoint with `aws-sdk-elasticache`.
//!
//! A name is looked up as a serverless cache first (`DescribeServerlessCaches`), then as a
//! replication group (`DescribeReplicationGroups`); one matching neither is
//! [`ElastiCacheError::NotFound`]. TLS is always on: a serverless cache only speaks TLS, and a
//! replication group without in-transit encryption is refused rather than reached in plain text.
//!
//! What the limiter needs from the endpoint:
//! - a **serverless cache** is one endpoint in front of a sharded cache; every limiter script
//!   touches only keys of one tenant's hash tag (`rl:{tenant}`, `rlw:{tenant}`, `rlw:{tenant}:sum`),
//!   so each runs on one shard;
//! - a **replication group with cluster mode disabled** is one shard: its primary endpoint takes
//!   the writes;
//! - a **replication group with cluster mode enabled** needs a client that follows `MOVED`
//!   redirections across shards, which the limiter's connection does not; it is refused with a
//!   sentence saying so.

use aws_config::SdkConfig;
use aws_sdk_elasticache::error::SdkError;
use aws_sdk_elasticache::operation::describe_replication_groups::DescribeReplicationGroupsError;
use aws_sdk_elasticache::operation::describe_serverless_caches::DescribeServerlessCachesError;
use aws_sdk_elasticache::types::{Endpoint, ReplicationGroup, ServerlessCache};
use aws_sdk_elasticache::Client;

pub use crate::limiter_choice::{valid_cache_name as valid_name, MAX_CACHE_NAME_LEN as MAX_NAME_LEN};

#[derive(Debug, thiserror::Error)]
pub enum ElastiCacheError {
    #[error("{name:?} is not a valid ElastiCache cache name: 1 to {MAX_NAME_LEN} letters, digits or '-', starting with a letter")]
    InvalidName { name: String },
    #[error("no ElastiCache serverless cache or replication group is named {name:?} in this account and region")]
    NotFound { name: String },
    #[error("the ElastiCache cache {name:?} has no endpoint yet (status {status})")]
    NoEndpoint { name: String, status: String },
    #[error(
        "the ElastiCache replication group {name:?} has cluster mode enabled, which the limiter's connection \
         cannot follow across shards; use a serverless cache or a replication group with cluster mode disabled"
    )]
    ClusterMode { name: String },
    #[error(
        "the ElastiCache replication group {name:?} has in-transit encryption off; the limiter connects to \
         ElastiCache only with TLS"
    )]
    Plaintext { name: String },
    #[error("looking up the ElastiCache cache {name:?}")]
    Lookup {
        name: String,
        #[source]
        source: Box<aws_sdk_elasticache::Error>,
    },
}

impl ElastiCacheError {
    /// Whether asking again later may succeed: the lookup failed on the way (throttled, a 5xx,
    /// no connection) or the cache is still being created. A missing or misconfigured cache is
    /// not going to change by retrying.
    pub fn is_retriable(&self) -> bool {
        match self {
            ElastiCacheError::NoEndpoint { .. } => true,
            ElastiCacheError::Lookup { source, .. } => !matches!(
                **source,
                aws_sdk_elasticache::Error::InvalidParameterValueException(_)
                    | aws_sdk_elasticache::Error::InvalidParameterCombinationException(_)
            ),
            _ => false,
        }
    }
}

/// The `rediss://` URL of the cache `name`, looked up with the region, endpoint and credentials
/// of `sdk` (the caller decides where to look).
pub async fn redis_url(sdk: &SdkConfig, name: &str) -> Result<String, ElastiCacheError> {
    redis_url_with(&Client::new(sdk), name).await
}

/// [`redis_url`] through a given client (tests hand in one that replays recorded answers).
pub async fn redis_url_with(client: &Client, name: &str) -> Result<String, ElastiCacheError> {
    if !valid_name(name) {
        return Err(ElastiCacheError::InvalidName { name: name.to_owned() });
    }
    if let Some(cache) = serverless_cache(client, name).await? {
        return serverless_url(name, &cache);
    }
    match replication_group(client, name).await? {
        Some(group) => replication_group_url(name, &group),
        None => Err(ElastiCacheError::NotFound { name: name.to_owned() }),
    }
}

/// The serverless cache `name`, or `None` when there is none by that name.
pub async fn serverless_cache(client: &Client, name: &str) -> Result<Option<ServerlessCache>, ElastiCacheError> {
    match client.describe_serverless_caches().serverless_cache_name(name).send().await {
        Ok(out) => Ok(out.serverless_caches.unwrap_or_default().into_iter().next()),
        Err(SdkError::ServiceError(e))
            if matches!(e.err(), DescribeServerlessCachesError::ServerlessCacheNotFoundFault(_)) =>
        {
            Ok(None)
        }
        Err(e) => Err(ElastiCacheError::Lookup { name: name.to_owned(), source: Box::new(e.into()) }),
    }
}

/// The replication group `name`, or `None` when there is none by that id.
pub async fn replication_group(client: &Client, name: &str) -> Result<Option<ReplicationGroup>, ElastiCacheError> {
    match client.describe_replication_groups().replication_group_id(name).send().await {
        Ok(out) => Ok(out.replication_groups.unwrap_or_default().into_iter().next()),
        Err(SdkError::ServiceError(e))
            if matches!(e.err(), DescribeReplicationGroupsError::ReplicationGroupNotFoundFault(_)) =>
        {
            Ok(None)
        }
        Err(e) => Err(ElastiCacheError::Lookup { name: name.to_owned(), source: Box::new(e.into()) }),
    }
}

/// The URL of a serverless cache's endpoint (always TLS).
pub fn serverless_url(name: &str, cache: &ServerlessCache) -> Result<String, ElastiCacheError> {
    let status = cache.status.as_deref().unwrap_or("unknown");
    url(name, status, cache.endpoint.as_ref())
}

/// The URL of a replication group's primary endpoint; refused with cluster mode enabled or
/// in-transit encryption off.
pub fn replication_group_url(name: &str, group: &ReplicationGroup) -> Result<String, ElastiCacheError> {
    if group.cluster_enabled == Some(true) || group.configuration_endpoint.is_some() {
        return Err(ElastiCacheError::ClusterMode { name: name.to_owned() });
    }
    if group.transit_encryption_enabled != Some(true) {
        return Err(ElastiCacheError::Plaintext { name: name.to_owned() });
    }
    let status = group.status.as_deref().unwrap_or("unknown");
    let primary = group.node_groups().first().and_then(|g| g.primary_endpoint.as_ref());
    url(name, status, primary)
}

fn url(name: &str, status: &str, endpoint: Option<&Endpoint>) -> Result<String, ElastiCacheError> {
    let no_endpoint = || ElastiCacheError::NoEndpoint { name: name.to_owned(), status: status.to_owned() };
    let endpoint = endpoint.ok_or_else(no_endpoint)?;
    let address = endpoint.address.as_deref().filter(|a| !a.is_empty()).ok_or_else(no_endpoint)?;
    let port = endpoint.port.and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0).unwrap_or(6379);
    Ok(format!("rediss://{address}:{port}"))
}

#[cfg(test)]
mod tests;
