//! The store writes of a consumer batch, applied together.
//!
//! A record handler asks for its store writes as [`Write`]s instead of making them. The
//! [`BatchWriter`] of a batch gathers the writes its lanes ask for at about the same time and hands
//! them to the store in one [`DesignWrites::apply_batch`] (one SQLite transaction on the embedded
//! store), rather than one call per write.
//!
//! Gathering works like a group commit: a lane that asks while no call is in flight lets the other lanes of
//! the batch queue their writes first (they run on the same task, so they all get there before it
//! goes on), then makes one call for all of them; a lane that asks while a call is in flight goes
//! in the next one. Every lane plans its records' first writes at once, so a batch's first writes
//! are one call; writes that follow slow work (a validation) go whenever their lane gets there, so
//! a quick lane never waits for a slow one's work, only for the call in flight.

use futures_util::FutureExt;
use openqq_core::event::Origin;
use openqq_core::ports::{ApplyOp, BatchApplied};
use openqq_core::{Change, DesignId, DesignWrites, PortError, TenantId, TimelineEntry};
use std::panic::AssertUnwindSafe;
use tokio::sync::oneshot;

/// A store write a record asks for: what [`openqq_core::ports::apply_for`] takes, owned, so that
/// the consumer can apply a batch's writes together.
#[derive(Debug, Clone)]
pub struct Write {
    /// The record replays a dead letter (its envelope's `replay_of`): the write follows the replay
    /// rule ([`openqq_core::revision::plan_replay`]).
    pub replayed: bool,
    pub tenant: TenantId,
    pub design: DesignId,
    pub entry: TimelineEntry,
    pub change: Change,
}

impl Write {
    /// `entry` and `change` for the design `cause` names.
    pub fn new(cause: &Origin, replayed: bool, entry: TimelineEntry, change: Change) -> Self {
        Self { replayed, tenant: cause.tenant_id.clone(), design: cause.design_id.clone(), entry, change }
    }

    /// The write as the store's batch takes it.
    pub fn op(&self) -> ApplyOp<'_> {
        ApplyOp {
            replayed: self.replayed,
            tenant: &self.tenant,
            design: &self.design,
            entry: &self.entry,
            change: &self.change,
        }
    }
}

/// One lane's writes, waiting for the call that applies them.
struct Request {
    writes: Vec<Write>,
    reply: oneshot::Sender<(Vec<Write>, BatchApplied)>,
}

/// Applies the writes the lanes of one batch ask for, in as few store calls as their timing
/// allows (see the module documentation).
pub(crate) struct BatchWriter<'s> {
    store: &'s dyn DesignWrites,
    queue: std::sync::Mutex<Vec<Request>>,
    /// Held by the lane making the call in flight.
    turn: tokio::sync::Mutex<()>,
}

impl<'s> BatchWriter<'s> {
    pub(crate) fn new(store: &'s dyn DesignWrites) -> Self {
        Self { store, queue: std::sync::Mutex::new(Vec::new()), turn: tokio::sync::Mutex::new(()) }
    }

    /// Applies one lane's `writes`, in order, together with what other lanes queued meanwhile.
    /// Returns the writes and what became of them: the outcomes of those applied (a prefix) and
    /// the error of the write that failed, if one did; the writes after it were not attempted.
    /// Another lane's failure never stops this lane's writes.
    pub(crate) async fn apply(&self, writes: Vec<Write>) -> (Vec<Write>, BatchApplied) {
        if writes.is_empty() {
            return (writes, BatchApplied::default());
        }
        let (reply, answer) = oneshot::channel();
        self.queue.lock().expect("the queue is never poisoned").push(Request { writes, reply });
        {
            let _turn = self.turn.lock().await;
            // Let the lanes that are ready to run now queue their writes before this call.
            tokio::task::yield_now().await;
            let requests = std::mem::take(&mut *self.queue.lock().expect("the queue is never poisoned"));
            if !requests.is_empty() {
                self.flush(requests).await;
            }
        }
        // The call that took this request answered it before releasing the turn. Lanes share the
        // batch's task, so none is dropped while another still waits.
        answer.await.expect("a queued request is answered by the call that took it")
    }

    /// Applies the requests' writes, one request after another, in one store call; when a write
    /// fails, its request is answered with that error and the other requests' writes not yet
    /// attempted go in the next call.
    async fn flush(&self, requests: Vec<Request>) {
        let mut results: Vec<BatchApplied> = requests.iter().map(|_| BatchApplied::default()).collect();
        let mut stopped = vec![false; requests.len()];
        loop {
            let order: Vec<(usize, usize)> = requests
                .iter()
                .enumerate()
                .filter(|(r, _)| !stopped[*r])
                .flat_map(|(r, req)| (results[r].applied.len()..req.writes.len()).map(move |k| (r, k)))
                .collect();
            if order.is_empty() {
                break;
            }
            let ops: Vec<ApplyOp<'_>> = order.iter().map(|&(r, k)| requests[r].writes[k].op()).collect();
            let done = apply_caught(self.store, &ops).await;
            let reached = done.applied.len().min(order.len());
            for (&(r, _), applied) in order.iter().zip(done.applied) {
                results[r].applied.push(applied);
            }
            let error = match done.error {
                Some(e) => e,
                None if reached == order.len() => break,
                None => PortError::backend_message("the store applied fewer writes than it was given", true),
            };
            let Some(&(r, _)) = order.get(reached) else { break };
            results[r].error = Some(error);
            stopped[r] = true;
        }
        for (req, result) in requests.into_iter().zip(results) {
            // A lane that is gone no longer needs its answer.
            let _ = req.reply.send((req.writes, result));
        }
    }
}

/// [`DesignWrites::apply_batch`], with a panic in the store (a bug) turned into a permanent error
/// of the first write, as a panic in a handler's own store call was: its record is dead-lettered.
async fn apply_caught(store: &dyn DesignWrites, ops: &[ApplyOp<'_>]) -> BatchApplied {
    match AssertUnwindSafe(store.apply_batch(ops)).catch_unwind().await {
        Ok(done) => done,
        Err(panic) => {
            let message = crate::dead_letter::panic_message(panic.as_ref());
            let error = PortError::backend_message(format!("bug: the design store panicked: {message}"), false);
            BatchApplied { applied: Vec::new(), error: Some(error) }
        }
    }
}
