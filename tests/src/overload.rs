//! The overload experiment: one tenant submits a burst of designs to be written by a slow model
//! while nine others keep submitting plain netlists and designs given as source with a testbench,
//! each measuring how long its designs take from submission to `ready`.
//!
//! Three of the nine share the generating tenant's partition (every record is keyed by tenant),
//! which is where a missing bulkhead hurts first: with `--bulkheads off` the burst runs in the
//! synthesis lane, and their source jobs wait behind it; with the default, the burst has a lane
//! of its own. The e2e suite asserts on it with generous bounds; `--example overload` prints the
//! figures for docs/BENCHMARKS.md.

use crate::noisy::{same_partition_tenants, PARTITIONS};
use crate::{compact_blink_design, hdl, repo_root, Client, Server};
use anyhow::{bail, Context, Result};
use openqq_core::partition::partition_for;
use openqq_generation::test_server::{Reply, Step, TestServer, TestServerOptions};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// The generating tenant.
pub const GENERATOR: &str = "generator";

/// One run of the experiment.
#[derive(Debug, Clone)]
pub struct Run {
    /// `--bulkheads on` (true) or `off`.
    pub bulkheads: bool,
    /// Designs the generating tenant submits at the start (0: the no-burst run).
    pub burst: usize,
    /// How long the model takes to answer each call.
    pub model_latency: Duration,
    /// Rounds of the nine tenants' submissions, one every `pace`.
    pub rounds: usize,
    pub pace: Duration,
    /// How long a design may take to reach `ready` before it counts as an error.
    pub within: Duration,
}

/// What the nine tenants saw, and what the generating tenant got done meanwhile.
#[derive(Debug, Default)]
pub struct Figures {
    /// Latency of each plain netlist design that reached `ready` with a pass.
    pub netlist: Vec<Duration>,
    /// Latency of each design given as source (with its testbench) that did.
    pub source: Vec<Duration>,
    /// The same for the three tenants on the generating tenant's partition only (both kinds).
    pub same_partition: Vec<Duration>,
    /// Designs that were refused, failed, or did not reach `ready` within `within`, with why.
    pub errors: Vec<String>,
    /// The generating tenant's designs that reached `ready` while the nine were measured.
    pub generated: usize,
    /// How long the nine were measured (first submission to last `ready` or give-up).
    pub window: Duration,
}

/// The nine tenants: three on the generating tenant's partition, six on others.
pub fn tenants() -> Vec<String> {
    let shared = same_partition_tenants(GENERATOR, 3);
    let own = partition_for(GENERATOR, PARTITIONS);
    let others = (0..).map(|i| format!("bystander-{i}")).filter(|t| partition_for(t, PARTITIONS) != own).take(6);
    shared.into_iter().chain(others).collect()
}

/// The generating tenant's design: a counter written by the model, synthesised and checked.
fn generated(i: usize) -> Value {
    json!({
        "name": format!("generated-{i}"),
        "target": {"device": "hx8k", "package": "ct256"},
        "constraints": {"format": "pcf", "text": "set_io clk J3\n"},
        "options": {"allow_unconstrained": true},
        "generate": {"prompt": "Top module: counter. An 8-bit up-counter with synchronous reset and enable.",
                     "top": "counter", "max_attempts": 1},
    })
}

/// Starts the model (answering every call correctly after `latency`) and `openqq` (`bin`) with it.
pub async fn start(bin: &Path, dir: &Path, run: &Run) -> Result<(TestServer, Server)> {
    let mut options = TestServerOptions::new(repo_root().join("shared/hdl/corpus"));
    options.default = Step::new(Reply::Correct).after(run.model_latency);
    let model = TestServer::start(options).await.context("starting the model server")?;
    let url = format!("http://{}/v1", model.addr());
    let bulkheads = if run.bulkheads { "on" } else { "off" };
    let args = [
        "--generation-url",
        &url,
        "--generation-model",
        "stub",
        "--generation-daily-tokens",
        "1000000000",
        "--bulkheads",
        bulkheads,
    ];
    let server = Server::start_bin(bin, dir, "127.0.0.1:0", &args, &[])?;
    Ok((model, server))
}

/// Runs the experiment once on a fresh data dir with `bin` (`openqq`).
pub async fn measure(bin: &Path, run: &Run) -> Result<Figures> {
    let dir = tempfile::tempdir()?;
    let (_model, server) = start(bin, dir.path(), run).await?;
    let generator = Client::new(&server.url, &server.token(GENERATOR));
    let burst = tokio::spawn(submit_burst(generator.clone(), run.burst));
    let names = tenants();
    let shared: Vec<bool> = {
        let own = partition_for(GENERATOR, PARTITIONS);
        names.iter().map(|t| partition_for(t, PARTITIONS) == own).collect()
    };
    let clients: Vec<Client> = names.iter().map(|t| Client::new(&server.url, &server.token(t))).collect();
    // Let the burst land in the log first: the nine arrive while it is queued.
    let queued = burst.await??;
    let started = Instant::now();
    let mut jobs = Vec::new();
    for round in 0..run.rounds {
        for (i, c) in clients.iter().enumerate() {
            // A third of each round's designs are source with a testbench, the rest netlists.
            let source = (i + round) % 3 == 0;
            let job = if source {
                hdl::counter_job("design.v", true, None)
            } else {
                compact_blink_design(&format!("r{round}-t{i}"))
            };
            let (c, within, on_shared) = (c.clone(), run.within, shared[i]);
            jobs.push(tokio::spawn(async move { (source, on_shared, one(&c, &job, within).await) }));
        }
        tokio::time::sleep(run.pace).await;
    }
    let mut figures = Figures::default();
    for job in jobs {
        let (source, on_shared, outcome) = job.await?;
        match outcome {
            Ok(took) => {
                if source { &mut figures.source } else { &mut figures.netlist }.push(took);
                if on_shared {
                    figures.same_partition.push(took);
                }
            }
            Err(e) => figures.errors.push(format!("{e:#}")),
        }
    }
    figures.window = started.elapsed();
    figures.generated = ready_count(&generator, &queued).await?;
    Ok(figures)
}

/// Submits the burst, honouring 429s (the generating tenant's own limit), and answers the ids.
async fn submit_burst(c: Client, n: usize) -> Result<Vec<String>> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        ids.push(submit(&c, &generated(i), Duration::from_secs(60)).await?);
    }
    Ok(ids)
}

/// Submits `job` (retrying 429s within `within`) and answers its id.
async fn submit(c: &Client, job: &Value, within: Duration) -> Result<String> {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = c.post("/v1/designs", job).await?;
        match status {
            202 => return Ok(body["design_id"].as_str().unwrap_or_default().to_owned()),
            429 if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => bail!("a submission was answered {status}: {body}"),
        }
    }
}

/// One design from submission to a passing `ready`, timed (polled every 100 ms: nine tenants
/// polling faster would load the 2-core machine they measure).
async fn one(c: &Client, job: &Value, within: Duration) -> Result<Duration> {
    let t0 = Instant::now();
    let id = submit(c, job, within).await?;
    loop {
        let design = read(c, &id).await?;
        if design["status"] == "ready" || design["status"] == "failed" {
            if design["verdict"] != "pass" {
                bail!("design {id} ended {design}");
            }
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > within {
            bail!("design {id} was not ready within {within:?}: {}", design["status"]);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Design `id` as its tenant reads it (retrying the tenant's own 429s).
async fn read(c: &Client, id: &str) -> Result<Value> {
    loop {
        match c.get(&format!("/v1/designs/{id}")).await? {
            (200, design) => return Ok(design),
            (429, _) => tokio::time::sleep(Duration::from_millis(100)).await,
            (status, body) => bail!("reading design {id} answered {status}: {body}"),
        }
    }
}

/// How many of `ids` are `ready`.
async fn ready_count(c: &Client, ids: &[String]) -> Result<usize> {
    let mut n = 0;
    for id in ids {
        n += usize::from(read(c, id).await?["status"] == "ready");
    }
    Ok(n)
}

/// The `q` quantile (0..=1) of `samples`, nearest rank; zero when there are none.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    match sorted.len() {
        0 => Duration::ZERO,
        n => sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}
