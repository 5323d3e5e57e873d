//! A metrics recorder for unit tests that keeps counters by `name{label=value,…}`. Installed for
//! the current thread only ([`metrics::set_default_local_recorder`]), so a `#[tokio::test]` on
//! its one thread reads exactly what it counted, whatever other tests run beside it.

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub(crate) struct Counters(Mutex<BTreeMap<String, Arc<AtomicU64>>>);

impl Counters {
    /// The counter `key` (`name{label=value,…}`, labels in the order given); 0 if never counted.
    pub(crate) fn get(&self, key: &str) -> u64 {
        self.0.lock().unwrap().get(key).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Every counter with a non-zero value.
    pub(crate) fn all(&self) -> BTreeMap<String, u64> {
        let counters = self.0.lock().unwrap();
        counters.iter().map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed))).filter(|(_, v)| *v > 0).collect()
    }
}

impl Recorder for Counters {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        Counter::from_arc(self.0.lock().unwrap().entry(name).or_default().clone())
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}
