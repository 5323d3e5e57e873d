//! What the chaos run's clients were told and what its faults did, for the checker: every
//! request with its answer, every acknowledged revision, batch and webhook, every poison record
//! injected, and the windows during which the platform (or a part every request needs) was down.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request: when it was sent and answered, its status (`None`: no answer at all).
#[derive(Debug, Clone)]
pub struct Request {
    pub tenant: String,
    pub what: &'static str,
    pub sent: Instant,
    pub answered: Instant,
    pub status: Option<u16>,
}

/// A stretch of time during which requests may fail for a reason outside the tenants' control.
#[derive(Debug, Clone)]
pub struct Window {
    pub fault: &'static str,
    pub start: Instant,
    pub end: Option<Instant>,
}

/// A webhook a tenant registered, and whether it was there before the tenant's first design
/// (then every entry of its kinds must reach it).
#[derive(Debug, Clone)]
pub struct Hook {
    pub tenant: String,
    pub id: String,
    pub kinds: Vec<String>,
    pub from_start: bool,
}

#[derive(Debug, Default)]
pub struct Entries {
    pub requests: Vec<Request>,
    /// (tenant, design) → the revisions posted (acknowledged or not), and those acknowledged.
    pub designs: BTreeMap<(String, String), Posted>,
    /// (tenant, batch id, items).
    pub batches: Vec<(String, String, usize)>,
    pub hooks: Vec<Hook>,
    /// Markers carried by the poison records injected.
    pub poison: Vec<String>,
    pub windows: Vec<Window>,
    /// Refusals a well-behaved client should never get.
    pub unexpected: Vec<String>,
    /// How many times each fault ran.
    pub faults: BTreeMap<&'static str, usize>,
    /// Keyed creations the run's end cut off before they were acknowledged: the checker sends
    /// each again, as their client would.
    pub cut_off: Vec<CutOff>,
}

/// A keyed `POST` that creates a design or a batch, not acknowledged when the run ended.
#[derive(Debug, Clone)]
pub struct CutOff {
    pub tenant: String,
    pub path: String,
    pub body: serde_json::Value,
    pub key: String,
}

#[derive(Debug, Default, Clone)]
pub struct Posted {
    pub attempted: Vec<u64>,
    pub acknowledged: Vec<u64>,
}

/// The run's journal, shared by its tasks.
#[derive(Clone, Default)]
pub struct Journal(pub Arc<Mutex<Entries>>);

impl Journal {
    pub fn request(&self, r: Request) {
        self.0.lock().unwrap().requests.push(r);
    }

    pub fn attempted(&self, tenant: &str, design: &str, revision: u64) {
        let mut e = self.0.lock().unwrap();
        let posted = e.designs.entry((tenant.to_owned(), design.to_owned())).or_default();
        if !posted.attempted.contains(&revision) {
            posted.attempted.push(revision);
        }
    }

    pub fn acknowledged(&self, tenant: &str, design: &str, revision: u64) {
        self.attempted(tenant, design, revision);
        let mut e = self.0.lock().unwrap();
        let posted = e.designs.get_mut(&(tenant.to_owned(), design.to_owned())).unwrap();
        if !posted.acknowledged.contains(&revision) {
            posted.acknowledged.push(revision);
        }
    }

    pub fn unexpected(&self, what: String) {
        self.0.lock().unwrap().unexpected.push(what);
    }

    pub fn batch(&self, tenant: &str, id: &str, items: usize) {
        self.0.lock().unwrap().batches.push((tenant.to_owned(), id.to_owned(), items));
    }

    pub fn cut_off(&self, c: CutOff) {
        self.0.lock().unwrap().cut_off.push(c);
    }

    pub fn hook(&self, hook: Hook) {
        self.0.lock().unwrap().hooks.push(hook);
    }

    pub fn poison(&self, marker: &str) {
        self.0.lock().unwrap().poison.push(marker.to_owned());
    }

    pub fn fault(&self, name: &'static str) {
        *self.0.lock().unwrap().faults.entry(name).or_default() += 1;
    }

    /// Opens a down window; [`Journal::up`] closes it.
    pub fn down(&self, fault: &'static str) -> usize {
        let mut e = self.0.lock().unwrap();
        e.windows.push(Window { fault, start: Instant::now(), end: None });
        e.windows.len() - 1
    }

    pub fn up(&self, window: usize) {
        self.0.lock().unwrap().windows[window].end = Some(Instant::now());
    }

    /// The time covered by at least one window, each closed at `now` if still open.
    pub fn down_time(&self, now: Instant) -> Duration {
        let e = self.0.lock().unwrap();
        let mut spans: Vec<(Instant, Instant)> = e.windows.iter().map(|w| (w.start, w.end.unwrap_or(now))).collect();
        spans.sort();
        let mut total = Duration::ZERO;
        let mut reach: Option<Instant> = None;
        for (s, end) in spans {
            let from = reach.map_or(s, |r| r.max(s));
            if end > from {
                total += end - from;
            }
            reach = Some(reach.map_or(end, |r| r.max(end)));
        }
        total
    }
}
