//! `openqq load`: an open-loop load generator for a running `openqq up`.
//!
//! Compliant tenants send at a steady rate; noisy tenants send at the same rate and multiply it
//! during a burst. Every request is sent at its scheduled time whether or not earlier ones have
//! been answered (open loop), and latency is measured from that scheduled time, so a slow server
//! cannot hide its slowness by slowing the generator down (no coordinated omission).
//!
//! - [`plan`]: tenants, classes and send schedules (pure).
//! - [`report`]: samples into per-class counts and percentiles, the JSON results file (pure).
//! - [`send`]: the HTTP client, the clock, the progress line.
//! - this module: the flags, the tokens, the results file and the summary.
//!
//! It only talks to loopback addresses and stops after `--duration` (at most 10 minutes) and
//! `--max-requests`.

mod plan;
mod report;
mod send;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, ValueEnum};
use openqq_api::JwtKeys;
use openqq_core::TenantId;
use openqq_platform::secret;
use plan::{Arrivals, Burst, Class};
use send::{send_all, Senders, TenantPlan};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest run accepted.
const MAX_DURATION: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, ValueEnum)]
enum ArrivalsArg {
    Even,
    Poisson,
}

#[derive(Args)]
pub struct LoadArgs {
    /// The running server, e.g. http://127.0.0.1:8080 (loopback only).
    #[arg(long)]
    url: String,
    /// The server's data dir, whose local secret signs the tenants' tokens (as `openqq token`).
    #[arg(long, env = "OPENQQ_DATA_DIR", default_value = ".openqq")]
    data_dir: PathBuf,
    /// Tenants sending at the steady rate throughout.
    #[arg(long, default_value_t = 9)]
    tenants: usize,
    /// Tenants that burst.
    #[arg(long, default_value_t = 1)]
    noisy: usize,
    /// Requests per second per tenant.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// During the burst the noisy tenants send this many times their rate (1 = no burst).
    #[arg(long, default_value_t = 10.0)]
    burst_factor: f64,
    /// When the burst starts.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    burst_start: Duration,
    /// How long the burst lasts.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    burst_length: Duration,
    /// How long to send for (at most 10 minutes).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Refuse to start if the schedule holds more requests than this.
    #[arg(long, default_value_t = 200_000)]
    max_requests: usize,
    /// A request unanswered after this long counts as a timeout.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// How sends are spaced.
    #[arg(long, value_enum, default_value = "even")]
    arrivals: ArrivalsArg,
    /// Seed of the per-tenant phases and Poisson gaps.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// What each request fetches (a cheap authenticated, rate-limited read).
    #[arg(long, default_value = "/v1/designs?limit=1")]
    path: String,
    /// Tenant ids are PREFIX-compliant-N and PREFIX-noisy-N.
    #[arg(long, default_value = "load")]
    tenant_prefix: String,
    /// Where the JSON results go.
    #[arg(long, default_value = "load-results.json")]
    out: PathBuf,
}

impl LoadArgs {
    fn burst(&self) -> Option<Burst> {
        // A factor of 1 keeps the window, so a steady run reports the same slice of time.
        (self.noisy > 0).then_some(Burst {
            factor: self.burst_factor,
            start: self.burst_start,
            length: self.burst_length,
        })
    }

    fn arrivals(&self) -> Arrivals {
        match self.arrivals {
            ArrivalsArg::Even => Arrivals::Even,
            ArrivalsArg::Poisson => Arrivals::Poisson,
        }
    }

    fn check(&self) -> Result<reqwest::Url> {
        let url = reqwest::Url::parse(&self.url).context("--url")?;
        ensure!(url.scheme() == "http", "--url must be http://");
        ensure!(
            matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]")),
            "--url must be a loopback address (127.0.0.1, localhost or [::1]); got {}",
            self.url
        );
        ensure!(self.tenants + self.noisy > 0, "there must be at least one tenant");
        ensure!(self.tenants + self.noisy <= 1000, "at most 1000 tenants");
        ensure!(self.rate > 0.0 && self.rate.is_finite(), "--rate must be positive");
        ensure!(self.burst_factor >= 1.0 && self.burst_factor <= 1000.0, "--burst-factor must be between 1 and 1000");
        ensure!(
            !self.duration.is_zero() && self.duration <= MAX_DURATION,
            "--duration must be positive and at most {MAX_DURATION:?}"
        );
        ensure!(self.path.starts_with('/'), "--path must start with /");
        Ok(url.join(&self.path)?)
    }
}

pub fn run(args: LoadArgs) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(drive(args))
}

/// Plans the run, sends it, then writes the results file and prints a summary per class.
async fn drive(args: LoadArgs) -> Result<()> {
    let target = args.check()?;
    let keys = signing_keys(&args.data_dir)?;
    let (burst, arrivals) = (args.burst(), args.arrivals());
    let plans = plan_tenants(&args, &keys, burst, arrivals)?;
    let tenants: Vec<(String, Class)> = plans.iter().map(|p| (p.name.clone(), p.class)).collect();
    let total: usize = plans.iter().map(|p| p.times.len()).sum();
    ensure!(
        total <= args.max_requests,
        "the schedule holds {total} requests, more than --max-requests {}",
        args.max_requests
    );
    let http = reqwest::Client::builder().timeout(args.timeout).build()?;
    let (senders, rx) = Senders::new(http, target);
    let (samples, elapsed) = send_all(plans, total, senders, rx, args.duration).await?;

    let config = run_config(&args, burst, arrivals, total);
    let doc = report::results(config, elapsed, burst, &tenants, &samples);
    std::fs::write(&args.out, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", args.out.display()))?;
    print_summary(&doc);
    println!("results in {}", args.out.display());
    Ok(())
}

/// The keys that sign the tenants' tokens: the running server's local secret, from the
/// environment or its data dir. A data dir without one is refused, since a new secret would
/// sign tokens the server rejects.
fn signing_keys(data_dir: &Path) -> Result<JwtKeys> {
    if std::env::var_os(secret::ENV).is_none() && !data_dir.join("jwt-secret").exists() {
        bail!("{} holds no local secret: point --data-dir at the running server's data dir", data_dir.display());
    }
    Ok(JwtKeys::from_secret(&secret::load_or_create(data_dir)?)?)
}

/// The compliant tenants, then the noisy ones, each with a token and a schedule seeded from
/// `--seed` and the tenant's place.
fn plan_tenants(args: &LoadArgs, keys: &JwtKeys, burst: Option<Burst>, arrivals: Arrivals) -> Result<Vec<TenantPlan>> {
    let classes =
        std::iter::repeat_n(Class::Compliant, args.tenants).chain(std::iter::repeat_n(Class::Noisy, args.noisy));
    let mut plans = Vec::new();
    for (i, class) in classes.enumerate() {
        let n = if class == Class::Compliant { i } else { i - args.tenants };
        let name = format!("{}-{}-{n}", args.tenant_prefix, class.name());
        let id = TenantId::parse(name.clone()).context("--tenant-prefix")?;
        let token = keys.issue(&id, args.duration + args.timeout + Duration::from_secs(3600));
        let b = if class == Class::Noisy { burst } else { None };
        let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        let times = plan::schedule(args.rate, b, args.duration, arrivals, seed);
        plans.push(TenantPlan { name, class, token, times });
    }
    Ok(plans)
}

/// The run's settings as the results file records them.
fn run_config(args: &LoadArgs, burst: Option<Burst>, arrivals: Arrivals, total: usize) -> serde_json::Value {
    json!({
        "url": args.url,
        "path": args.path,
        "compliant_tenants": args.tenants,
        "noisy_tenants": args.noisy,
        "rate_per_tenant": args.rate,
        "burst": burst.map(|b| json!({"factor": b.factor, "start_s": b.start.as_secs_f64(), "length_s": b.length.as_secs_f64()})),
        "duration_s": args.duration.as_secs_f64(),
        "timeout_ms": args.timeout.as_millis() as u64,
        "arrivals": match arrivals { Arrivals::Even => "even", Arrivals::Poisson => "poisson" },
        "seed": args.seed,
        "scheduled": total,
    })
}

/// One line per class: status counts and latency percentiles from the results document.
fn print_summary(doc: &serde_json::Value) {
    for class in ["compliant", "noisy"] {
        let c = &doc["classes"][class];
        println!(
            "{class:<10} sent {:>6}  2xx {:>6}  429 {:>6}  5xx {:>5}  timeouts {:>4}  errors {:>4}  p50 {:>7} ms  p99 {:>7} ms  max {:>7} ms",
            c["sent"], c["ok"], c["rate_limited"], c["server_errors"], c["timeouts"], c["transport_errors"], c["latency_ms"]["p50"], c["latency_ms"]["p99"], c["latency_ms"]["max"]
        );
    }
}
