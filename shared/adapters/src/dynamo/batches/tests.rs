//! The batch role's requests as DynamoDB receives them (recorded answers: conditions, counters,
//! what a refusal or throttling leads to), and, on a local server when
//! `OPENQQ_TEST_DYNAMODB_ENDPOINT` is set, the overlaps the conformance suite cannot stage.

use super::create::{item_row, put_items, transactions};
use super::*;
use crate::dynamo::table::n;
use crate::dynamo::tests::{answer, replaying};
use aws_sdk_dynamodb::config::http::HttpRequest;
use aws_smithy_http_client::test_util::ReplayEvent;
use openqq_core::batch::BatchItem;
use serde_json::{json, Value};

const BATCH: &str = "0190f3c4-5d6e-7f80-9a1b-2c3d4e5f6071";

fn ids() -> (TenantId, BatchId) {
    (TenantId::parse("acme").unwrap(), BatchId::parse(BATCH).unwrap())
}

/// A store answering `events` in order, and what it sent: each request's operation and body.
fn store(events: Vec<ReplayEvent>) -> (DynamoDesignStore, impl Fn() -> Vec<(String, Value)>) {
    let (client, replay) = replaying(events);
    let sent = move || {
        replay
            .actual_requests()
            .map(|r: &HttpRequest| {
                let target = r.headers().get("x-amz-target").unwrap_or_default();
                let op = target.rsplit('.').next().unwrap_or_default().to_owned();
                (op, serde_json::from_slice(r.body().bytes().unwrap()).unwrap())
            })
            .collect()
    };
    (DynamoDesignStore::new(client, "openqq").unwrap(), sent)
}

/// An item row as stored, JSON.
fn item_json(index: u32, status: &str) -> Value {
    json!({
        "pk": {"S": format!("T#acme#BATCH#{BATCH}")}, "sk": {"S": item_sk(index)},
        "index": {"N": index.to_string()}, "status": {"S": status},
        "design_id": {"S": format!("d-{index}")}, "revision": {"N": "1"}
    })
}

fn query_answer(items: &[Value]) -> ReplayEvent {
    answer(200, json!({"Items": items, "Count": items.len(), "ScannedCount": items.len()}).to_string())
}

fn cancelled(codes: &[&str]) -> ReplayEvent {
    let reasons: Vec<Value> = codes.iter().map(|c| json!({"Code": c})).collect();
    let body = json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "message": "recorded cancellation", "CancellationReasons": reasons
    });
    answer(400, body.to_string())
}

#[test]
fn item_keys_sort_in_index_order_and_an_empty_range_reads_nothing() {
    assert!(item_sk(9) < item_sk(10) && item_sk(10) < item_sk(u32::MAX));
    assert_eq!(index_range(ITEM_PREFIX, &(3..5)), Some(("I#0000000003".to_owned(), "I#0000000004".to_owned())));
    assert_eq!(index_range(ITEM_PREFIX, &(5..5)), None);
    assert_eq!(index_range(SUBMISSION_PREFIX, &(0..1)), Some(("P#0000000000".to_owned(), "P#0000000000".to_owned())));
}

#[test]
fn each_clause_of_a_row_update_has_placeholders_of_its_own() {
    let (update, condition, names, values) = RowUpdate::default()
        .add("queued", -2)
        .add("validating", 2)
        .add("pass", 0)
        .set(ENDED, n(3))
        .when(ENDED, n(2))
        .when_absent("finished_at")
        .expressions();
    assert_eq!(update, "SET #a0 = #a0 - :a0, #a1 = #a1 + :a1, #a2 = :a2");
    assert_eq!(condition.as_deref(), Some("#a3 = :a3 AND attribute_not_exists(#a4)"));
    assert_eq!((names.len(), values.len()), (5, 4), "a counter moved by 0 is left out: {names:?}");
    assert_eq!(names["#a2"], ENDED);
}

#[tokio::test]
async fn creating_a_batch_that_exists_reads_its_row_and_writes_nothing() {
    let (t, id) = ids();
    let row = json!({"Item": {"pk": {"S": "T#acme"}, "sk": {"S": batch_sk(&id)}}});
    let (store, sent) = store(vec![answer(200, row.to_string())]);
    let batch = NewBatch { id, name: "n".into(), max_failed: None, created_at: Utc::now() };
    assert!(!store.create_batch(&t, &batch, &[]).await.unwrap());
    assert_eq!(sent().iter().map(|(op, _)| op.as_str()).collect::<Vec<_>>(), ["GetItem"]);
}

fn new_item(index: u32, rejected: bool) -> NewItem {
    NewItem {
        item: BatchItem {
            index,
            custom_id: Some(format!("c{index}")),
            design_id: (!rejected).then(|| DesignId::parse(format!("d-{index}")).unwrap()),
            revision: (!rejected).then_some(1),
            status: if rejected { ItemStatus::Rejected } else { ItemStatus::Queued },
            verdict: None,
            reason: rejected.then(|| "no".to_owned()),
        },
        submission: (!rejected).then(|| format!("{{\"item\":{index}}}")),
    }
}

#[tokio::test]
async fn a_create_writes_its_submissions_then_its_items_where_none_is_then_the_batch_row() {
    let (t, id) = ids();
    let unprocessed = json!({"UnprocessedItems": {"openqq": [{"PutRequest": {"Item": {
        "pk": {"S": "x"}, "sk": {"S": "P#0000000001"}}}}]}});
    let (store, sent) = store(vec![
        answer(200, "{}".into()),
        answer(200, unprocessed.to_string()),
        answer(200, json!({"UnprocessedItems": {}}).to_string()),
        answer(200, "{}".into()),
        answer(200, "{}".into()),
    ]);
    let batch = NewBatch { id, name: "n".into(), max_failed: Some(MaxFailed::Count(1)), created_at: Utc::now() };
    let items = [new_item(0, false), new_item(1, false), new_item(2, true)];
    assert!(store.create_batch(&t, &batch, &items).await.unwrap());
    let sent = sent();
    let ops: Vec<&str> = sent.iter().map(|(op, _)| op.as_str()).collect();
    assert_eq!(ops, ["GetItem", "BatchWriteItem", "BatchWriteItem", "TransactWriteItems", "PutItem"]);
    assert_eq!(sent[1].1["RequestItems"]["openqq"].as_array().unwrap().len(), 2, "a submission per queued item");
    assert_eq!(sent[2].1["RequestItems"]["openqq"].as_array().unwrap().len(), 1, "the unprocessed one again");
    let puts = sent[3].1["TransactItems"].as_array().unwrap();
    assert_eq!(puts.len(), 3);
    for put in puts {
        assert_eq!(put["Put"]["ConditionExpression"], "attribute_not_exists(#pk)", "{put}");
    }
    let row = &sent[4].1;
    assert_eq!(row["ConditionExpression"], "attribute_not_exists(#pk)");
    let counts: Vec<&Value> =
        ["queued", "validating", "rejected", "ended"].iter().map(|c| &row["Item"][c]["N"]).collect();
    assert_eq!(counts, [&json!("2"), &json!("0"), &json!("1"), &json!("0")]);
    assert_eq!(row["Item"]["max_failed"]["S"], "1");
    assert!(row["Item"].get("finished_at").is_none(), "items are open");
}

#[tokio::test]
async fn a_release_moves_each_queued_item_in_one_transaction_with_the_counters_it_changes() {
    let (t, id) = ids();
    let submissions = [0, 1].map(|i| {
        json!({"pk": {"S": "x"}, "sk": {"S": submission_sk(i)}, "index": {"N": i.to_string()},
               "submission": {"S": format!("{{\"item\":{i}}}")}})
    });
    let (store, sent) = store(vec![
        query_answer(&[item_json(0, "queued"), item_json(1, "validating"), item_json(2, "ready")]),
        answer(200, "{}".into()),
        query_answer(&[item_json(0, "validating"), item_json(1, "validating"), item_json(2, "ready")]),
        query_answer(&submissions),
    ]);
    let released = store.release_items(&t, &id, 0..3).await.unwrap();
    assert_eq!(
        released.iter().map(|r| (r.index, r.submission.as_str())).collect::<Vec<_>>(),
        [(0, "{\"item\":0}"), (1, "{\"item\":1}")]
    );
    let sent = sent();
    let ops: Vec<&str> = sent.iter().map(|(op, _)| op.as_str()).collect();
    assert_eq!(ops, ["Query", "TransactWriteItems", "Query", "Query"]);
    let actions = sent[1].1["TransactItems"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "the batch row and the one queued item: {actions:?}");
    let batch = &actions[0]["Update"];
    assert_eq!(batch["Key"]["sk"]["S"], batch_sk(&id));
    assert_eq!(batch["UpdateExpression"], "SET #a0 = #a0 - :a0, #a1 = #a1 + :a1, #a2 = if_not_exists(#a2, :a2)");
    assert_eq!(
        (&batch["ExpressionAttributeNames"]["#a0"], &batch["ExpressionAttributeValues"][":a0"]),
        (&json!("queued"), &json!({"N": "1"}))
    );
    assert_eq!(batch["ConditionExpression"], "#a3 = :a3", "only while the batch runs");
    assert_eq!(batch["ExpressionAttributeValues"][":a3"], json!({"S": "running"}));
    let item = &actions[1]["Update"];
    assert_eq!(item["Key"]["sk"]["S"], item_sk(0));
    assert_eq!(item["ConditionExpression"], "#a1 = :a1");
    assert_eq!(item["ExpressionAttributeValues"][":a1"], json!({"S": "queued"}));
}

#[tokio::test]
async fn a_release_the_stopped_batch_refuses_reads_again_and_releases_nothing() {
    let (t, id) = ids();
    let (store, sent) = store(vec![
        query_answer(&[item_json(0, "queued")]),
        cancelled(&["ConditionalCheckFailed", "None"]),
        query_answer(&[item_json(0, "queued")]),
    ]);
    assert!(store.release_items(&t, &id, 0..1).await.unwrap().is_empty());
    assert_eq!(sent().len(), 3, "no second try, no submission read");
}

#[tokio::test]
async fn a_throttled_release_is_throttled_and_never_taken_for_a_lost_race() {
    let (t, id) = ids();
    let (store, sent) =
        store(vec![query_answer(&[item_json(0, "queued")]), cancelled(&["None", "ProvisionedThroughputExceeded"])]);
    let err = store.release_items(&t, &id, 0..1).await.unwrap_err();
    assert!(matches!(err, PortError::Throttled { .. }) && err.is_retriable(), "{err:?}");
    assert_eq!(sent().len(), 2);
}

/// One stored row that answers both of an end's reads (they are sent at once, in either order):
/// the item's attributes and the batch row's do not share a name.
fn item_and_batch(ended: u32) -> ReplayEvent {
    let mut row = item_json(4, "validating");
    for (name, value) in [("queued", 0), ("validating", 2), ("ready", 3), ("failed", 0), ("rejected", 0)] {
        row[name] = json!({"N": value.to_string()});
    }
    for (name, value) in [("cancelled", 0), ("pass", 3), ("fail", 0), ("ended", ended)] {
        row[name] = json!({"N": value.to_string()});
    }
    row["batch_id"] = json!({"S": BATCH});
    row["name"] = json!({"S": "n"});
    row["state"] = json!({"S": "running"});
    row["created_at"] = json!({"S": "2025-01-01T00:00:00Z"});
    answer(200, json!({ "Item": row }).to_string())
}

#[tokio::test]
async fn an_end_that_loses_the_race_for_its_ordinal_reads_again_and_takes_the_next() {
    let (t, id) = ids();
    let (store, sent) = store(vec![
        item_and_batch(3),
        item_and_batch(3),
        cancelled(&["None", "ConditionalCheckFailed"]),
        item_and_batch(4),
        item_and_batch(4),
        answer(200, "{}".into()),
        item_and_batch(5),
    ]);
    let ended = store.end_item(&t, &id, 4, ItemStatus::Ready, Some(Verdict::Pass)).await.unwrap().unwrap();
    assert_eq!((ended.ordinal, ended.fresh), (Some(5), true));
    let sent = sent();
    assert_eq!(sent.len(), 7);
    let actions = sent[5].1["TransactItems"].as_array().unwrap();
    let (item, batch) = (&actions[0]["Update"], &actions[1]["Update"]);
    assert_eq!(item["ExpressionAttributeValues"][":a1"], json!({"N": "5"}), "the ordinal: {item}");
    assert_eq!(batch["ExpressionAttributeValues"][":a0"], json!({"N": "5"}), "ended, set to it: {batch}");
    let condition = batch["ConditionExpression"].as_str().unwrap();
    let value = condition.rsplit(' ').next().unwrap();
    assert_eq!(batch["ExpressionAttributeValues"][value], json!({"N": "4"}), "on ended as read: {batch}");
}

#[tokio::test]
async fn an_item_cannot_end_as_anything_but_ready_or_failed() {
    let (t, id) = ids();
    let (store, sent) = store(vec![]);
    let err = store.end_item(&t, &id, 0, ItemStatus::Cancelled, None).await.unwrap_err();
    assert!(matches!(err, PortError::Invalid { .. }), "{err:?}");
    assert!(sent().is_empty());
}

/// A store on a fresh table of the local server, or `None` when none is set.
async fn local_store() -> Option<DynamoDesignStore> {
    let endpoint = std::env::var("OPENQQ_TEST_DYNAMODB_ENDPOINT").ok()?;
    let client = crate::conformance::dynamodb_client(&endpoint);
    let store = DynamoDesignStore::new(client, crate::conformance::unique("openqq-batches")).unwrap();
    store.create_table_if_missing().await.unwrap();
    Some(store)
}

#[tokio::test]
async fn a_late_create_of_the_same_batch_puts_no_released_item_back_to_queued() {
    let Some(store) = local_store().await else { return };
    let (t, id) = (TenantId::parse("late").unwrap(), BatchId::generate());
    let batch = NewBatch { id: id.clone(), name: "late".into(), max_failed: None, created_at: Utc::now() };
    let items = [new_item(0, false), new_item(1, false), new_item(2, false)];
    assert!(store.create_batch(&t, &batch, &items).await.unwrap());
    store.release_items(&t, &id, 0..2).await.unwrap();
    // A create that found no batch row before the first one wrote it puts the items afterwards.
    let pk = items_pk(&t, &id);
    put_items(store.client.clone(), store.table.clone(), items.iter().map(|i| item_row(&pk, &i.item)).collect())
        .await
        .unwrap();
    let page = store.batch_items(&t, &id, Some(ItemStatus::Validating), None, 10).await.unwrap().unwrap();
    assert_eq!(page.items.iter().map(|i| i.index).collect::<Vec<_>>(), [0, 1]);
    let released = store.release_items(&t, &id, 0..3).await.unwrap();
    assert_eq!(released.len(), 3);
    let view = store.batch(&t, &id).await.unwrap().unwrap();
    assert_eq!((view.counts.queued, view.counts.validating), (0, 3), "each item counted once");
}

#[tokio::test]
async fn a_stop_cut_short_is_finished_by_the_next_keeping_its_state_and_reason() {
    let Some(store) = local_store().await else { return };
    let (t, id) = (TenantId::parse("cut").unwrap(), BatchId::generate());
    let batch = NewBatch { id: id.clone(), name: "cut".into(), max_failed: None, created_at: Utc::now() };
    let items: Vec<NewItem> = (0..4).map(|i| new_item(i, false)).collect();
    store.create_batch(&t, &batch, &items).await.unwrap();
    store.release_items(&t, &id, 0..1).await.unwrap();
    // The state written, the queued items not yet cancelled.
    RowUpdate::default()
        .set("state", s("failed"))
        .set("reason", s("too many failed"))
        .request(&store.client, &store.table, key_of(&t, &id))
        .send()
        .await
        .unwrap();
    assert!(store.release_items(&t, &id, 1..4).await.unwrap().is_empty(), "a stopped batch releases nothing");
    let view = store.stop_batch(&t, &id, BatchState::Cancelled, "cancelled").await.unwrap().unwrap();
    assert_eq!(view.counts, Counts { validating: 1, cancelled: 3, ..Counts::default() });
    assert_eq!((view.status, view.reason.as_deref()), (BatchStatus::Failed, Some("too many failed")));
    let last = store.end_item(&t, &id, 0, ItemStatus::Failed, None).await.unwrap().unwrap();
    assert!(last.batch.finished_at.is_some());
}

fn key_of(tenant: &TenantId, id: &BatchId) -> Item {
    crate::dynamo::table::key(tenant_pk(tenant), batch_sk(id))
}

#[test]
fn item_puts_go_a_hundred_to_a_transaction_and_fewer_when_large() {
    let pk = items_pk(&ids().0, &ids().1);
    let small: Vec<Item> = (0..250).map(|i| item_row(&pk, &new_item(i, false).item)).collect();
    assert_eq!(transactions(small).iter().map(Vec::len).collect::<Vec<_>>(), [100, 100, 50]);
    let mut large = new_item(0, true);
    large.item.reason = Some("x".repeat(400 * 1024));
    let large: Vec<Item> = (0..20).map(|i| item_row(&pk, &BatchItem { index: i, ..large.item.clone() })).collect();
    assert!(transactions(large).iter().all(|group| group.len() <= 7), "at most 3 MB of rows each");
}
