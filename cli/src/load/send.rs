//! Sending: each tenant's requests at their scheduled times, open loop, one sample per request,
//! and the progress line on stderr.

use super::plan::Class;
use super::report::{Outcome, Sample};
use anyhow::Result;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// One tenant's part of the run.
pub struct TenantPlan {
    /// Its tenant id.
    pub name: String,
    pub class: Class,
    /// Its bearer token, valid past the end of the run.
    pub token: String,
    /// When each of its requests is due, from the start of the run.
    pub times: Vec<Duration>,
}

/// Counts for the progress line, updated by every request as it is sent and answered.
#[derive(Default)]
struct Progress {
    sent: AtomicUsize,
    answered: AtomicUsize,
    ok: AtomicUsize,
    limited: AtomicUsize,
    server_errors: AtomicUsize,
    failed: AtomicUsize,
}

impl Progress {
    fn line(&self, at: Duration, of: Duration) -> String {
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        let (sent, answered, failed) = (get(&self.sent), get(&self.answered), get(&self.failed));
        format!(
            "load: {:>4.0}s/{:.0}s  sent {sent}  in flight {}  2xx {}  429 {}  5xx {}  timeouts+errors {failed}",
            at.as_secs_f64(),
            of.as_secs_f64(),
            sent - answered - failed,
            get(&self.ok),
            get(&self.limited),
            get(&self.server_errors),
        )
    }

    /// Counts one request's outcome: answered (and its status class) or failed.
    fn record(&self, outcome: &Outcome) {
        let counter = match outcome {
            Outcome::Status(200..=299) => Some(&self.ok),
            Outcome::Status(429) => Some(&self.limited),
            Outcome::Status(500..) => Some(&self.server_errors),
            _ => None,
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let done = if matches!(outcome, Outcome::Status(_)) { &self.answered } else { &self.failed };
        done.fetch_add(1, Ordering::Relaxed);
    }
}

/// What every sending task shares.
#[derive(Clone)]
pub struct Senders {
    http: reqwest::Client,
    target: reqwest::Url,
    samples: UnboundedSender<Sample>,
    progress: Arc<Progress>,
    /// The moment schedule times count from.
    start: Instant,
}

impl Senders {
    pub fn new(http: reqwest::Client, target: reqwest::Url) -> (Self, UnboundedReceiver<Sample>) {
        let (samples, rx) = tokio::sync::mpsc::unbounded_channel();
        let progress = Arc::new(Progress::default());
        let start = Instant::now() + Duration::from_millis(100);
        (Senders { http, target, samples, progress, start }, rx)
    }

    /// Sends one tenant's requests, each at its scheduled time whether or not earlier ones
    /// have been answered (open loop); each answer goes to the samples channel.
    async fn send_schedule(self, tenant: usize, plan: TenantPlan) {
        let class = plan.class;
        for scheduled in plan.times {
            let due = self.start + scheduled;
            tokio::time::sleep_until(due).await;
            let request = self.http.get(self.target.clone()).bearer_auth(&plan.token);
            let (tx, progress) = (self.samples.clone(), self.progress.clone());
            progress.sent.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let outcome = outcome_of(request).await;
                let latency = due.elapsed();
                progress.record(&outcome);
                let _ = tx.send(Sample { class, tenant, scheduled, outcome, latency });
            });
        }
    }
}

/// Sends one request and reads its body: its status, or how it failed.
async fn outcome_of(request: reqwest::RequestBuilder) -> Outcome {
    match request.send().await {
        Ok(resp) => {
            let code = resp.status().as_u16();
            match resp.bytes().await {
                Ok(_) => Outcome::Status(code),
                Err(e) if e.is_timeout() => Outcome::Timeout,
                Err(_) => Outcome::Error,
            }
        }
        Err(e) if e.is_timeout() => Outcome::Timeout,
        Err(_) => Outcome::Error,
    }
}

/// Runs every tenant's schedule with a progress line on stderr, and returns every request's
/// sample and how long the run took (to the last answer or timeout).
pub async fn send_all(
    plans: Vec<TenantPlan>,
    total: usize,
    senders: Senders,
    mut rx: UnboundedReceiver<Sample>,
    duration: Duration,
) -> Result<(Vec<Sample>, Duration)> {
    let (start, progress) = (senders.start, senders.progress.clone());
    let tasks: Vec<_> = plans
        .into_iter()
        .enumerate()
        .map(|(tenant, plan)| tokio::spawn(senders.clone().send_schedule(tenant, plan)))
        .collect();
    drop(senders);

    let tty = std::io::stderr().is_terminal();
    let progress_line = spawn_progress_line(progress.clone(), start, duration, tty);
    for t in tasks {
        t.await?;
    }
    // Every request has a client timeout, so the channel closes once the last one ends.
    let mut samples = Vec::with_capacity(total);
    while let Some(s) = rx.recv().await {
        samples.push(s);
    }
    progress_line.abort();
    let elapsed = start.elapsed();
    eprintln!("{}{}", if tty { "\r" } else { "" }, progress.line(elapsed, duration));
    Ok((samples, elapsed))
}

/// Prints the progress line every second from a second after `start`: in place on a terminal,
/// a line at a time otherwise. Runs until aborted.
fn spawn_progress_line(progress: Arc<Progress>, start: Instant, duration: Duration, tty: bool) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
        loop {
            tick.tick().await;
            let line = progress.line(start.elapsed(), duration);
            if tty {
                eprint!("\r{line}\x1b[K");
            } else {
                eprintln!("{line}");
            }
        }
    })
}
