//! The tenant's feed ([`openqq_core::feed`]) over HTTP: every event applied to its designs, in
//! order, resumable without gap or duplicate.
//!
//! - `GET /v1/events/stream`: server-sent events, one per feed entry (`id:` its number, `event:`
//!   its kind, `data:` the entry as JSON). It starts after the `Last-Event-ID` header (what a
//!   reconnecting `EventSource` sends), else after `?after=N`, else at the live end. It reads the
//!   store, so it carries what any process applied, and it is served wherever the response may
//!   stream (the local runner; API Gateway buffers responses, so on AWS use the polling route).
//!   A tenant may hold [`TenantLimits::streams`](crate::tenant_guard::TenantLimits::streams)
//!   streams open at once (429 past that); the slot goes back when the client disconnects. The
//!   route sits outside the worker pool, so an open stream never holds a worker.
//! - `GET /v1/events?after=N&limit=M`: the same entries as a page, `{items, next_after}`, for
//!   clients that poll (every deployment). `next_after` is the resume token for the next call.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::stream::{self, Stream};
use openqq_core::feed::{self, FeedEntry, MAX_FEED_PAGE};
use openqq_core::TenantId;
use serde::Deserialize;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

/// Entries one store read of the stream takes.
const STREAM_BATCH: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedQuery {
    pub after: Option<u64>,
    pub limit: Option<usize>,
}

fn entry_event(e: &FeedEntry) -> Event {
    Event::default().id(e.seq.to_string()).event(e.kind.as_str()).json_data(e).expect("feed entries serialise")
}

/// Where a stream starts: after `Last-Event-ID`, else `?after=`, else the live end.
async fn start(state: &AppState, tenant: &TenantId, headers: &HeaderMap, q: &FeedQuery) -> Result<u64, Problem> {
    if let Some(v) = headers.get("last-event-id") {
        return v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| Problem::invalid_field("Last-Event-ID", "is not an event id this stream sent"));
    }
    match q.after {
        Some(after) => Ok(after),
        None => state.feed.feed_head(tenant).await.map_err(|e| Problem::from_port(e, "reading the feed")),
    }
}

struct Tail {
    state: AppState,
    tenant: TenantId,
    after: u64,
    ready: VecDeque<FeedEntry>,
    poll: Duration,
}

impl Tail {
    /// The next entry, waiting for one to be applied. A failing store read is retried after the
    /// poll interval (logged); the position is never skipped.
    async fn next(&mut self) -> FeedEntry {
        loop {
            if let Some(e) = self.ready.pop_front() {
                self.after = e.seq;
                return e;
            }
            match self.state.feed.read_feed(&self.tenant, self.after, STREAM_BATCH).await {
                Ok(batch) if !batch.is_empty() => self.ready.extend(batch),
                Ok(_) => tokio::time::sleep(self.poll).await,
                Err(e) => {
                    tracing::warn!(error = %e, "Reading the feed for a stream failed; retrying.");
                    tokio::time::sleep(self.poll * 4).await;
                }
            }
        }
    }
}

pub async fn live(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    headers: HeaderMap,
    q: Result<Query<FeedQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let q = crate::designs::query(q)?;
    let after = start(&state, &tenant, &headers, &q).await?;
    let first = state.feed.read_feed(&tenant, after, 1).await.map_err(|e| Problem::from_port(e, "reading the feed"))?;
    feed::resumable(after, first.first().map(|e| e.seq)).map_err(|first| cursor_expired(after, first))?;
    let slot = state.tenants.open_stream(&tenant)?;
    let poll = state.feed_poll;
    let tail = Tail { state, tenant, after, ready: VecDeque::new(), poll };
    // The slot lives in the stream's state: dropped, and given back, when the stream is.
    let events = stream::unfold((tail, slot), |(mut tail, slot)| async move {
        let entry = tail.next().await;
        Some((Ok(entry_event(&entry)), (tail, slot)))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

pub async fn page(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    q: Result<Query<FeedQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, Problem> {
    let q = crate::designs::query(q)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_FEED_PAGE).contains(&limit) {
        return Err(Problem::invalid_field("limit", format!("must be between 1 and {MAX_FEED_PAGE}")));
    }
    let after = q.after.unwrap_or(0);
    let items =
        state.feed.read_feed(&tenant, after, limit).await.map_err(|e| Problem::from_port(e, "reading the feed"))?;
    feed::resumable(after, items.first().map(|e| e.seq)).map_err(|first| cursor_expired(after, first))?;
    let next_after = items.last().map_or(after, |e| e.seq);
    Ok((StatusCode::OK, Json(serde_json::json!({ "items": items, "next_after": next_after }))).into_response())
}

/// 410 `feed-cursor-expired`: the entries after `after` up to `first` were removed by the feed's
/// retention, so resuming there would miss them silently.
fn cursor_expired(after: u64, first: u64) -> Problem {
    Problem::new(
        StatusCode::GONE,
        "feed-cursor-expired",
        "The feed no longer holds what comes after this position",
        format!(
            "entries {} to {} are past the feed's retention; read the designs again (GET /v1/designs) and \
             resume with after={}",
            after + 1,
            first - 1,
            first - 1
        ),
    )
    .with_field("after")
}
