//! The bounded pool in front of a slow handler: work beyond workers + queue is refused at once
//! with a 503 problem document and `Retry-After`, and everything accepted finishes with 200.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::routing::get;
use axum::Router;
use openqq_api::pool::{self, Pool};
use openqq_api::PoolConfig;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const HANDLER_TAKES: Duration = Duration::from_millis(300);

fn slow_app(workers: usize, queue: usize) -> Router {
    let cfg = PoolConfig { workers, queue, ..PoolConfig::default() };
    Router::new()
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(HANDLER_TAKES).await;
                "done"
            }),
        )
        .layer(axum::middleware::from_fn_with_state(Pool::new(cfg), pool::layer))
}

struct Outcome {
    status: StatusCode,
    content_type: Option<String>,
    retry_after: Option<String>,
    took: Duration,
}

/// Sends `n` requests at once and waits for all of them.
async fn burst(app: Router, n: usize) -> Vec<Outcome> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let resp = app.oneshot(Request::get("/slow").body(Body::empty()).unwrap()).await.unwrap();
                let header =
                    |name| resp.headers().get(name).map(|v: &header::HeaderValue| v.to_str().unwrap().to_owned());
                Outcome {
                    status: resp.status(),
                    content_type: header(header::CONTENT_TYPE),
                    retry_after: header(header::RETRY_AFTER),
                    took: started.elapsed(),
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_workers_and_queue_are_refused_at_once_and_the_rest_finish() {
    let (workers, queue, sent) = (2, 3, 12);
    let outcomes = burst(slow_app(workers, queue), sent).await;

    let ok: Vec<_> = outcomes.iter().filter(|o| o.status == StatusCode::OK).collect();
    let refused: Vec<_> = outcomes.iter().filter(|o| o.status == StatusCode::SERVICE_UNAVAILABLE).collect();
    assert_eq!(ok.len(), workers + queue, "every accepted request finishes with 200");
    assert_eq!(refused.len(), sent - workers - queue, "the rest are refused");
    for r in &refused {
        assert_eq!(r.content_type.as_deref(), Some("application/problem+json"));
        assert_eq!(r.retry_after.as_deref(), Some("1"));
        assert!(r.took < HANDLER_TAKES / 2, "a refusal waits for no worker (took {:?})", r.took);
    }
    // Five accepted requests on two workers run in three rounds: the queued ones really waited.
    let slowest = ok.iter().map(|o| o.took).max().unwrap();
    assert!(slowest >= HANDLER_TAKES * 3, "queued requests waited for a worker (slowest {slowest:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_big_enough_for_the_burst_refuses_nothing() {
    let outcomes = burst(slow_app(2, 100), 12).await;
    assert!(outcomes.iter().all(|o| o.status == StatusCode::OK));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_downstream_serves_its_capacity_at_once_and_queues_the_rest() {
    use openqq_api::downstream::{self, Downstream, DownstreamConfig};
    let latency = Duration::from_millis(200);
    let app = Router::new().route("/slow", get(|| async { "done" })).layer(axum::middleware::from_fn_with_state(
        Downstream::new(DownstreamConfig { latency, capacity: Some(2) }),
        downstream::layer,
    ));
    let outcomes = burst(app, 5).await;
    assert!(outcomes.iter().all(|o| o.status == StatusCode::OK));
    let mut took: Vec<_> = outcomes.iter().map(|o| o.took).collect();
    took.sort();
    // Two at a time: 200 ms, 200 ms, 400 ms, 400 ms, 600 ms.
    assert!(took[1] < latency * 2 - latency / 4 && took[4] >= latency * 3, "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_waits_past_the_queue_timeout_is_refused_with_503() {
    let cfg = PoolConfig { workers: 1, queue: 10, queue_timeout: HANDLER_TAKES / 3, ..PoolConfig::default() };
    let app = Router::new()
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(HANDLER_TAKES).await;
                "done"
            }),
        )
        .layer(axum::middleware::from_fn_with_state(Pool::new(cfg), pool::layer));
    let outcomes = burst(app, 2).await;
    let mut statuses: Vec<_> = outcomes.iter().map(|o| o.status).collect();
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE], "the waiter gave up at its deadline");
    let refused = outcomes.iter().find(|o| o.status == StatusCode::SERVICE_UNAVAILABLE).unwrap();
    assert!(refused.took < HANDLER_TAKES, "refused at the queue deadline, not when a worker came free");
    assert_eq!(refused.retry_after.as_deref(), Some("1"));
}
