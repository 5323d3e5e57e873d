//! `GET /v1/stream`: the tenant's live results as server-sent events, for the UI.
//!
//! Each `results.ready` notification of the caller's tenant becomes one event (`event:
//! results.ready`, `id:` the event id, `data:` the notification as JSON). Other tenants'
//! notifications never leave the server. A client that falls too far behind gets one `lagged`
//! event with the number it missed, then the stream goes on; it can catch up from
//! `GET /v1/designs`. Only the local runner has a live feed; on Lambda the route answers 404.
//!
//! A tenant may hold [`TenantLimits::streams`](crate::tenant_guard::TenantLimits::streams) streams
//! open at once (429 past that); the slot goes back when the client disconnects. The route sits
//! outside the worker pool, so an open stream never holds a worker.

use crate::problem::Problem;
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Extension;
use futures_util::stream::{self, Stream};
use openqq_core::{Notification, TenantId};
use std::convert::Infallible;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

/// The next event for `tenant` from the feed, or `None` once the feed is closed.
async fn next_for(tenant: &TenantId, rx: &mut Receiver<Notification>) -> Option<Event> {
    loop {
        match rx.recv().await {
            Ok(n) if &n.tenant_id == tenant => {
                let event = Event::default().event("results.ready").id(n.event_id.to_string());
                return Some(event.json_data(&n).expect("notifications serialise"));
            }
            Ok(_) => continue,
            Err(RecvError::Lagged(missed)) => return Some(Event::default().event("lagged").data(missed.to_string())),
            Err(RecvError::Closed) => return None,
        }
    }
}

pub async fn live(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let feed = state.live.as_ref().ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            "this deployment has no live stream; poll GET /v1/designs",
        )
    })?;
    let slot = state.tenants.open_stream(&tenant)?;
    // The slot lives in the stream's state: dropped, and given back, when the stream is.
    let events = stream::unfold((tenant, feed.subscribe(), slot), |(tenant, mut rx, slot)| async move {
        let event = next_for(&tenant, &mut rx).await?;
        Some((Ok(event), (tenant, rx, slot)))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
