//! The metrics of a Lambda function as CloudWatch embedded metric format (EMF) log lines.
//!
//! Nothing scrapes a Lambda function, so [`EmfRecorder`] keeps every counter, gauge and histogram
//! in memory and, at the end of each invocation, [`flush`] prints them to stdout as EMF JSON
//! lines; CloudWatch Logs turns each line into metrics in [`NAMESPACE`]. The names and labels are
//! the Prometheus ones (docs/OBSERVABILITY.md): a label becomes a dimension, its value a
//! top-level member of the line.
//!
//! What a flush writes, per label set:
//! - a counter as its increase since the previous flush (nothing when it did not move), unit `Count`;
//! - a gauge as its current value;
//! - a histogram as `Values`/`Counts` arrays of the samples since the previous flush, rounded to
//!   three significant digits (so one invocation's samples stay a short list); more than
//!   [`MAX_VALUES`] distinct values are split over several lines, which CloudWatch adds up.
//!
//! CloudWatch's limits hold by construction: at most [`MAX_DIMENSIONS`] keys per dimension set,
//! [`MAX_METRICS`] metrics per line, [`MAX_VALUES`] values per array, and units from CloudWatch's
//! set ([`unit_of`]). Besides the full label set, some metrics are also published under smaller
//! dimension sets ([`rollups`]), because a CloudWatch alarm reads one exact dimension set and
//! cannot add up a route's statuses by itself. `tenant` values go through the tenant cap
//! ([`crate::tenant_label`]) like every other `tenant` label.

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The CloudWatch namespace of every metric the platform publishes (the build-info line's too).
pub const NAMESPACE: &str = "OpenQQ";

/// CloudWatch: at most 30 dimension keys in one dimension set.
pub const MAX_DIMENSIONS: usize = 30;

/// CloudWatch: at most 100 metrics in one EMF object.
pub const MAX_METRICS: usize = 100;

/// CloudWatch: at most 100 values in one metric's `Values` array.
pub const MAX_VALUES: usize = 100;

/// CloudWatch: a dimension value is at most 1024 characters.
const MAX_DIMENSION_VALUE: usize = 1024;

/// The CloudWatch unit of a metric, from its name's unit suffix: `Seconds` for `_seconds`, `Bytes`
/// for `_bytes`, `None` for `_info` (a constant 1 carrying labels); everything else counts things.
pub fn unit_of(name: &str) -> &'static str {
    let base = name.strip_suffix("_total").unwrap_or(name);
    if base.ends_with("_seconds") {
        "Seconds"
    } else if base.ends_with("_bytes") {
        "Bytes"
    } else if base.ends_with("_info") {
        "None"
    } else {
        "Count"
    }
}

/// The smaller dimension sets a metric is also published under, besides its full label set: the
/// ones the deployment's dashboard and alarms read (template.yaml). A set naming a label the
/// series lacks is skipped.
pub fn rollups(name: &str) -> &'static [&'static [&'static str]] {
    match name {
        "openqq_http_requests_total" => &[&["route", "status"], &["status"], &[]],
        "openqq_http_request_duration_seconds" => &[&["route"], &[]],
        "openqq_events_total" => &[&["function", "outcome"]],
        "openqq_dead_letters_total" => &[&["function"], &[]],
        "openqq_limiter_decisions_total"
        | "openqq_byte_limiter_decisions_total"
        | "openqq_batch_item_limiter_decisions_total" => &[&["decision"]],
        _ => &[],
    }
}

/// A counter: its running total, and the total at the previous flush (the flush writes the difference).
#[derive(Debug, Default)]
struct CounterCell {
    total: AtomicU64,
    flushed: AtomicU64,
}

impl CounterFn for CounterCell {
    fn increment(&self, value: u64) {
        self.total.fetch_add(value, Ordering::Relaxed);
    }

    fn absolute(&self, value: u64) {
        self.total.fetch_max(value, Ordering::Relaxed);
    }
}

/// A gauge's current value, as `f64` bits.
#[derive(Debug, Default)]
struct GaugeCell(AtomicU64);

impl GaugeCell {
    fn update(&self, f: impl Fn(f64) -> f64) {
        let _ =
            self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some(f(f64::from_bits(bits)).to_bits()));
    }
}

impl GaugeFn for GaugeCell {
    fn increment(&self, value: f64) {
        self.update(|v| v + value);
    }

    fn decrement(&self, value: f64) {
        self.update(|v| v - value);
    }

    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

/// A histogram's samples since the previous flush: rounded value (as `f64` bits) → how many.
#[derive(Debug, Default)]
struct HistogramCell(Mutex<HashMap<u64, u64>>);

impl HistogramFn for HistogramCell {
    fn record(&self, value: f64) {
        // CloudWatch refuses NaN and infinities; a sample it cannot store is dropped here.
        if !value.is_finite() {
            return;
        }
        *self.0.lock().unwrap_or_else(|e| e.into_inner()).entry(round3(value).to_bits()).or_default() += 1;
    }
}

/// `v` to three significant digits: 0.0123456 s is 0.0123 s. Magnitudes under 1e-100, which
/// CloudWatch cannot store, are 0.
fn round3(v: f64) -> f64 {
    if v.abs() < 1e-100 {
        return 0.0;
    }
    let scale = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

#[derive(Debug, Default)]
struct Registry {
    counters: Mutex<HashMap<Key, Arc<CounterCell>>>,
    gauges: Mutex<HashMap<Key, Arc<GaugeCell>>>,
    histograms: Mutex<HashMap<Key, Arc<HistogramCell>>>,
}

fn cell<T: Default>(map: &Mutex<HashMap<Key, Arc<T>>>, key: &Key) -> Arc<T> {
    map.lock().unwrap_or_else(|e| e.into_inner()).entry(key.clone()).or_default().clone()
}

/// A `metrics` recorder that keeps everything in memory until [`EmfRecorder::lines`] renders it.
/// Clones share the same series.
#[derive(Debug, Clone, Default)]
pub struct EmfRecorder {
    registry: Arc<Registry>,
}

impl Recorder for EmfRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(cell(&self.registry.counters, key))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(cell(&self.registry.gauges, key))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(cell(&self.registry.histograms, key))
    }
}

/// One metric's member of a line: name, unit, the dimension sets it is published under, value.
struct Entry {
    name: String,
    unit: &'static str,
    dimensions: Vec<Vec<String>>,
    value: Value,
}

/// One EMF object being filled: its metric members, and the directives naming them.
#[derive(Default)]
struct Line {
    members: Map<String, Value>,
    /// Dimension sets → the (name, unit) pairs published under them.
    directives: BTreeMap<Vec<Vec<String>>, Vec<(String, &'static str)>>,
}

impl EmfRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes this the recorder of the current thread until the guard drops (tests; a
    /// current-thread runtime runs every task on it).
    pub fn set_local(&self) -> metrics::LocalRecorderGuard<'_> {
        metrics::set_default_local_recorder(self)
    }

    /// Everything recorded since the previous call, as EMF JSON lines (no newline), timestamped
    /// `at_ms` (milliseconds since the Unix epoch). Counters that did not move and histograms
    /// without samples write nothing; an idle recorder with no gauges writes no line.
    pub fn lines(&self, at_ms: u128) -> Vec<String> {
        let mut groups: BTreeMap<Vec<(String, String)>, Vec<Entry>> = BTreeMap::new();
        let mut add = |key: &Key, value: Value| {
            let labels = dimension_values(key);
            let name = key.name().to_owned();
            let dimensions = dimension_sets(&name, &labels);
            let unit = unit_of(&name);
            groups.entry(labels).or_default().push(Entry { name, unit, dimensions, value });
        };
        for (key, c) in self.registry.counters.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let total = c.total.load(Ordering::Relaxed);
            let delta = total.saturating_sub(c.flushed.swap(total, Ordering::Relaxed));
            if delta > 0 {
                add(key, json!(delta));
            }
        }
        for (key, g) in self.registry.gauges.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let v = f64::from_bits(g.0.load(Ordering::Relaxed));
            if v.is_finite() {
                add(key, json!(v));
            }
        }
        for (key, h) in self.registry.histograms.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let samples = std::mem::take(&mut *h.0.lock().unwrap_or_else(|e| e.into_inner()));
            let mut samples: Vec<(f64, u64)> = samples.into_iter().map(|(bits, n)| (f64::from_bits(bits), n)).collect();
            samples.sort_by(|a, b| a.0.total_cmp(&b.0));
            for chunk in samples.chunks(MAX_VALUES) {
                let (values, counts): (Vec<f64>, Vec<u64>) = chunk.iter().copied().unzip();
                add(key, json!({"Values": values, "Counts": counts}));
            }
        }
        groups.into_iter().flat_map(|(labels, entries)| render(at_ms, &labels, entries)).collect()
    }
}

/// The series' labels as (dimension, value) pairs, sorted by dimension: values within
/// CloudWatch's length limit, never empty, `tenant` under the tenant cap.
fn dimension_values(key: &Key) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = key
        .labels()
        .map(|l| {
            let mut value: String = l.value().chars().take(MAX_DIMENSION_VALUE).collect();
            if value.is_empty() {
                value = crate::NO_TENANT.to_owned();
            } else if l.key() == "tenant" && value != crate::OTHER_TENANTS && value != crate::NO_TENANT {
                // Idempotent for a value already capped at the call site.
                value = crate::tenant_label(&value);
            }
            (l.key().to_owned(), value)
        })
        .collect();
    labels.sort();
    labels
}

/// The full label set (its first [`MAX_DIMENSIONS`] keys) and the metric's [`rollups`] it has.
fn dimension_sets(name: &str, labels: &[(String, String)]) -> Vec<Vec<String>> {
    let full: Vec<String> = labels.iter().take(MAX_DIMENSIONS).map(|(k, _)| k.clone()).collect();
    let mut sets = vec![full.clone()];
    for rollup in rollups(name) {
        let set: Vec<String> = rollup.iter().map(|k| (*k).to_owned()).collect();
        if set.iter().all(|k| full.contains(k)) && !sets.contains(&set) {
            sets.push(set);
        }
    }
    sets
}

/// One label set's entries as EMF lines: at most [`MAX_METRICS`] metrics per line, each metric
/// name at most once per line (a histogram's further chunks go to further lines).
fn render(at_ms: u128, labels: &[(String, String)], entries: Vec<Entry>) -> Vec<String> {
    let mut lines: Vec<Line> = Vec::new();
    for e in entries {
        let i = match lines.iter().position(|l| l.members.len() < MAX_METRICS && !l.members.contains_key(&e.name)) {
            Some(i) => i,
            None => {
                lines.push(Line::default());
                lines.len() - 1
            }
        };
        let line = &mut lines[i];
        line.members.insert(e.name.clone(), e.value);
        line.directives.entry(e.dimensions).or_default().push((e.name, e.unit));
    }
    lines
        .into_iter()
        .map(|line| {
            let directives: Vec<Value> = line
                .directives
                .into_iter()
                .map(|(dimensions, metrics)| {
                    let metrics: Vec<Value> = metrics.into_iter().map(|(n, u)| json!({"Name": n, "Unit": u})).collect();
                    json!({"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": metrics})
                })
                .collect();
            let mut object = Map::new();
            object.insert("_aws".into(), json!({"Timestamp": at_ms as u64, "CloudWatchMetrics": directives}));
            for (k, v) in labels {
                object.insert(k.clone(), json!(v));
            }
            object.extend(line.members);
            Value::Object(object).to_string()
        })
        .collect()
}

static GLOBAL: OnceLock<EmfRecorder> = OnceLock::new();

/// Installs an [`EmfRecorder`] as the process's metrics recorder (a Lambda function's cold
/// start). Calling it again, or after another recorder was installed, does nothing.
pub fn install() {
    let recorder = GLOBAL.get_or_init(EmfRecorder::new);
    let _ = metrics::set_global_recorder(recorder.clone());
}

/// Prints everything recorded since the previous flush to stdout as EMF lines, one write per
/// line. Call it at the end of each invocation, before the response leaves (the sandbox may be
/// frozen right after). Does nothing unless [`install`] ran.
pub fn flush() {
    let Some(recorder) = GLOBAL.get() else { return };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    for line in recorder.lines(now.as_millis()) {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests;
