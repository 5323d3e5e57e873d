//! The tenant's feed over HTTP: `GET /v1/events/stream` resumes after `Last-Event-ID` with no gap
//! and no duplicate across a dropped connection, and `GET /v1/events` pages through the same
//! entries for clients that poll.

use openqq_e2e::{blink_design, Client, Server};
use serde_json::Value;
use std::time::Duration;

/// One server-sent event: its id, kind and data.
struct Sse {
    id: u64,
    kind: String,
    data: Value,
}

/// Reads events from `resp` until `enough` holds for what was read, or `within` passes.
async fn read_events(resp: &mut reqwest::Response, within: Duration, enough: impl Fn(&[Sse]) -> bool) -> Vec<Sse> {
    let deadline = tokio::time::Instant::now() + within;
    let mut text = String::new();
    let mut events = Vec::new();
    while !enough(&events) {
        let Ok(chunk) = tokio::time::timeout_at(deadline, resp.chunk()).await else { return events };
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap().expect("the stream stays open")));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).map(str::to_owned);
            let (Some(id), Some(kind), Some(data)) = (field("id:"), field("event:"), field("data:")) else {
                continue; // a keep-alive comment
            };
            events.push(Sse { id: id.parse().unwrap(), kind, data: serde_json::from_str(&data).unwrap() });
        }
    }
    events
}

async fn open(c: &Client, last_event_id: Option<u64>, after: Option<u64>) -> reqwest::Response {
    let mut url = format!("{}/v1/events/stream", c.base);
    if let Some(a) = after {
        url.push_str(&format!("?after={a}"));
    }
    let mut req = c.http.get(url).bearer_auth(&c.token).timeout(Duration::from_secs(120));
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    resp
}

fn results_ready(events: &[Sse]) -> usize {
    events.iter().filter(|e| e.kind == "results.ready").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_dropped_mid_way_resumes_after_its_last_event_id_with_no_gap_and_no_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let globex = Client::new(&server.url, &server.token("globex"));
    let mut theirs = open(&globex, None, Some(0)).await;
    let mut first = open(&acme, None, Some(0)).await;
    const DESIGNS: usize = 4;
    for i in 0..DESIGNS {
        let (status, _) = acme.post("/v1/designs", &blink_design(&format!("streamed-{i}"))).await.unwrap();
        assert_eq!(status, 202);
    }
    // Drop the connection after a few events, in the middle of the designs' progress.
    let before = read_events(&mut first, Duration::from_secs(30), |e| e.len() >= 3).await;
    assert!(before.len() >= 3, "the first events arrive");
    drop(first);
    let last = before.last().unwrap().id;
    let mut second = open(&acme, Some(last), None).await;
    let after =
        read_events(&mut second, Duration::from_secs(60), |e| results_ready(&before) + results_ready(e) >= DESIGNS)
            .await;
    let ids: Vec<u64> = before.iter().chain(&after).map(|e| e.id).collect();
    let expected: Vec<u64> = (1..=ids.len() as u64).collect();
    assert_eq!(ids, expected, "numbered 1, 2, 3… without gap or duplicate across the reconnect");
    assert_eq!(ids.len(), DESIGNS * 4, "submitted, started, finished and ready for each design");
    for e in before.iter().chain(&after) {
        assert_eq!(e.data["seq"], e.id);
        assert_eq!(e.data["kind"], e.kind.as_str());
    }

    // Polling reads the same entries, page by page.
    let mut polled = Vec::new();
    let mut cursor = 0;
    loop {
        let (status, page) = acme.get(&format!("/v1/events?after={cursor}&limit=5")).await.unwrap();
        assert_eq!(status, 200, "{page}");
        let items = page["items"].as_array().unwrap();
        if items.is_empty() {
            break;
        }
        polled.extend(items.iter().map(|e| e["seq"].as_u64().unwrap()));
        cursor = page["next_after"].as_u64().unwrap();
    }
    assert_eq!(polled, expected);

    let leaked = read_events(&mut theirs, Duration::from_millis(500), |e| !e.is_empty()).await;
    assert!(leaked.is_empty(), "globex's stream carries nothing of acme's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_a_position_starts_at_the_live_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let (_, old) = acme.post("/v1/designs", &blink_design("old")).await.unwrap();
    acme.wait_for(old["design_id"].as_str().unwrap(), Duration::from_secs(20), |d| d["status"] == "ready")
        .await
        .unwrap();
    let mut live = open(&acme, None, None).await;
    let (_, new) = acme.post("/v1/designs", &blink_design("new")).await.unwrap();
    let events = read_events(&mut live, Duration::from_secs(30), |e| results_ready(e) >= 1).await;
    assert_eq!(results_ready(&events), 1, "the new design's result arrives");
    assert!(events.iter().all(|e| e.data["design_id"] == new["design_id"]), "only what came after it opened");
    assert_eq!(events.first().map(|e| e.id), Some(5), "the old design's four events came before");
}

/// Entries past the feed's retention are gone, and a reader resuming before them is told so
/// rather than silently missing them: 410 `feed-cursor-expired` on `GET /v1/events` and on the
/// stream; from the start it reads what is kept. The data dir is prepared with entries two days
/// old (and then recent ones, whose appends sweep the old) before the server starts on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_resuming_past_entries_the_retention_removed_is_answered_410() {
    use openqq_adapters::{Durability, EmbeddedDesignStore};
    use openqq_core::{
        CorrelationId, DesignId, DesignWrites, EventKind, NewFeedEntry, StoreRetention, TenantId, TimelineEntry,
    };
    let dir = tempfile::tempdir().unwrap();
    {
        let keep = Duration::from_secs(86_400);
        let store = EmbeddedDesignStore::open(dir.path(), Durability::Process)
            .unwrap()
            .with_retention(StoreRetention { feed: keep, ..Default::default() });
        let (acme, design) = (TenantId::parse("acme").unwrap(), DesignId::generate());
        for revision in 1..=70 {
            let age = if revision <= 60 { chrono::Duration::days(2) } else { chrono::Duration::zero() };
            let entry = TimelineEntry {
                event_id: uuid::Uuid::now_v7(),
                kind: EventKind::DesignSubmitted,
                revision,
                correlation_id: CorrelationId::parse("corr").unwrap(),
                occurred_at: chrono::Utc::now() - age,
            };
            let new = NewFeedEntry { design_id: &design, entry: &entry, verdict: None, elapsed_ms: None, batch: None };
            store.append_feed(&acme, &new).await.unwrap();
        }
    }
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--feed-retention", "1d"]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));

    let (status, problem) = acme.get("/v1/events?after=10").await.unwrap();
    assert_eq!((status, problem["type"].as_str()), (410, Some("urn:openqq:problem:feed-cursor-expired")), "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("entries 11 to 60"), "{problem}");
    let (status, page) = acme.get("/v1/events?after=0").await.unwrap();
    assert_eq!(status, 200);
    let seqs: Vec<u64> = page["items"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (61..=70).collect::<Vec<_>>(), "from the start: what is kept");
    let (status, _) = acme.get("/v1/events?after=60").await.unwrap();
    assert_eq!(status, 200, "a reader that saw the last entry removed resumes");

    let stream = acme.http.get(format!("{}/v1/events/stream", acme.base)).bearer_auth(&acme.token);
    let stream = stream.header("last-event-id", "10").send().await.unwrap();
    assert_eq!(stream.status().as_u16(), 410, "the stream says so too, before it starts");
}
