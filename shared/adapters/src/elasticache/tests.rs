//! The lookup against recorded ElastiCache answers (the SDK's replaying test client): the local
//! AWS stand-in (moto) has no serverless caches, so these answers are what AWS documents for
//! `DescribeServerlessCaches` and `DescribeReplicationGroups`.

use super::*;
use aws_sdk_elasticache::config::retry::RetryConfig;
use aws_sdk_elasticache::config::{BehaviorVersion, Credentials, Region};
use aws_smithy_http_client::test_util::{ReplayEvent, StaticReplayClient};
use aws_smithy_types::body::SdkBody;

const NS: &str = "http://elasticache.amazonaws.com/doc/2015-02-02/";

/// A recorded answer; the request side is not compared (the tests read what was sent instead).
fn answer(status: u16, body: String) -> ReplayEvent {
    let request = http::Request::builder().uri("https://elasticache.eu-west-1.amazonaws.com/").body(SdkBody::empty());
    let response =
        http::Response::builder().status(status).header("content-type", "text/xml").body(SdkBody::from(body));
    ReplayEvent::new(request.unwrap(), response.unwrap())
}

fn fault(status: u16, code: &str) -> ReplayEvent {
    answer(
        status,
        format!(
            r#"<ErrorResponse xmlns="{NS}"><Error><Type>Sender</Type><Code>{code}</Code><Message>recorded {code}</Message></Error><RequestId>r</RequestId></ErrorResponse>"#
        ),
    )
}

fn serverless(name: &str, status: &str, endpoint: &str) -> ReplayEvent {
    answer(
        200,
        format!(
            r#"<DescribeServerlessCachesResponse xmlns="{NS}"><DescribeServerlessCachesResult><ServerlessCaches><member>
<ServerlessCacheName>{name}</ServerlessCacheName><Status>{status}</Status><Engine>valkey</Engine>{endpoint}
</member></ServerlessCaches></DescribeServerlessCachesResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeServerlessCachesResponse>"#
        ),
    )
}

fn replication_group(name: &str, cluster: bool, tls: bool) -> ReplayEvent {
    let configuration = if cluster {
        format!("<ConfigurationEndpoint><Address>clustercfg.{name}.abc123.euw1.cache.amazonaws.com</Address><Port>6379</Port></ConfigurationEndpoint>")
    } else {
        String::new()
    };
    answer(
        200,
        format!(
            r#"<DescribeReplicationGroupsResponse xmlns="{NS}"><DescribeReplicationGroupsResult><ReplicationGroups><ReplicationGroup>
<ReplicationGroupId>{name}</ReplicationGroupId><Status>available</Status><ClusterEnabled>{cluster}</ClusterEnabled>
<TransitEncryptionEnabled>{tls}</TransitEncryptionEnabled>{configuration}
<NodeGroups><NodeGroup><NodeGroupId>0001</NodeGroupId><Status>available</Status>
<PrimaryEndpoint><Address>master.{name}.abc123.euw1.cache.amazonaws.com</Address><Port>6380</Port></PrimaryEndpoint>
<ReaderEndpoint><Address>replica.{name}.abc123.euw1.cache.amazonaws.com</Address><Port>6380</Port></ReaderEndpoint>
</NodeGroup></NodeGroups></ReplicationGroup></ReplicationGroups></DescribeReplicationGroupsResult>
<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeReplicationGroupsResponse>"#
        ),
    )
}

const ENDPOINT: &str =
    "<Endpoint><Address>limiter-abc123.serverless.euw1.cache.amazonaws.com</Address><Port>6379</Port></Endpoint>";

fn client(events: Vec<ReplayEvent>) -> (Client, StaticReplayClient) {
    let replay = StaticReplayClient::new(events);
    let config = aws_sdk_elasticache::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"))
        .retry_config(RetryConfig::disabled())
        .http_client(replay.clone())
        .build();
    (Client::from_conf(config), replay)
}

/// The `Action` of each request sent, in order.
fn actions(replay: &StaticReplayClient) -> Vec<String> {
    replay
        .actual_requests()
        .map(|r| {
            let body = std::str::from_utf8(r.body().bytes().unwrap()).unwrap().to_owned();
            body.split('&').find_map(|p| p.strip_prefix("Action=")).unwrap_or("?").to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_serverless_cache_resolves_to_its_endpoint_with_tls_without_asking_for_replication_groups() {
    let (c, replay) = client(vec![serverless("limiter", "available", ENDPOINT)]);
    let url = redis_url_with(&c, "limiter").await.unwrap();
    assert_eq!(url, "rediss://limiter-abc123.serverless.euw1.cache.amazonaws.com:6379");
    assert_eq!(actions(&replay), ["DescribeServerlessCaches"]);
    let sent = replay.actual_requests().next().unwrap();
    let body = std::str::from_utf8(sent.body().bytes().unwrap()).unwrap();
    assert!(body.contains("ServerlessCacheName=limiter"), "{body}");
}

#[tokio::test]
async fn a_name_that_is_no_serverless_cache_is_looked_up_as_a_replication_group() {
    let (c, replay) =
        client(vec![fault(404, "ServerlessCacheNotFoundFault"), replication_group("limiter", false, true)]);
    let url = redis_url_with(&c, "limiter").await.unwrap();
    assert_eq!(url, "rediss://master.limiter.abc123.euw1.cache.amazonaws.com:6380", "the primary takes the writes");
    assert_eq!(actions(&replay), ["DescribeServerlessCaches", "DescribeReplicationGroups"]);
    let sent = replay.actual_requests().nth(1).unwrap();
    let body = std::str::from_utf8(sent.body().bytes().unwrap()).unwrap();
    assert!(body.contains("ReplicationGroupId=limiter"), "{body}");
}

#[tokio::test]
async fn a_name_matching_neither_is_an_error_naming_it() {
    let (c, _) = client(vec![fault(404, "ServerlessCacheNotFoundFault"), fault(404, "ReplicationGroupNotFoundFault")]);
    let err = redis_url_with(&c, "nosuch").await.unwrap_err();
    assert!(matches!(err, ElastiCacheError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("\"nosuch\""), "{err}");
    assert!(!err.is_retriable());
}

#[tokio::test]
async fn a_cache_still_being_created_has_no_endpoint_and_may_be_asked_again() {
    let (c, _) = client(vec![serverless("limiter", "creating", "")]);
    let err = redis_url_with(&c, "limiter").await.unwrap_err();
    assert!(matches!(err, ElastiCacheError::NoEndpoint { .. }) && err.is_retriable(), "{err:?}");
    assert!(err.to_string().contains("status creating"), "{err}");
}

#[tokio::test]
async fn a_cluster_mode_group_and_a_plaintext_group_are_refused_with_the_reason() {
    let (c, _) = client(vec![fault(404, "ServerlessCacheNotFoundFault"), replication_group("sharded", true, true)]);
    let err = redis_url_with(&c, "sharded").await.unwrap_err();
    assert!(matches!(err, ElastiCacheError::ClusterMode { .. }), "{err:?}");
    assert!(err.to_string().contains("cluster mode enabled"), "{err}");
    let (c, _) = client(vec![fault(404, "ServerlessCacheNotFoundFault"), replication_group("open", false, false)]);
    let err = redis_url_with(&c, "open").await.unwrap_err();
    assert!(matches!(err, ElastiCacheError::Plaintext { .. }), "{err:?}");
}

#[tokio::test]
async fn a_failed_lookup_keeps_its_cause_and_throttling_is_retriable_but_a_refused_parameter_is_not() {
    let (c, replay) = client(vec![fault(400, "Throttling")]);
    let err = redis_url_with(&c, "limiter").await.unwrap_err();
    assert!(matches!(err, ElastiCacheError::Lookup { .. }) && err.is_retriable(), "{err:?}");
    assert_eq!(actions(&replay).len(), 1, "a failure is not taken for a missing serverless cache");
    let cause = std::error::Error::source(&err).map(|s| format!("{s:?}")).unwrap_or_default();
    assert!(cause.contains("recorded Throttling"), "the cause is kept: {cause}");

    let (c, _) = client(vec![fault(400, "InvalidParameterValue")]);
    let err = redis_url_with(&c, "limiter").await.unwrap_err();
    assert!(matches!(err, ElastiCacheError::Lookup { .. }), "{err:?}");
    assert!(!err.is_retriable(), "{err:?}");
}

#[tokio::test]
async fn a_bad_name_is_refused_before_any_request() {
    let (c, replay) = client(vec![]);
    for bad in ["", "1abc", "has space", "a/b", &"x".repeat(MAX_NAME_LEN + 1)] {
        let err = redis_url_with(&c, bad).await.unwrap_err();
        assert!(matches!(err, ElastiCacheError::InvalidName { .. }), "{bad:?}: {err:?}");
    }
    assert_eq!(replay.actual_requests().count(), 0);
    assert!(valid_name("limiter-1") && valid_name(&"x".repeat(MAX_NAME_LEN)));
}
