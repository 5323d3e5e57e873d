//! Error classification and lost races against recorded DynamoDB answers (the SDK's replaying
//! test client): throttling and server errors that a local server never produces on demand.

use super::*;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_smithy_http_client::test_util::{ReplayEvent, StaticReplayClient};
use aws_smithy_types::body::SdkBody;
use openqq_core::PortError;
use openqq_core::{CorrelationId, DesignReads, DesignWrites, EventKind, WebhookId};

const TYPE_PREFIX: &str = "com.amazonaws.dynamodb.v20120810#";

/// A recorded answer of DynamoDB; the request side is not compared.
pub(super) fn answer(status: u16, body: String) -> ReplayEvent {
    let request = http::Request::builder().uri("https://dynamodb.eu-west-1.amazonaws.com/").body(SdkBody::empty());
    let response = http::Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amzn-requestid", "RECORDED")
        .body(SdkBody::from(body));
    ReplayEvent::new(request.unwrap(), response.unwrap())
}

fn error(status: u16, code: &str, extra: &str) -> ReplayEvent {
    answer(status, format!(r#"{{"__type":"{TYPE_PREFIX}{code}","message":"recorded {code}"{extra}}}"#))
}

/// A store whose client replays `events` in order, with the SDK's own retries off so that each
/// answer reaches the classification.
fn store(events: Vec<ReplayEvent>) -> (DynamoDesignStore, StaticReplayClient) {
    let (client, replay) = replaying(events);
    (DynamoDesignStore::new(client, "openqq").unwrap(), replay)
}

/// A client that answers `events` in order (it keeps the requests sent), with the SDK's own
/// retries off.
pub(super) fn replaying(events: Vec<ReplayEvent>) -> (Client, StaticReplayClient) {
    let replay = StaticReplayClient::new(events);
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"))
        .retry_config(RetryConfig::disabled())
        .http_client(replay.clone())
        .build();
    (Client::from_conf(config), replay)
}

fn ids() -> (TenantId, DesignId) {
    (TenantId::parse("acme").unwrap(), DesignId::parse("d-1").unwrap())
}

fn entry(kind: EventKind, revision: u64) -> TimelineEntry {
    TimelineEntry {
        event_id: uuid::Uuid::now_v7(),
        kind,
        revision,
        correlation_id: CorrelationId::parse("c").unwrap(),
        occurred_at: chrono::Utc::now(),
    }
}

/// What `TransactGetItems` returns for a design at revision 1, `submitted`, write counter 1,
/// with or without the applied marker of the entry read.
fn held_design(applied: bool) -> ReplayEvent {
    let design = r#"{"Item":{"pk":{"S":"T#acme"},"sk":{"S":"D#d-1"},"revision":{"N":"1"},"status":{"S":"submitted"},"seq":{"N":"1"},"latest":{"M":{"design.submitted":{"N":"1"}}}}}"#;
    let marker = if applied { r#"{"Item":{"pk":{"S":"T#acme#D#d-1"},"sk":{"S":"K"}}}"# } else { "{}" };
    answer(200, format!(r#"{{"Responses":[{design},{marker}]}}"#))
}

#[tokio::test]
async fn throttling_of_the_read_is_classified_retriable() {
    let (t, d) = ids();
    for code in ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"] {
        let (store, _) = store(vec![error(400, code, "")]);
        let err = store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await;
        let err = err.unwrap_err();
        assert!(matches!(err, PortError::Throttled { .. }), "{code}: {err:?}");
        assert!(err.is_retriable(), "{code}");
    }
}

#[tokio::test]
async fn a_transaction_cancelled_for_throughput_is_throttled_and_never_taken_for_a_lost_race() {
    let (t, d) = ids();
    let reasons = r#","CancellationReasons":[{"Code":"ProvisionedThroughputExceeded","Message":"m"},{"Code":"None"},{"Code":"None"}]"#;
    let (store, replay) = store(vec![held_design(false), error(400, "TransactionCanceledException", reasons)]);
    let err = store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await;
    let err = err.unwrap_err();
    assert!(matches!(err, PortError::Throttled { .. }), "{err:?}");
    assert_eq!(replay.actual_requests().count(), 2, "one read, one write, no re-read");
}

#[tokio::test]
async fn a_lost_race_reads_again_and_a_replay_then_comes_out_duplicate() {
    let (t, d) = ids();
    let reasons = r#","CancellationReasons":[{"Code":"ConditionalCheckFailed","Message":"m"},{"Code":"ConditionalCheckFailed"},{"Code":"None"}]"#;
    let (store, replay) =
        store(vec![held_design(false), error(400, "TransactionCanceledException", reasons), held_design(true)]);
    let applied = store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await;
    assert_eq!(applied.unwrap(), Applied::Duplicate);
    assert_eq!(replay.actual_requests().count(), 3);
}

#[tokio::test]
async fn server_errors_and_timeouts_are_retriable_and_validation_errors_permanent() {
    let (t, d) = ids();
    let (store_500, _) = store(vec![error(500, "InternalServerError", "")]);
    let err = store_500.get(&t, &d).await.unwrap_err();
    assert!(matches!(err, PortError::Unavailable(_)) && err.is_retriable(), "{err:?}");
    let (store_503, _) = store(vec![error(503, "SomethingNew", "")]);
    let err = store_503.report(&t, &d, Some(1)).await.unwrap_err();
    assert!(err.is_retriable(), "an unknown code with a 5xx is retriable: {err:?}");
    let (invalid, _) = store(vec![error(400, "ValidationException", "")]);
    let err = invalid.report(&t, &d, Some(1)).await.unwrap_err();
    assert!(matches!(err, PortError::Invalid { .. }) && !err.is_retriable(), "{err:?}");
    assert!(err.to_string().contains("recorded ValidationException"), "the cause is kept: {err}");
    let (missing, _) = store(vec![error(400, "ResourceNotFoundException", "")]);
    let err = missing.report(&t, &d, Some(1)).await.unwrap_err();
    assert!(!err.is_retriable(), "a missing table does not appear by retrying: {err:?}");
    // No recorded answer left: the client fails to get a response, as on a dropped connection.
    let (silent, _) = store(vec![]);
    assert!(silent.get(&t, &d).await.unwrap_err().is_retriable());
}

#[tokio::test]
async fn an_event_for_a_design_that_never_materialised_is_not_found_without_a_write() {
    let (t, d) = ids();
    let (store, replay) = store(vec![answer(200, r#"{"Responses":[{},{}]}"#.into())]);
    let err = store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await;
    assert!(matches!(err, Err(PortError::NotFound)), "{err:?}");
    assert_eq!(replay.actual_requests().count(), 1);
}

#[test]
fn a_table_name_is_checked_before_any_request() {
    let config = aws_sdk_dynamodb::Config::builder().behavior_version(BehaviorVersion::latest()).build();
    for bad in ["", "ab", "has space", "a/b"] {
        let err = DynamoDesignStore::new(Client::from_conf(config.clone()), bad).err().unwrap();
        assert!(err.to_string().contains("is not valid"), "{bad:?}: {err}");
    }
}

#[tokio::test]
async fn an_applied_change_is_one_transaction_conditional_on_the_state_it_was_planned_from() {
    let (t, d) = ids();
    let (store, replay) = store(vec![held_design(false), answer(200, "{}".into())]);
    let applied = store.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await;
    assert_eq!(applied.unwrap(), Applied::Applied);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 2, "one read, one write");
    assert_eq!(sent[1].headers().get("x-amz-target"), Some("DynamoDB_20120810.TransactWriteItems"));
    let body: serde_json::Value = serde_json::from_slice(sent[1].body().bytes().unwrap()).unwrap();
    let items = body["TransactItems"].as_array().unwrap();
    assert_eq!(items.len(), 3, "design, applied marker, timeline entry: {body}");
    let design = &items[0]["Update"];
    assert_eq!(design["ConditionExpression"], "#seq = :v0 AND #revision = :v1");
    assert_eq!(
        (&design["ExpressionAttributeValues"][":v0"], &design["ExpressionAttributeValues"][":v1"]),
        (&serde_json::json!({"N": "1"}), &serde_json::json!({"N": "1"}))
    );
    assert!(design["UpdateExpression"].as_str().unwrap().contains("#status = "), "{design}");
    for put in &items[1..] {
        assert_eq!(put["Put"]["ConditionExpression"], "attribute_not_exists(#pk)");
    }
}

#[tokio::test]
async fn a_report_too_large_for_an_item_is_refused_before_any_request() {
    let (t, d) = ids();
    let (store, replay) = store(vec![]);
    let huge = format!("{{\"x\":\"{}\"}}", "a".repeat(MAX_REPORT_ITEM_BYTES));
    let change = Change::ValidationFinished {
        verdict: openqq_core::Verdict::Pass,
        report: serde_json::value::RawValue::from_string(huge).unwrap(),
    };
    let err = store.apply(&t, &d, &entry(EventKind::ValidationFinished, 1), &change).await.unwrap_err();
    assert!(matches!(err, PortError::Invalid { .. }), "{err:?}");
    assert_eq!(replay.actual_requests().count(), 0);
}

#[tokio::test]
async fn on_aws_a_missing_table_is_an_error_naming_it_and_an_existing_one_passes() {
    let (s, _) = store(vec![error(400, "ResourceNotFoundException", "")]);
    let err = table::require_table(&s.client, &s.table).await.unwrap_err();
    assert!(matches!(err, PortError::Settings(_)), "the operator's to fix: {err:?}");
    assert!(err.to_string().contains("the DynamoDB table openqq does not exist"), "{err}");
    assert!(!err.is_retriable());

    let described = r#"{"Table":{"TableName":"openqq","TableStatus":"ACTIVE"}}"#;
    let (s, _) = store(vec![answer(200, described.to_owned())]);
    table::require_table(&s.client, &s.table).await.unwrap();

    // Any other refusal keeps its own class: throttling stays retriable.
    let (s, _) = store(vec![error(400, "ThrottlingException", "")]);
    let err = table::require_table(&s.client, &s.table).await.unwrap_err();
    assert!(err.is_retriable(), "{err:?}");
}

#[tokio::test]
async fn every_request_sent_is_counted_by_operation_retries_included() {
    let counters = crate::counting_recorder::Counters::default();
    let _local = metrics::set_default_local_recorder(&counters);
    let (t, d) = ids();
    let (s, _) = store(vec![answer(200, "{}".into()), answer(200, "{}".into())]);
    assert!(s.get(&t, &d).await.unwrap().is_none());
    let get_item = format!("{}{{backend=dynamodb,operation=GetItem}}", crate::STORE_REQUESTS_METRIC);
    assert_eq!(counters.get(&get_item), 2, "the design and its accepted marker: {:?}", counters.all());

    // With the SDK's retries on, a throttled attempt and its retry are two round trips.
    let events = vec![error(400, "ThrottlingException", ""), held_design(false), answer(200, "{}".into())];
    let replay = StaticReplayClient::new(events);
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"))
        .retry_config(RetryConfig::standard().with_max_attempts(2).with_initial_backoff(Duration::from_millis(1)))
        .http_client(replay.clone())
        .build();
    let s = DynamoDesignStore::new(Client::from_conf(config), "openqq").unwrap();
    let applied = s.apply(&t, &d, &entry(EventKind::ValidationStarted, 1), &Change::ValidationStarted).await;
    assert_eq!(applied.unwrap(), Applied::Applied);
    assert_eq!(replay.actual_requests().count(), 3, "a throttled read, its retry, one write");
    let read = format!("{}{{backend=dynamodb,operation=TransactGetItems}}", crate::STORE_REQUESTS_METRIC);
    assert_eq!(counters.get(&read), 2, "{:?}", counters.all());
    let write = format!("{}{{backend=dynamodb,operation=TransactWriteItems}}", crate::STORE_REQUESTS_METRIC);
    assert_eq!(counters.get(&write), 1, "{:?}", counters.all());
}

#[tokio::test]
async fn a_new_design_is_submitted_in_one_write_without_a_read() {
    let (t, d) = ids();
    let (store, replay) = store(vec![answer(200, "{}".into())]);
    let submitted = Change::Submitted { name: Some("blinky".into()) };
    assert_eq!(store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted).await.unwrap(), Applied::Applied);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 1, "no read before the write");
    assert_eq!(sent[0].headers().get("x-amz-target"), Some("DynamoDB_20120810.TransactWriteItems"));
    let body: serde_json::Value = serde_json::from_slice(sent[0].body().bytes().unwrap()).unwrap();
    for item in body["TransactItems"].as_array().unwrap() {
        assert_eq!(item["Put"]["ConditionExpression"], "attribute_not_exists(#pk)", "every item only if new: {item}");
    }
}

#[tokio::test]
async fn a_replayed_submission_fails_its_unread_write_then_reads_and_comes_out_duplicate() {
    let (t, d) = ids();
    let reasons = r#","CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"ConditionalCheckFailed"},{"Code":"ConditionalCheckFailed"}]"#;
    let (store, replay) = store(vec![error(400, "TransactionCanceledException", reasons), held_design(true)]);
    let submitted = Change::Submitted { name: None };
    let applied = store.apply(&t, &d, &entry(EventKind::DesignSubmitted, 1), &submitted).await;
    assert_eq!(applied.unwrap(), Applied::Duplicate);
    assert_eq!(replay.actual_requests().count(), 2, "the refused write, then the read");
}

/// What `BatchGetItem` returns for an append's read: `items` (JSON of stored items) found.
fn feed_read(items: &[&str]) -> ReplayEvent {
    answer(200, format!(r#"{{"Responses":{{"openqq":[{}]}},"UnprocessedKeys":{{}}}}"#, items.join(",")))
}

fn head(seq: u64) -> String {
    format!(r#"{{"pk":{{"S":"T#acme#F"}},"sk":{{"S":"H"}},"seq":{{"N":"{seq}"}}}}"#)
}

fn append_one(
    store: &DynamoDesignStore,
) -> impl std::future::Future<Output = openqq_core::ports::PortResult<u64>> + '_ {
    let (t, d) = ids();
    async move {
        let e = entry(EventKind::DesignSubmitted, 1);
        store
            .append_feed(
                &t,
                &openqq_core::NewFeedEntry { design_id: &d, entry: &e, verdict: None, elapsed_ms: None, batch: None },
            )
            .await
    }
}

#[tokio::test]
async fn an_append_that_loses_the_race_for_its_number_reads_again_and_takes_the_next() {
    let reasons =
        r#","CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"None"},{"Code":"None"},{"Code":"None"}]"#;
    let (store, replay) = store(vec![
        feed_read(&[&head(3)]),
        error(400, "TransactionCanceledException", reasons),
        feed_read(&[&head(4)]),
        answer(200, "{}".into()),
    ]);
    assert_eq!(append_one(&store).await.unwrap(), 5);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 4, "read, lost write, read, write");
    let last: serde_json::Value = serde_json::from_slice(sent[3].body().bytes().unwrap()).unwrap();
    let items = last["TransactItems"].as_array().unwrap();
    let head = &items[0]["Update"];
    assert_eq!(head["ConditionExpression"], "#seq = :last");
    assert_eq!(head["ExpressionAttributeValues"][":last"], serde_json::json!({"N": "4"}));
    assert_eq!(items[1]["Put"]["Item"]["sk"], serde_json::json!({"S": format!("F#{:020}", 5)}));
    assert_eq!(items[3]["ConditionCheck"]["ConditionExpression"], "attribute_not_exists(#pk)", "no webhooks yet");
    assert_eq!(items.len(), 4, "no delivery without a webhook: {last}");
}

#[tokio::test]
async fn an_append_whose_entry_another_append_wrote_meanwhile_answers_that_number() {
    let reasons = r#","CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"None"},{"Code":"ConditionalCheckFailed"},{"Code":"None"}]"#;
    let (_, d) = ids();
    let once =
        format!(r#"{{"pk":{{"S":"T#acme#F"}},"sk":{{"S":"U#{d}#design.submitted#{:020}"}},"seq":{{"N":"1"}}}}"#, 1);
    let (store, replay) =
        store(vec![feed_read(&[]), error(400, "TransactionCanceledException", reasons), feed_read(&[&head(1), &once])]);
    assert_eq!(append_one(&store).await.unwrap(), 1);
    assert_eq!(replay.actual_requests().count(), 3, "read, lost write, read: nothing written twice");
}

#[tokio::test]
async fn a_throttled_append_is_throttled_and_never_taken_for_a_lost_race() {
    let reasons =
        r#","CancellationReasons":[{"Code":"ThrottlingError"},{"Code":"None"},{"Code":"None"},{"Code":"None"}]"#;
    let (store, replay) = store(vec![feed_read(&[]), error(400, "TransactionCanceledException", reasons)]);
    let err = append_one(&store).await.unwrap_err();
    assert!(matches!(err, PortError::Throttled { .. }), "{err:?}");
    assert_eq!(replay.actual_requests().count(), 2, "one read, one write, no retry of its own");
}

#[tokio::test]
async fn an_append_queues_a_delivery_per_webhook_that_wants_its_kind_in_its_one_transaction() {
    let hooks = r#"{"pk":{"S":"T#acme"},"sk":{"S":"WH"},"hooks":{"N":"2"},"version":{"N":"7"}}"#;
    let wanting = WebhookId::generate();
    let webhook = |id: WebhookId, kinds: &str| {
        format!(r#"{{"pk":{{"S":"T#acme"}},"sk":{{"S":"W#{id}"}},"id":{{"S":"{id}"}},"kinds":{{"S":"{kinds}"}}}}"#)
    };
    let listed = format!(
        r#"{{"Items":[{},{}],"Count":2}}"#,
        webhook(wanting, "design.submitted,results.ready"),
        webhook(WebhookId::generate(), "results.ready")
    );
    let (store, replay) = store(vec![feed_read(&[hooks]), answer(200, listed), answer(200, "{}".into())]);
    assert_eq!(append_one(&store).await.unwrap(), 1);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 3, "read, the webhooks, one write");
    let write: serde_json::Value = serde_json::from_slice(sent[2].body().bytes().unwrap()).unwrap();
    let items = write["TransactItems"].as_array().unwrap();
    assert_eq!(items.len(), 5, "head, entry, once, the webhooks' check, one delivery: {write}");
    let check = &items[3]["ConditionCheck"];
    assert_eq!(check["ConditionExpression"], "#version = :version");
    assert_eq!(check["ExpressionAttributeValues"][":version"], serde_json::json!({"N": "7"}));
    let delivery = &items[4]["Put"]["Item"];
    assert_eq!(delivery["pk"], serde_json::json!({"S": format!("T#acme#W#{wanting}")}));
    assert_eq!(
        (&delivery["status"], &delivery["due_pk"]),
        (&serde_json::json!({"S": "pending"}), &serde_json::json!({"S": "due"}))
    );
    assert_eq!(items[4]["Put"]["ConditionExpression"], "attribute_not_exists(#pk)");
}

/// The body of a request sent, as JSON.
fn body(request: &aws_sdk_dynamodb::config::http::HttpRequest) -> serde_json::Value {
    serde_json::from_slice(request.body().bytes().unwrap()).unwrap()
}

fn target(request: &aws_sdk_dynamodb::config::http::HttpRequest) -> &str {
    request.headers().get("x-amz-target").unwrap_or_default()
}

/// The sort keys of a transaction's items, each with the kind of write (`Put`, `Update`,
/// `ConditionCheck`).
fn written(transaction: &serde_json::Value) -> Vec<(String, String)> {
    let items = transaction["TransactItems"].as_array().unwrap();
    items
        .iter()
        .map(|item| {
            let (verb, write) = item.as_object().unwrap().iter().next().unwrap();
            let key = write.get("Item").or_else(|| write.get("Key")).unwrap();
            (verb.clone(), key["sk"]["S"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn cancelled(reasons: usize) -> ReplayEvent {
    let reasons = vec![r#"{"Code":"ConditionalCheckFailed"}"#; reasons].join(",");
    error(400, "TransactionCanceledException", &format!(r#","CancellationReasons":[{reasons}]"#))
}

const HELD_DESIGN: &str = r#"{"pk":{"S":"T#acme"},"sk":{"S":"D#d-1"},"revision":{"N":"1"},"status":{"S":"submitted"},"seq":{"N":"1"},"latest":{"M":{"design.submitted":{"N":"1"}}}}"#;

#[tokio::test]
async fn an_event_and_its_feed_entry_are_one_read_and_one_transaction() {
    let (t, d) = ids();
    let (store, replay) = store(vec![feed_read(&[HELD_DESIGN, &head(3)]), answer(200, "{}".into())]);
    let e = entry(EventKind::ValidationStarted, 1);
    let applied = store.apply_and_append(false, &t, &d, &e, &Change::ValidationStarted).await;
    assert_eq!(applied.unwrap(), Applied::Applied);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(
        sent.iter().map(|r| target(r)).collect::<Vec<_>>(),
        ["DynamoDB_20120810.BatchGetItem", "DynamoDB_20120810.TransactWriteItems"]
    );
    let read = body(sent[0]);
    assert_eq!(read["RequestItems"]["openqq"]["Keys"].as_array().unwrap().len(), 5, "{read}");
    assert_eq!(read["RequestItems"]["openqq"]["ConsistentRead"], true);
    let write = body(sent[1]);
    let once = format!("U#d-1#validation.started#{:020}", 1);
    let entry = format!("E#{:016}", 2);
    let marker = format!("K#validation.started#{:020}", 1);
    let feed = format!("F#{:020}", 4);
    let expected: Vec<(String, String)> = [
        ("Update", "D#d-1"),
        ("Update", "H"),
        ("ConditionCheck", "WH"),
        ("Put", marker.as_str()),
        ("Put", entry.as_str()),
        ("Put", feed.as_str()),
        ("Put", once.as_str()),
    ]
    .iter()
    .map(|(v, k)| (v.to_string(), k.to_string()))
    .collect();
    assert_eq!(written(&write), expected, "the design change, its entry and its feed entry: {write}");
    let items = write["TransactItems"].as_array().unwrap();
    assert_eq!(items[0]["Update"]["ConditionExpression"], "#seq = :v0 AND #revision = :v1");
    assert_eq!(items[1]["Update"]["ConditionExpression"], "#seq = :last");
    assert_eq!(items[1]["Update"]["ExpressionAttributeValues"][":last"], serde_json::json!({"N": "3"}));
    for put in &items[3..] {
        assert_eq!(put["Put"]["ConditionExpression"], "attribute_not_exists(#pk)", "{put}");
    }
}

#[tokio::test]
async fn an_event_whose_entry_is_in_the_feed_and_whose_write_is_applied_sends_nothing_after_the_read() {
    let (t, d) = ids();
    let marker = r#"{"pk":{"S":"T#acme#D#d-1"},"sk":{"S":"K#design.submitted#00000000000000000001"},"seq":{"N":"1"}}"#;
    let once =
        format!(r#"{{"pk":{{"S":"T#acme#F"}},"sk":{{"S":"U#d-1#design.submitted#{:020}"}},"seq":{{"N":"1"}}}}"#, 1);
    let (store, replay) = store(vec![feed_read(&[HELD_DESIGN, marker, &once, &head(1)])]);
    let submitted = Change::Submitted { name: None };
    let e = entry(EventKind::DesignSubmitted, 1);
    assert_eq!(store.apply_and_append(false, &t, &d, &e, &submitted).await.unwrap(), Applied::Duplicate);
    assert_eq!(replay.actual_requests().count(), 1, "the read only");
}

#[tokio::test]
async fn a_duplicate_whose_feed_entry_is_missing_appends_it_alone() {
    let (t, d) = ids();
    let marker = r#"{"pk":{"S":"T#acme#D#d-1"},"sk":{"S":"K#design.submitted#00000000000000000001"},"seq":{"N":"1"}}"#;
    let (store, replay) = store(vec![feed_read(&[HELD_DESIGN, marker]), answer(200, "{}".into())]);
    let e = entry(EventKind::DesignSubmitted, 1);
    let applied = store.apply_and_append(false, &t, &d, &e, &Change::Submitted { name: None }).await;
    assert_eq!(applied.unwrap(), Applied::Duplicate);
    let sent: Vec<_> = replay.actual_requests().collect();
    let write = written(&body(sent[1]));
    let verbs: Vec<&str> = write.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        verbs,
        ["Put", "ConditionCheck", "Put", "Put"],
        "the head, the webhooks' check, entry and once: {write:?}"
    );
    assert_eq!(write[0].1, "H", "the tenant's first entry creates its head");
}

#[tokio::test]
async fn a_submission_is_written_unread_once_its_tenants_feed_head_is_known() {
    let (t, _) = ids();
    let (store, replay) = store(vec![feed_read(&[]), answer(200, "{}".into()), answer(200, "{}".into())]);
    let submitted = Change::Submitted { name: Some("blinky".into()) };
    for d in ["d-1", "d-2"] {
        let d = DesignId::parse(d).unwrap();
        let e = entry(EventKind::DesignSubmitted, 1);
        assert_eq!(store.apply_and_append(false, &t, &d, &e, &submitted).await.unwrap(), Applied::Applied);
    }
    let sent: Vec<_> = replay.actual_requests().collect();
    let targets: Vec<&str> = sent.iter().map(|r| target(r)).collect();
    assert_eq!(
        targets,
        [
            "DynamoDB_20120810.BatchGetItem",
            "DynamoDB_20120810.TransactWriteItems",
            "DynamoDB_20120810.TransactWriteItems"
        ],
        "the first submission of a tenant reads its feed head; the next one does not"
    );
    let second = body(sent[2]);
    let items = second["TransactItems"].as_array().unwrap();
    assert_eq!(items[0]["Put"]["ConditionExpression"], "attribute_not_exists(#pk)", "the design only if new");
    assert_eq!(items[1]["Update"]["ExpressionAttributeValues"][":last"], serde_json::json!({"N": "1"}));
    assert_eq!(items[1]["Update"]["ExpressionAttributeValues"][":next"], serde_json::json!({"N": "2"}));
}

#[tokio::test]
async fn an_unread_submission_that_assumed_an_old_head_reads_and_takes_the_next_number() {
    let (t, _) = ids();
    let (store, replay) = store(vec![
        feed_read(&[]),
        answer(200, "{}".into()),
        cancelled(7),
        feed_read(&[&head(5)]),
        answer(200, "{}".into()),
    ]);
    let submitted = Change::Submitted { name: None };
    for d in ["d-1", "d-2"] {
        let d = DesignId::parse(d).unwrap();
        let e = entry(EventKind::DesignSubmitted, 1);
        assert_eq!(store.apply_and_append(false, &t, &d, &e, &submitted).await.unwrap(), Applied::Applied);
    }
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 5, "read, write; the refused unread write, read, write");
    let last = body(sent[4]);
    let items = last["TransactItems"].as_array().unwrap();
    assert_eq!(items[1]["Update"]["ExpressionAttributeValues"][":last"], serde_json::json!({"N": "5"}));
    assert!(written(&last).iter().any(|(_, sk)| *sk == format!("F#{:020}", 6)), "{last}");
}

#[tokio::test]
async fn a_batch_of_one_tenants_events_is_one_read_and_one_transaction_that_moves_the_head_once() {
    let (t, _) = ids();
    let (d1, d2) = (DesignId::parse("d-1").unwrap(), DesignId::parse("d-2").unwrap());
    let (store, replay) = store(vec![feed_read(&[]), answer(200, "{}".into())]);
    let (s1, started, s2) = (
        entry(EventKind::DesignSubmitted, 1),
        entry(EventKind::ValidationStarted, 1),
        entry(EventKind::DesignSubmitted, 1),
    );
    let submitted = Change::Submitted { name: None };
    let ops = [
        ApplyOp { replayed: false, tenant: &t, design: &d1, entry: &s1, change: &submitted },
        ApplyOp { replayed: false, tenant: &t, design: &d1, entry: &started, change: &Change::ValidationStarted },
        ApplyOp { replayed: false, tenant: &t, design: &d2, entry: &s2, change: &submitted },
    ];
    let done = store.apply_batch(&ops).await;
    assert!(done.error.is_none(), "{:?}", done.error);
    assert_eq!(done.applied, [Applied::Applied; 3]);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 2, "one read, one write");
    let write = body(sent[1]);
    let keys = written(&write);
    assert_eq!(keys.iter().filter(|(_, sk)| sk == "D#d-1").count(), 1, "each design item once: {keys:?}");
    assert_eq!(keys.iter().filter(|(_, sk)| sk == "H").count(), 1, "the head once: {keys:?}");
    assert_eq!(keys.len(), 2 + 2 + 3 * 4, "two designs, head and check, four items per event: {keys:?}");
    let items = write["TransactItems"].as_array().unwrap();
    let design = &items[0]["Put"]["Item"];
    assert_eq!(
        (&design["status"], &design["seq"]),
        (&serde_json::json!({"S": "validating"}), &serde_json::json!({"N": "2"}))
    );
    assert_eq!(design["usage_bytes"], serde_json::json!({"N": "768"}), "the design and its two entries");
    let head = &items[2]["Put"]["Item"];
    assert_eq!(head["seq"], serde_json::json!({"N": "3"}), "three entries: {write}");
}

#[tokio::test]
async fn a_batch_too_large_for_one_transaction_goes_in_parts_each_conditional_on_the_last() {
    let (t, _) = ids();
    let designs: Vec<DesignId> = (0..25).map(|i| DesignId::parse(format!("d-{i}")).unwrap()).collect();
    let entries: Vec<TimelineEntry> = designs.iter().map(|_| entry(EventKind::DesignSubmitted, 1)).collect();
    let submitted = Change::Submitted { name: None };
    let ops: Vec<ApplyOp<'_>> = designs
        .iter()
        .zip(&entries)
        .map(|(design, entry)| ApplyOp { replayed: false, tenant: &t, design, entry, change: &submitted })
        .collect();
    let (store, replay) = store(vec![feed_read(&[]), answer(200, "{}".into()), answer(200, "{}".into())]);
    let done = store.apply_batch(&ops).await;
    assert!(done.is_complete(ops.len()), "{:?}", done.error);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 3, "one read, two writes");
    let (first, second) = (body(sent[1]), body(sent[2]));
    let (first, second) = (first["TransactItems"].as_array().unwrap(), second["TransactItems"].as_array().unwrap());
    assert!(first.len() <= 100 && second.len() <= 100, "{} and {}", first.len(), second.len());
    assert_eq!(first.len() + second.len(), 25 * 5 + 2 * 2, "each part moves the head and checks the webhooks");
    let moved = |items: &[serde_json::Value]| {
        items.iter().find_map(|i| {
            let head = i.get("Update").filter(|u| u["Key"]["sk"]["S"] == "H")?;
            head["ExpressionAttributeValues"][":last"]["N"].as_str()?.parse::<u64>().ok()
        })
    };
    let first_part = (first.len() - 2) / 5;
    assert_eq!(moved(second), Some(first_part as u64), "the second part starts where the first left the head");
}

#[tokio::test]
async fn a_batch_stops_at_an_event_for_a_design_that_never_materialised_keeping_the_writes_before_it() {
    let (t, _) = ids();
    let (d1, d2) = (DesignId::parse("d-1").unwrap(), DesignId::parse("d-2").unwrap());
    let (store, replay) = store(vec![feed_read(&[]), answer(200, "{}".into())]);
    let (s1, started, s2) = (
        entry(EventKind::DesignSubmitted, 1),
        entry(EventKind::ValidationStarted, 1),
        entry(EventKind::DesignSubmitted, 1),
    );
    let submitted = Change::Submitted { name: None };
    let ops = [
        ApplyOp { replayed: false, tenant: &t, design: &d1, entry: &s1, change: &submitted },
        ApplyOp { replayed: false, tenant: &t, design: &d2, entry: &started, change: &Change::ValidationStarted },
        ApplyOp { replayed: false, tenant: &t, design: &d2, entry: &s2, change: &submitted },
    ];
    let done = store.apply_batch(&ops).await;
    assert_eq!(done.applied, [Applied::Applied]);
    assert!(matches!(done.error, Some(PortError::NotFound)), "{:?}", done.error);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 2, "the read, and the first op's write");
    assert_eq!(written(&body(sent[1])).len(), 1 + 2 + 4, "the first op's writes only");
}

#[tokio::test]
async fn a_design_this_store_wrote_is_written_again_without_a_read() {
    let (t, d) = ids();
    let (store, replay) = store(vec![feed_read(&[]), answer(200, "{}".into()), answer(200, "{}".into())]);
    let e = entry(EventKind::DesignSubmitted, 1);
    let submitted = Change::Submitted { name: None };
    assert_eq!(store.apply_and_append(false, &t, &d, &e, &submitted).await.unwrap(), Applied::Applied);
    let e = entry(EventKind::ValidationStarted, 1);
    assert_eq!(store.apply_and_append(false, &t, &d, &e, &Change::ValidationStarted).await.unwrap(), Applied::Applied);
    let sent: Vec<_> = replay.actual_requests().collect();
    assert_eq!(sent.len(), 3, "read, write, and the second write alone");
    let second = body(sent[2]);
    let items = second["TransactItems"].as_array().unwrap();
    let design = &items[0]["Update"];
    assert_eq!(design["ConditionExpression"], "#seq = :v0 AND #revision = :v1", "on the state it wrote: {second}");
    assert_eq!(
        (&design["ExpressionAttributeValues"][":v0"], &design["ExpressionAttributeValues"][":v1"]),
        (&serde_json::json!({"N": "1"}), &serde_json::json!({"N": "1"}))
    );
    assert_eq!(items[1]["Update"]["ExpressionAttributeValues"][":last"], serde_json::json!({"N": "1"}));
}

#[tokio::test]
async fn after_an_unread_write_guessed_wrong_the_tenants_next_writes_read_first() {
    let (t, d) = ids();
    let (store, replay) = store(vec![
        feed_read(&[]),
        answer(200, "{}".into()),
        cancelled(7),
        feed_read(&[HELD_DESIGN, &head(4)]),
        answer(200, "{}".into()),
        feed_read(&[&head(5)]),
        answer(200, "{}".into()),
    ]);
    let submitted = Change::Submitted { name: None };
    let e = entry(EventKind::DesignSubmitted, 1);
    assert_eq!(store.apply_and_append(false, &t, &d, &e, &submitted).await.unwrap(), Applied::Applied);
    // Another process moved the feed head meanwhile: the unread write is refused.
    let e = entry(EventKind::ValidationStarted, 1);
    assert_eq!(store.apply_and_append(false, &t, &d, &e, &Change::ValidationStarted).await.unwrap(), Applied::Applied);
    let d2 = DesignId::parse("d-2").unwrap();
    let e = entry(EventKind::DesignSubmitted, 1);
    assert_eq!(store.apply_and_append(false, &t, &d2, &e, &submitted).await.unwrap(), Applied::Applied);
    let sent: Vec<_> = replay.actual_requests().collect();
    let targets: Vec<&str> = sent.iter().map(|r| target(r).trim_start_matches("DynamoDB_20120810.")).collect();
    assert_eq!(
        targets,
        [
            "BatchGetItem",
            "TransactWriteItems",
            "TransactWriteItems",
            "BatchGetItem",
            "TransactWriteItems",
            "BatchGetItem",
            "TransactWriteItems"
        ],
        "the refused guess reads again, and the tenant's next write reads first"
    );
}
