//! The faults, in three streams that run at once from their own generators: `openqq up` killed
//! with SIGKILL at random points; its dependencies failing (Redis stopped under each limiter
//! policy, the broker stopped, the data dir's disk filled, poison records put on a topic); and
//! the webhook receiver going down, hanging and answering 500. Each stream runs every fault it
//! has once, in a random order, before choosing at random.

use super::journal::Journal;
use super::platform::Platform;
use super::receiver::{Behaviour, Receiver};
use super::rng::Rng;
use openqq_core::event::{DesignSubmitted, Origin};
use openqq_core::{CorrelationId, DesignId, DesignSpec, Envelope, EventKind, Record, TenantId};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The tenant poison records are put under: no client of the run is it.
pub const POISON_TENANT: &str = "poisoner";

async fn sleep_until_or(ms: u64, until: Instant) -> bool {
    let wake = Instant::now() + Duration::from_millis(ms);
    tokio::time::sleep_until(wake.min(until).into()).await;
    Instant::now() < until
}

/// Kills `openqq up` every 3–10 s, down for 0.2–1.5 s; on Kafka every 10–25 s, since each restart
/// there waits out the killed member's session (7 s). Where the log is the process's own, half
/// of the outages put poison records on it meanwhile.
pub async fn kills(p: &Platform, j: &Journal, mut rng: Rng, until: Instant) {
    let mut n = 0;
    let gap = if p.broker.is_some() { (10_000, 25_000) } else { (3_000, 10_000) };
    while sleep_until_or(rng.range(gap.0, gap.1), until).await {
        let poison = p.broker.is_none() && rng.below(2) == 0;
        let down = Duration::from_millis(rng.range(200, 1_500));
        let fail_closed = p.fail_closed.load(Ordering::SeqCst);
        j.fault("openqq SIGKILL");
        let (markers, records) =
            if poison { poison_records(&mut rng, &format!("kill-{n}")) } else { Default::default() };
        p.kill_and_restart(j, down, fail_closed, |p| {
            if records.is_empty() {
                return;
            }
            match tokio::runtime::Handle::current().block_on(p.inject(records)) {
                Ok(()) => markers.iter().for_each(|m| j.poison(m)),
                // The disk may be full at that moment.
                Err(e) => eprintln!("chaos: poison not injected: {e:#}"),
            }
        })
        .await;
        n += 1;
    }
}

#[derive(Debug, Clone, Copy)]
enum Dependency {
    RedisFailOpen,
    RedisFailClosed,
    Broker,
    DiskFull,
    Poison,
    StoreThrottled,
}

/// Breaks one dependency at a time for 1–5 s, with 1–4 s between.
pub async fn dependencies(p: &Platform, j: &Journal, mut rng: Rng, until: Instant) {
    let mut each = Vec::new();
    if p.redis.is_some() {
        each.extend([Dependency::RedisFailOpen, Dependency::RedisFailClosed]);
    }
    if p.broker.is_some() {
        each.extend([Dependency::Broker, Dependency::Poison]);
    }
    if p.disk.is_some() {
        each.push(Dependency::DiskFull);
    }
    if p.throttler.is_some() {
        each.push(Dependency::StoreThrottled);
    }
    if each.is_empty() {
        return;
    }
    let mut first = each.clone();
    rng.shuffle(&mut first);
    let mut n = 0;
    while sleep_until_or(rng.range(1_000, 4_000), until).await {
        let fault = if n < first.len() { first[n] } else { each[rng.below(each.len() as u64) as usize] };
        let hold = Duration::from_millis(rng.range(1_000, 5_000));
        match fault {
            Dependency::RedisFailOpen | Dependency::RedisFailClosed => {
                let closed = matches!(fault, Dependency::RedisFailClosed);
                if p.fail_closed.load(Ordering::SeqCst) != closed {
                    j.fault("openqq SIGKILL");
                    p.kill_and_restart(j, Duration::from_millis(200), closed, |_| {}).await;
                }
                j.fault(if closed { "redis down (fail-closed)" } else { "redis down (fail-open)" });
                let redis = p.redis.as_ref().unwrap();
                // Fail-open goes on serving from a local limit: no window.
                let window = closed.then(|| j.down("redis down, limiter fail-closed"));
                redis.lock().unwrap().down();
                tokio::time::sleep(hold).await;
                tokio::task::block_in_place(|| redis.lock().unwrap().up());
                if let Some(w) = window {
                    j.up(w);
                }
            }
            Dependency::Broker => {
                j.fault("broker SIGKILL");
                let broker = p.broker.as_ref().unwrap();
                let window = j.down("broker down");
                broker.lock().unwrap().kill9();
                tokio::time::sleep(hold).await;
                tokio::task::block_in_place(|| broker.lock().unwrap().restart());
                j.up(window);
            }
            Dependency::DiskFull => {
                j.fault("disk full");
                let ballast = p.data_dir.join("ballast");
                let window = j.down("disk full");
                let filled = tokio::task::block_in_place(|| crate::disk::fill(&ballast));
                if let Err(e) = filled {
                    eprintln!("chaos: filling the disk failed: {e}");
                }
                tokio::time::sleep(hold).await;
                let _ = std::fs::remove_file(&ballast);
                j.up(window);
            }
            Dependency::StoreThrottled => {
                j.fault("store throttled");
                let throttler = p.throttler.as_ref().unwrap();
                let window = j.down("store throttled");
                throttler.throttle();
                tokio::time::sleep(hold).await;
                throttler.release();
                j.up(window);
            }
            Dependency::Poison => {
                j.fault("poison records");
                let (markers, records) = poison_records(&mut rng, &format!("dep-{n}"));
                match p.inject(records).await {
                    Ok(()) => markers.iter().for_each(|m| j.poison(m)),
                    Err(e) => eprintln!("chaos: poison not injected: {e:#}"),
                }
            }
        }
        n += 1;
    }
}

/// Two poison records and their correlation ids (the markers the checker looks for): bytes that are no envelope at all,
/// and a well-formed submission of the poison tenant whose netlist is by reference to an object
/// no store holds (its validation can never succeed).
fn poison_records(rng: &mut Rng, tag: &str) -> (Vec<String>, Vec<Record>) {
    let garbage_id = format!("poison-garbage-{tag}-{}", rng.below(1 << 20));
    let garbage = Record {
        key: POISON_TENANT.to_owned(),
        value: format!("{{\"not an envelope\": \"{garbage_id}\"}}").into_bytes(),
        headers: vec![
            ("correlation-id".to_owned(), garbage_id.clone().into_bytes()),
            ("event-kind".to_owned(), b"design.submitted".to_vec()),
        ],
    };
    let missing_id = format!("poison-missing-{tag}-{}", rng.below(1 << 20));
    let tenant = TenantId::parse(POISON_TENANT).unwrap();
    let mut design = crate::compact_blink_design("poison");
    let netlist = serde_json::to_vec(&design["netlist"]).unwrap();
    design.as_object_mut().unwrap().remove("netlist");
    design["netlist_ref"] = json!({"digest": crate::sha256_hex(&netlist), "bytes": netlist.len()});
    let spec: DesignSpec = serde_json::from_value(design).expect("a design by reference");
    let cause = Origin {
        tenant_id: tenant,
        design_id: DesignId::generate(),
        revision: 1,
        correlation_id: CorrelationId::parse(&missing_id).unwrap(),
        batch: None,
    };
    let missing = Envelope::new(EventKind::DesignSubmitted, &cause, "api", DesignSubmitted { spec, checks: None });
    (vec![garbage_id, missing_id], vec![garbage, missing.to_record()])
}

/// The receiver answers for 1–4 s, then goes down, hangs or answers 500 for 1–8 s: past the
/// run's whole retry schedule (about 6.7 s) deliveries die.
pub async fn receiver(r: &Receiver, j: &Journal, mut rng: Rng, until: Instant) {
    let each = [Behaviour::Down, Behaviour::Hang, Behaviour::Error];
    let mut first = each;
    rng.shuffle(&mut first);
    let mut n = 0;
    while sleep_until_or(rng.range(1_000, 4_000), until).await {
        let b = if n < first.len() { first[n] } else { each[rng.below(3) as usize] };
        j.fault(match b {
            Behaviour::Down => "receiver down",
            Behaviour::Hang => "receiver hangs",
            _ => "receiver answers 500",
        });
        r.set(b);
        sleep_until_or(rng.range(1_000, 8_000), until).await;
        r.set(Behaviour::Ok);
        n += 1;
    }
    r.set(Behaviour::Ok);
}
