//! What came back: one sample per scheduled request, summarised per tenant class as status
//! counts and latency percentiles. Latency runs from the *scheduled* send time, so a server
//! (or a load generator) that falls behind shows up as latency instead of as fewer requests.

use super::plan::{Burst, Class};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Status(u16),
    /// No answer within the client timeout.
    Timeout,
    /// Connection refused or reset, or another transport failure.
    Error,
}

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub class: Class,
    pub tenant: usize,
    /// When it was due, from the start of the run.
    pub scheduled: Duration,
    pub outcome: Outcome,
    /// From the scheduled send time to the end of the response body (or the failure).
    pub latency: Duration,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> Value {
    json!((d.as_secs_f64() * 1e6).round() / 1e3)
}

fn latency(mut l: Vec<Duration>) -> Value {
    l.sort_unstable();
    json!({
        "count": l.len(),
        "p50": ms(percentile(&l, 0.50)),
        "p95": ms(percentile(&l, 0.95)),
        "p99": ms(percentile(&l, 0.99)),
        "max": ms(l.last().copied().unwrap_or_default()),
    })
}

/// Counts and percentiles of some samples: `latency_ms` over every answered request,
/// `ok_latency_ms` over the 2xx ones, and `ok_or_timeout_latency_ms` over the 2xx ones and the
/// timeouts (at their time of giving up): the work a server took on, including what it never
/// finished in time.
pub fn summarise<'a>(samples: impl Iterator<Item = &'a Sample>) -> Value {
    let (mut sent, mut timeouts, mut errors) = (0usize, 0usize, 0usize);
    let mut status: BTreeMap<u16, usize> = BTreeMap::new();
    let (mut answered, mut ok, mut ok_or_timeout) = (Vec::new(), Vec::new(), Vec::new());
    for s in samples {
        sent += 1;
        match s.outcome {
            Outcome::Status(code) => {
                *status.entry(code).or_default() += 1;
                answered.push(s.latency);
                if (200..300).contains(&code) {
                    ok.push(s.latency);
                    ok_or_timeout.push(s.latency);
                }
            }
            Outcome::Timeout => {
                timeouts += 1;
                ok_or_timeout.push(s.latency);
            }
            Outcome::Error => errors += 1,
        }
    }
    let count = |f: &dyn Fn(u16) -> bool| status.iter().filter(|(c, _)| f(**c)).map(|(_, n)| n).sum::<usize>();
    json!({
        "sent": sent,
        "ok": count(&|c| (200..300).contains(&c)),
        "rate_limited": count(&|c| c == 429),
        "server_errors": count(&|c| c >= 500),
        "timeouts": timeouts,
        "transport_errors": errors,
        "status": status.iter().map(|(c, n)| (c.to_string(), json!(n))).collect::<Map<_, _>>(),
        "latency_ms": latency(answered),
        "ok_latency_ms": latency(ok),
        "ok_or_timeout_latency_ms": latency(ok_or_timeout),
    })
}

fn by_class<'a>(samples: &'a [Sample], keep: impl Fn(&Sample) -> bool + Copy + 'a) -> Value {
    let mut out = Map::new();
    for class in [Class::Compliant, Class::Noisy] {
        out.insert(class.name().into(), summarise(samples.iter().filter(move |s| s.class == class && keep(s))));
    }
    Value::Object(out)
}

/// The results document: per class over the whole run and, with a burst, during it; and per
/// tenant counts.
pub fn results(
    config: Value,
    elapsed: Duration,
    burst: Option<Burst>,
    tenants: &[(String, Class)],
    samples: &[Sample],
) -> Value {
    let mut doc = json!({
        "config": config,
        "elapsed_s": elapsed.as_secs_f64(),
        "classes": by_class(samples, |_| true),
    });
    if let Some(b) = burst {
        doc["during_burst"] = by_class(samples, move |s| b.contains(s.scheduled));
    }
    doc["tenants"] = tenants
        .iter()
        .enumerate()
        .map(|(i, (name, class))| {
            let mut v = summarise(samples.iter().filter(|s| s.tenant == i));
            let m = v.as_object_mut().expect("an object");
            m.remove("latency_ms");
            m.remove("ok_latency_ms");
            m.remove("ok_or_timeout_latency_ms");
            m.insert("tenant".into(), json!(name));
            m.insert("class".into(), json!(class.name()));
            v
        })
        .collect();
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(class: Class, outcome: Outcome, ms: u64, at: u64) -> Sample {
        Sample { class, tenant: 0, scheduled: Duration::from_secs(at), outcome, latency: Duration::from_millis(ms) }
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 0.50), Duration::from_millis(50));
        assert_eq!(percentile(&v, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&v[..1], 0.99), Duration::from_millis(1));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn a_summary_counts_every_outcome_and_times_only_answers() {
        let samples = [
            sample(Class::Noisy, Outcome::Status(200), 10, 0),
            sample(Class::Noisy, Outcome::Status(429), 2, 0),
            sample(Class::Noisy, Outcome::Status(503), 3, 0),
            sample(Class::Noisy, Outcome::Timeout, 5000, 0),
            sample(Class::Noisy, Outcome::Error, 1, 0),
        ];
        let s = summarise(samples.iter());
        assert_eq!((s["sent"].as_u64(), s["ok"].as_u64(), s["rate_limited"].as_u64()), (Some(5), Some(1), Some(1)));
        assert_eq!(
            (s["server_errors"].as_u64(), s["timeouts"].as_u64(), s["transport_errors"].as_u64()),
            (Some(1), Some(1), Some(1))
        );
        assert_eq!(s["status"]["429"], 1);
        assert_eq!(s["latency_ms"]["count"], 3);
        assert_eq!(s["latency_ms"]["max"], 10.0);
        assert_eq!(s["ok_latency_ms"]["p50"], 10.0);
        assert_eq!(s["ok_or_timeout_latency_ms"]["max"], 5000.0);
    }

    #[test]
    fn results_split_classes_and_the_burst_window() {
        let burst = Burst { factor: 10.0, start: Duration::from_secs(1), length: Duration::from_secs(1) };
        let samples =
            [sample(Class::Compliant, Outcome::Status(200), 5, 0), sample(Class::Noisy, Outcome::Status(429), 1, 1)];
        let doc = results(json!({}), Duration::from_secs(2), Some(burst), &[("a".into(), Class::Compliant)], &samples);
        assert_eq!(doc["classes"]["compliant"]["sent"], 1);
        assert_eq!(doc["classes"]["noisy"]["rate_limited"], 1);
        assert_eq!(doc["during_burst"]["compliant"]["sent"], 0);
        assert_eq!(doc["during_burst"]["noisy"]["sent"], 1);
        assert_eq!(doc["tenants"][0]["tenant"], "a");
    }
}
