//! The noisy-neighbour harness: victim tenants that share the attacker's partition measure how
//! long their designs take from submission to `ready`, first with no attack and then while an
//! attack runs, in the same run on the same server.
//!
//! Every record is keyed by tenant, so a tenant whose key hashes to the attacker's partition is
//! handled in sequence behind the attacker's records in every topic: that is the victim a
//! fairness bug hurts first.

use crate::{compact_blink_design, openqq_release_bin, Client, Server};
use anyhow::{bail, Result};
use openqq_core::partition::partition_for;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Partitions per topic of the server under test (the `openqq up` default).
pub const PARTITIONS: u32 = 12;

/// `n` tenant names whose records land on the same partition as `attacker`'s.
pub fn same_partition_tenants(attacker: &str, n: usize) -> Vec<String> {
    let target = partition_for(attacker, PARTITIONS);
    (0..).map(|i| format!("victim-{i}")).filter(|t| partition_for(t, PARTITIONS) == target).take(n).collect()
}

/// Submits one small real design per victim, all at once, and returns each one's time from
/// submission to `ready`. A victim that does not get there within `within` fails the call.
pub async fn victim_round(victims: &[Client], within: Duration) -> Result<Vec<Duration>> {
    let rounds = victims.iter().enumerate().map(|(i, c)| {
        let c = c.clone();
        async move {
            let started = Instant::now();
            let (status, body) = submit_retrying(&c, &compact_blink_design(&format!("victim-{i}")), within).await?;
            if status != 202 {
                bail!("a victim's submission was refused with {status}: {body}");
            }
            let id = body["design_id"].as_str().unwrap_or_default().to_owned();
            c.wait_for(&id, within.saturating_sub(started.elapsed()), |d| d["status"] == "ready").await?;
            let took = started.elapsed();
            if std::env::var("NOISY_DEBUG").is_ok() && took > Duration::from_secs(1) {
                let (_, ev) = c.get(&format!("/v1/designs/{id}/events")).await?;
                eprintln!(
                    "slow victim {took:?}: {}",
                    ev["events"]
                        .as_array()
                        .map(|a| a
                            .iter()
                            .map(|e| format!("{} {}", e["kind"], e["occurred_at"]))
                            .collect::<Vec<_>>()
                            .join(" | "))
                        .unwrap_or_default()
                );
            }
            Ok(took)
        }
    });
    spawn_all(rounds).await.into_iter().collect()
}

/// A victim is a well-behaved client: it honours a 429's `Retry-After` (its own limit), but any
/// other refusal is the attack reaching it and is returned as is.
async fn submit_retrying(c: &Client, design: &Value, within: Duration) -> Result<(u16, Value)> {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = c.post("/v1/designs", design).await?;
        if status != 429 || Instant::now() > deadline {
            return Ok((status, body));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs every future on its own task (victims must not share one) and collects the outputs.
async fn spawn_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("a victim task panicked"));
    }
    out
}

/// The slowest of `rounds` of victims.
pub async fn worst_latency(victims: &[Client], rounds: usize, within: Duration) -> Result<Duration> {
    let mut worst = Duration::ZERO;
    for _ in 0..rounds {
        worst = worst.max(victim_round(victims, within).await?.into_iter().max().unwrap_or_default());
    }
    Ok(worst)
}

/// How much slower a victim may get under attack: a small multiple of its latency without the
/// attack, measured in the same run. The floor keeps a fast baseline (a few hundred
/// milliseconds with a 50 ms batch window) from turning scheduler noise on a busy 2-core
/// machine into a failure; a stalled partition is far beyond either.
pub fn allowed_under_attack(baseline: Duration) -> Duration {
    (baseline * 5).max(baseline + Duration::from_secs(3))
}

/// A server and its tenants: one attacker and `victims` tenants on the attacker's partition. The
/// server is the release build when there is one: the verdict depends on how much work an
/// attacker's bytes cost, and the debug build pays several times what a deployment does.
pub struct Arena {
    pub server: Server,
    pub attacker: Client,
    pub victims: Vec<Client>,
    _dir: tempfile::TempDir,
}

impl Arena {
    pub fn start(victims: usize, extra_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start_bin(&openqq_release_bin(), dir.path(), "127.0.0.1:0", extra_args, &[]).unwrap();
        let attacker = Client::new(&server.url, &server.token("attacker"));
        let victims = same_partition_tenants("attacker", victims)
            .iter()
            .map(|t| Client::new(&server.url, &server.token(t)))
            .collect();
        Self { server, attacker, victims, _dir: dir }
    }
}

/// A netlist with one input port `bits` wide and nothing else, with an empty PCF: every bit is
/// an unconstrained port, so the validator's report has one finding per bit.
pub fn wide_port_design(name: &str, bits: usize) -> Value {
    let port_bits: Vec<usize> = (2..bits + 2).collect();
    json!({
        "name": name,
        "target": {"device": "hx8k", "package": "ct256"},
        "netlist": {"modules": {"top": {
            "attributes": {"top": "00000000000000000000000000000001"},
            "ports": {"big": {"direction": "input", "bits": port_bits}},
            "cells": {},
            "netnames": {"big": {"hide_name": 0, "bits": port_bits, "attributes": {}}}
        }}},
        "constraints": {"format": "pcf", "text": ""},
    })
}

/// Waits until every design in `ids` is in a final state (`ready` or `failed`).
pub async fn all_final(c: &Client, ids: &[String], within: Duration) -> Result<()> {
    for id in ids {
        c.wait_for(id, within, |d| d["status"] == "ready" || d["status"] == "failed").await?;
    }
    Ok(())
}

/// The slowest netlist shape known for the validator (a port whose name is as long as its bit
/// list, no constraints: one finding per bit, each naming the port), about `bytes` long.
pub fn long_named_bus_design(name: &str, bytes: usize) -> Value {
    let bits: Vec<usize> = (1_000_000..1_000_000 + bytes / 14).collect();
    let port = "w".repeat(bytes / 2);
    json!({
        "name": name,
        "target": {"device": "hx8k", "package": "ct256"},
        "netlist": {"modules": {"top": {
            "attributes": {"top": "1"},
            "ports": {port: {"direction": "input", "bits": bits}},
            "cells": {},
            "netnames": {}
        }}},
        "constraints": {"format": "pcf", "text": ""},
    })
}

/// Core PLLs each on its own reference net beside one netname with many bits: the shape that
/// once cost PLL cells × netname bits, about `bytes` long.
pub fn pll_netnames_design(name: &str, bytes: usize) -> Value {
    let (plls, named) = (bytes / 260, bytes / 16);
    let cells: serde_json::Map<String, Value> = (0..plls)
        .map(|i| {
            let cell =
                json!({"type": "SB_PLL40_CORE", "parameters": {"DIVF": 3}, "connections": {"REFERENCECLK": [10 + i]}});
            (format!("p{i}"), cell)
        })
        .collect();
    let net_bits: Vec<usize> = (10 + plls..10 + plls + named).collect();
    json!({
        "name": name,
        "target": {"device": "hx8k", "package": "ct256"},
        "netlist": {"modules": {"top": {
            "attributes": {"top": "1"},
            "ports": {},
            "cells": cells,
            "netnames": {"n": {"bits": net_bits}}
        }}},
        "constraints": {"format": "pcf", "text": ""},
    })
}

/// Uploads `bytes` as `c`'s object through the API (`POST /v1/uploads`, then the granted `PUT`)
/// and returns the reference a submission names it by.
pub async fn upload(c: &Client, bytes: Vec<u8>) -> Result<Value> {
    use sha2::{Digest, Sha256};
    let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let (status, grant) = c.post("/v1/uploads", &json!({"sha256": digest, "bytes": bytes.len()})).await?;
    if status != 200 {
        bail!("the upload was not granted: {status} {grant}");
    }
    let url = grant["upload"]["url"].as_str().unwrap_or_default();
    let resp = c.http.put(url).header("content-type", "application/octet-stream").body(bytes).send().await?;
    if !resp.status().is_success() {
        bail!("the upload was refused: {}", resp.status());
    }
    Ok(grant["object"].clone())
}

/// Each victim uploads `bytes` fresh bytes through the API (`POST /v1/uploads`, then the grant's
/// `PUT`), all at once; returns each one's time from asking to `201`. Any other answer fails the
/// call: an upload refused beside an attack is the attack reaching the victim.
pub async fn upload_round(victims: &[Client], bytes: usize) -> Result<Vec<Duration>> {
    let rounds = victims.iter().map(|c| {
        let c = c.clone();
        async move {
            let body: Vec<u8> = (0..bytes).map(|_| rand_byte()).collect();
            let started = Instant::now();
            upload(&c, body).await.map_err(|e| anyhow::anyhow!("a victim's upload: {e:#}"))?;
            Ok(started.elapsed())
        }
    });
    spawn_all(rounds).await.into_iter().collect()
}

/// The slowest of `rounds` of victims' uploads of `bytes`, a `pause` apart.
pub async fn worst_upload(victims: &[Client], bytes: usize, rounds: usize, pause: Duration) -> Result<Duration> {
    let mut worst = Duration::ZERO;
    for _ in 0..rounds {
        worst = worst.max(upload_round(victims, bytes).await?.into_iter().max().unwrap_or_default());
        tokio::time::sleep(pause).await;
    }
    Ok(worst)
}

/// A byte that differs from upload to upload, so no victim's upload is already present.
fn rand_byte() -> u8 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now()) as u8
}
