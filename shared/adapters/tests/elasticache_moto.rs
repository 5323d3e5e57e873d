//! The ElastiCache lookup against moto (`OPENQQ_TEST_DYNAMODB_ENDPOINT`, the local AWS stand-in
//! scripts/services/moto.sh starts; it serves ElastiCache on the same port). moto implements
//! replication groups but not serverless caches (`DescribeServerlessCaches` answers 500), so
//! the serverless half is tested with recorded answers (src/elasticache/tests.rs) and here only
//! shown not to be mistaken for "no such cache". Without the variable the tests say so and pass
//! without running.
//!
//!   OPENQQ_TEST_DYNAMODB_ENDPOINT=$(scripts/services/moto.sh) \
//!     cargo test -p openqq-adapters --features elasticache --test elasticache_moto
#![cfg(feature = "elasticache")]

use aws_sdk_elasticache::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_elasticache::Client;
use openqq_adapters::elasticache::{self, ElastiCacheError};

const ENDPOINT_VAR: &str = "OPENQQ_TEST_DYNAMODB_ENDPOINT";

fn client() -> Option<Client> {
    let Ok(endpoint) = std::env::var(ENDPOINT_VAR) else {
        eprintln!("{ENDPOINT_VAR} is not set: skipping (scripts/services/moto.sh starts a server)");
        return None;
    };
    let config = aws_sdk_elasticache::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .build();
    Some(Client::from_conf(config))
}

/// A replication group name no other test run uses.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

async fn create_group(client: &Client, name: &str, tls: bool) {
    client
        .create_replication_group()
        .replication_group_id(name)
        .replication_group_description("openqq limiter test")
        .engine("redis")
        .cache_node_type("cache.t3.micro")
        .num_cache_clusters(1)
        .transit_encryption_enabled(tls)
        .send()
        .await
        .expect("moto creates the replication group");
}

#[tokio::test]
async fn a_replication_group_resolves_to_its_primary_endpoint_with_tls() {
    let Some(client) = client() else { return };
    let name = unique("limiter");
    create_group(&client, &name, true).await;
    let group = elasticache::replication_group(&client, &name).await.unwrap().expect("the group is found");
    let url = elasticache::replication_group_url(&name, &group).unwrap();
    assert!(url.starts_with(&format!("rediss://master.{name}.")) && url.ends_with(":6379"), "{url}");
    client.delete_replication_group().replication_group_id(&name).send().await.unwrap();
}

#[tokio::test]
async fn a_missing_group_is_none_and_a_plaintext_group_is_refused() {
    let Some(client) = client() else { return };
    assert!(elasticache::replication_group(&client, &unique("nosuch")).await.unwrap().is_none());
    let name = unique("plain");
    create_group(&client, &name, false).await;
    let group = elasticache::replication_group(&client, &name).await.unwrap().expect("the group is found");
    let err = elasticache::replication_group_url(&name, &group).unwrap_err();
    assert!(matches!(err, ElastiCacheError::Plaintext { .. }), "{err:?}");
    client.delete_replication_group().replication_group_id(&name).send().await.unwrap();
}

#[tokio::test]
async fn a_server_that_cannot_answer_for_serverless_caches_is_an_error_never_a_missing_cache() {
    let Some(client) = client() else { return };
    let name = unique("limiter");
    create_group(&client, &name, true).await;
    // moto answers DescribeServerlessCaches with a 500: the lookup stops there, retriable,
    // instead of taking the failure for "no serverless cache" and moving on.
    let err = elasticache::redis_url_with(&client, &name).await.unwrap_err();
    assert!(matches!(err, ElastiCacheError::Lookup { .. }) && err.is_retriable(), "{err:?}");
    client.delete_replication_group().replication_group_id(&name).send().await.unwrap();
}
