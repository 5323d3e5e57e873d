//! The whole platform in one process, as `openqq up` runs it and as in-process tests start it.
//!
//! The API router is served on `--listen`; each consumer function gets an event-source-mapping
//! emulator over the event log, exactly as the MSK trigger would invoke it on AWS. [`start`]
//! returns once the API is listening; [`Running::stop`] stops accepting requests, lets in-flight
//! requests and batches finish and commit, and returns. Its log lines also go, as JSON, to the
//! data dir's capped log file (`openqq_telemetry::log_file`), which `openqq trace` reads.

use crate::remote::RemoteFunction;
use crate::settings::Settings;
use crate::Platform;
use anyhow::{Context, Result};
use aws_lambda_events::event::kafka::KafkaEvent;
use clap::{Args, Parser};
use openqq_api::{router, DownstreamConfig, PoolConfig, ServeConfig};
use openqq_core::{EventKind, LogRecord, PortError};
use openqq_runtime::kafka::Incoming;
use openqq_runtime::{BatchHandler, EventSourceMapping, FailedPartitions, MappingConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// `openqq up`'s settings: the platform's, and those only a process serving HTTP itself and
/// emulating the MSK trigger has (on AWS, API Gateway and the event source mappings hold them).
#[derive(Args, Clone)]
pub struct UpArgs {
    #[command(flatten)]
    pub platform: Settings,
    /// Address the API listens on (port 0 picks a free port; the URL is printed).
    #[arg(long, env = "OPENQQ_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address `GET /metrics` is served on, apart from the API (its metrics name tenants), or
    /// `off`; port 0 picks a free port (the URL is printed).
    #[arg(long, env = "OPENQQ_METRICS_LISTEN", default_value = "127.0.0.1:9464", value_parser = parse_metrics_listen)]
    pub metrics_listen: MetricsListen,
    /// Most records per consumer invocation.
    #[arg(long, env = "OPENQQ_BATCH_SIZE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch_size: u32,
    /// How long a partial batch waits for more records.
    #[arg(long, env = "OPENQQ_BATCH_WINDOW", default_value = "500ms", value_parser = humantime::parse_duration)]
    pub batch_window: Duration,
    /// Retries of a failed batch before its records go to the dead-letter topic.
    #[arg(long, env = "OPENQQ_MAX_RETRIES", default_value_t = 5)]
    pub max_retries: u32,
    /// And how long the batch must have been failing by then.
    #[arg(long, env = "OPENQQ_GIVE_UP_AFTER", default_value = "1m", value_parser = humantime::parse_duration)]
    pub give_up_after: Duration,
    /// Batches in flight per consumer function (on distinct partitions).
    #[arg(long, env = "OPENQQ_CONSUMER_CONCURRENCY", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub consumer_concurrency: u32,
    /// API requests in progress at once (default 2 × cores).
    #[arg(long, env = "OPENQQ_WORKERS")]
    pub workers: Option<usize>,
    /// API requests allowed to wait for a worker before new ones get 503.
    #[arg(long, env = "OPENQQ_QUEUE")]
    pub queue: Option<usize>,
    /// How long a request may wait for a pool worker before it gets 503.
    #[arg(long, env = "OPENQQ_QUEUE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub queue_timeout: Duration,
    /// How long a client may take to send a request's headers (idle keep-alive connections too).
    #[arg(long, env = "OPENQQ_HEADER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub header_timeout: Duration,
    /// HTTP connections open at once; more are answered 503 and closed.
    #[arg(long, env = "OPENQQ_MAX_CONNECTIONS", default_value_t = openqq_api::serve::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// HTTP connections open at once from one client address (an IPv6 /64); more are answered
    /// 429 and closed.
    #[arg(long, env = "OPENQQ_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = openqq_api::serve::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS)]
    pub max_connections_per_address: usize,
    /// How long an HTTP connection is kept: its first response after this carries
    /// `Connection: close` and ends it.
    #[arg(long, env = "OPENQQ_CONNECTION_LIFETIME", default_value = "10m", value_parser = humantime::parse_duration)]
    pub connection_lifetime: Duration,
    /// Invoke the consumer functions (design-job, validation, results) over the Lambda Invoke API
    /// at this URL, e.g. `cargo lambda watch`'s http://127.0.0.1:9000, instead of in process: the
    /// real Lambda binaries, driven by this trigger's batches, retries and partial-batch answers.
    #[arg(long, env = "OPENQQ_INVOKE")]
    pub invoke: Option<String>,
    /// Serve the API only: the consumer functions (design-job, validation, results) do not run,
    /// so accepted submissions wait in the log until an `openqq up` without this flag on the same
    /// data dir consumes them. For measuring the API on its own (docs/BENCHMARKS.md, 11).
    #[arg(long, env = "OPENQQ_API_ONLY", conflicts_with = "invoke")]
    pub api_only: bool,
    /// Development only: `POST /v1/dev/tokens` mints a bearer token for any tenant (the web UI
    /// offers it), so anyone who reaches the API can act as any tenant. Loopback `--listen` only.
    #[arg(long, env = "OPENQQ_DEV_TOKENS")]
    pub dev_tokens: bool,
    /// Dev only: every API request also waits this long on a simulated slow dependency, so
    /// overload experiments have something to bound (see `openqq_api::downstream`).
    #[arg(long, env = "OPENQQ_SIMULATED_DOWNSTREAM_LATENCY", hide = true, value_parser = humantime::parse_duration)]
    pub simulated_downstream_latency: Option<Duration>,
    /// Dev only: calls the simulated dependency serves at once (default: any number).
    #[arg(long, env = "OPENQQ_SIMULATED_DOWNSTREAM_CAPACITY", hide = true, requires = "simulated_downstream_latency")]
    pub simulated_downstream_capacity: Option<usize>,
    /// Where the schedules read the time, and the scheduler's wake-up: the system's clock unless
    /// an in-process test hands in a controllable one (not a flag).
    #[arg(skip)]
    pub schedule_clock: Option<openqq_api::schedules::ScheduleClock>,
}

/// Where `/metrics` is served: an address of its own, or nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsListen(pub Option<SocketAddr>);

fn parse_metrics_listen(s: &str) -> Result<MetricsListen, String> {
    match s.trim() {
        "off" => Ok(MetricsListen(None)),
        addr => addr
            .parse()
            .map(|a| MetricsListen(Some(a)))
            .map_err(|_| format!("{addr:?} is neither an address such as 127.0.0.1:9464 nor `off`")),
    }
}

#[derive(Parser)]
#[command(no_binary_name = true, name = "openqq up")]
struct UpParser {
    #[command(flatten)]
    up: UpArgs,
}

impl UpArgs {
    /// `openqq up`'s arguments from a list, as a test starting the platform in process gives them.
    pub fn from_args<I, T>(args: I) -> Result<Self>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        UpParser::try_parse_from(args)
            .map(|p| p.up)
            .map_err(|e| anyhow::anyhow!(crate::settings::explain::<UpParser>(e)))
    }

    /// Checks the front door's settings; each error names its setting.
    pub fn check(&self) -> Result<()> {
        if self.header_timeout.is_zero() {
            anyhow::bail!("--header-timeout (OPENQQ_HEADER_TIMEOUT) must be longer than 0 s");
        }
        if self.queue_timeout.is_zero() {
            anyhow::bail!("--queue-timeout (OPENQQ_QUEUE_TIMEOUT) must be longer than 0 s");
        }
        if self.max_connections == 0 {
            anyhow::bail!("--max-connections (OPENQQ_MAX_CONNECTIONS) must allow at least 1 connection");
        }
        if self.max_connections_per_address == 0 {
            anyhow::bail!(
                "--max-connections-per-address (OPENQQ_MAX_CONNECTIONS_PER_ADDRESS) must allow at least 1 connection"
            );
        }
        if self.connection_lifetime.is_zero() {
            anyhow::bail!("--connection-lifetime (OPENQQ_CONNECTION_LIFETIME) must be longer than 0 s");
        }
        if self.platform.auth == crate::settings::AuthArg::ApiGateway {
            anyhow::bail!(
                "--auth api-gateway (OPENQQ_AUTH) is for the API function behind API Gateway's JWT authorizer; \
                 openqq up serves requests itself, so it verifies each token (--auth token)"
            );
        }
        if self.dev_tokens && !self.listen.ip().is_loopback() {
            anyhow::bail!(
                "--dev-tokens (OPENQQ_DEV_TOKENS) lets anyone who reaches the API mint tokens for any tenant: \
                 it needs a loopback --listen address (127.0.0.1 or ::1), not {}",
                self.listen
            );
        }
        if let MetricsListen(Some(metrics)) = self.metrics_listen {
            if metrics == self.listen && metrics.port() != 0 {
                anyhow::bail!(
                    "--metrics-listen (OPENQQ_METRICS_LISTEN) must be another address than --listen ({metrics}): the \
                     metrics name tenants and are served apart from the API"
                );
            }
        }
        if let Some(url) = &self.invoke {
            crate::flags::check_endpoint("--invoke (OPENQQ_INVOKE)", url)?;
        }
        self.platform.check()?;
        crate::data_dir::check_open_files(self.max_connections)
    }

    /// The mapping of `kind`'s topic to `function`: in the batch lane (`Topics::lane`, the
    /// consumer groups under [`crate::BATCH_LANE_GROUP_PREFIX`]) when `batch`; its consumer group
    /// as [`crate::consumer_group`] names it.
    fn mapping(&self, platform: &Platform, kind: EventKind, batch: bool, function: &str) -> MappingConfig {
        let mut cfg = MappingConfig::new(platform.topics.lane(kind, batch), platform.topics.dead_letter());
        cfg.batch_size = self.batch_size as usize;
        cfg.batch_window = self.batch_window;
        cfg.max_retries = self.max_retries;
        cfg.give_up_after = self.give_up_after;
        cfg.concurrency = self.consumer_concurrency as usize;
        cfg.group = Some(format!("{}{}", self.platform.topic_prefix, crate::consumer_group(function, kind, batch)));
        cfg
    }

    fn pool(&self) -> PoolConfig {
        let defaults = PoolConfig::default();
        let simulated_downstream = self.simulated_downstream_latency.map(|latency| {
            tracing::warn!(?latency, capacity = ?self.simulated_downstream_capacity, "A simulated slow downstream is on: every API request is delayed.");
            DownstreamConfig { latency, capacity: self.simulated_downstream_capacity }
        });
        PoolConfig {
            workers: self.workers.unwrap_or(defaults.workers),
            queue: self.queue.unwrap_or(defaults.queue),
            queue_timeout: self.queue_timeout,
            simulated_downstream,
        }
    }
}

/// How often the scheduler looks for due schedules: fires run within about this of their time.
const SCHEDULER_EVERY: Duration = Duration::from_secs(1);

/// How long one invocation of a remote function may take (Lambda's own limit is 15 minutes; a
/// consumer batch here is bounded by the validation budget long before).
const INVOKE_TIMEOUT: Duration = Duration::from_secs(120);

/// The platform, serving.
pub struct Running {
    /// Where the API listens.
    pub addr: SocketAddr,
    /// Where `/metrics` is served, unless `--metrics-listen off`.
    pub metrics_addr: Option<SocketAddr>,
    /// The parts it runs on (the store, the log, …), for tests to look inside.
    pub platform: Arc<Platform>,
    stop: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    metrics_server: Option<JoinHandle<std::io::Result<()>>>,
    mappings: Vec<JoinHandle<()>>,
    deliveries: openqq_adapters::DeliveryWorker,
    /// The embedded log's writer lock, held while this runs (none when the log is on Kafka).
    _writer: Option<openqq_adapters::embedded::WriterLock>,
}

/// Builds the platform from `args` and starts serving: the API on `--listen`, one emulated
/// event source mapping per consumer function, the scheduler, and the webhook deliveries.
pub async fn start(args: UpArgs) -> Result<Running> {
    args.check()?;
    // The recorder first: anything counted before it exists (a record dead-lettered as soon as
    // the consumers start) would be lost.
    let metrics = openqq_telemetry::metrics("openqq");
    let platform = Arc::new(Platform::build(args.platform.clone()).await?);
    // Every line from here on also goes to the data dir's capped JSON log, which `openqq trace`
    // reads. `openqq up` keeps its log and its token secret there even where every backend is
    // elsewhere, so it makes the data dir (private) itself where the platform opened nothing in it.
    if !platform.made_data_dir() {
        crate::data_dir::create_private(&args.platform.data_dir)?;
    }
    // The embedded log has one writer: this process, until it ends.
    let writer = match args.platform.kafka.selected() {
        true => None,
        false => Some(writer_lock(&args.platform.data_dir)?),
    };
    let log_file = openqq_telemetry::log_file::open(&args.platform.data_dir)
        .with_context(|| format!("opening the log file in {}", args.platform.data_dir.display()))?;
    tracing::info!(log_file = %log_file.display(), "Logging as JSON lines to the data dir.");
    let keys = platform.local_keys()?;
    let (stop, stop_rx) = watch::channel(false);
    let mut mappings = Vec::new();
    // Each consumer function reads its topic, and its twin in the batch lane under a consumer
    // group of its own; the batch function reads the batch topics.
    let consumed: Vec<(EventKind, bool)> = if args.api_only {
        tracing::warn!("--api-only: the consumer functions do not run; submissions wait in the log.");
        Vec::new()
    } else {
        let twins = args.platform.batch_lane == crate::settings::Bulkheads::On;
        let lanes = crate::CONSUMED.iter().flat_map(|&k| [(k, false), (k, true)]).filter(|&(_, b)| twins || !b);
        lanes.chain(crate::BATCH_CONSUMED.iter().map(|&k| (k, false))).collect()
    };
    let deliveries = platform.start_deliveries()?;
    let sqlite_heap = openqq_adapters::embedded::bound_sqlite_heap();
    tracing::debug!(bytes = sqlite_heap, "SQLite's heap is held to its page caches' sizes.");
    tokio::spawn(sample_sqlite_memory(stop_rx.clone()));
    for (kind, batch) in consumed {
        let b = &platform.backends;
        let function = platform.handler(kind)?;
        let name = function.name().to_owned();
        let handler = match &args.invoke {
            Some(url) => {
                tracing::info!(function = %name, url, "The function is invoked over the Lambda Invoke API.");
                Arc::new(RemoteFunction::new(url, function, INVOKE_TIMEOUT)) as Arc<dyn BatchHandler>
            }
            None => function,
        };
        let handler = Arc::new(WakesDeliveries { inner: handler, wake: deliveries.waker() });
        let mapping = args.mapping(&platform, kind, batch, &name);
        let esm = EventSourceMapping::new(b.source.clone(), b.log.clone(), handler, mapping).await?;
        mappings.push(tokio::spawn(esm.run(stop_rx.clone())));
    }
    let clock = args.schedule_clock.clone().unwrap_or_default();
    let state = platform.api_state(keys).dev_tokens(args.dev_tokens).schedule_clock(clock.clone()).build();
    // The scheduler fires due schedules every second, and at once when a schedule changes (with
    // --api-only too: it submits batches as the API does, which then wait in the log).
    let scheduler = openqq_api::schedules::runner::Scheduler::new(state.clone());
    let mut stopped = stop_rx.clone();
    let scheduler_stop = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    mappings.push(tokio::spawn(scheduler.run(SCHEDULER_EVERY, clock.wake.clone(), scheduler_stop)));
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let serve = ServeConfig {
        header_timeout: args.header_timeout,
        max_connections: args.max_connections,
        max_connections_per_address: args.max_connections_per_address,
        connection_lifetime: args.connection_lifetime,
        ..ServeConfig::default()
    };
    let mut http_stop = stop_rx.clone();
    let server = tokio::spawn(openqq_api::serve::serve(listener, router(state, args.pool()), serve, async move {
        let _ = http_stop.wait_for(|s| *s).await;
    }));
    let (metrics_addr, metrics_server) = match serve_metrics(args.metrics_listen, metrics, stop_rx.clone()).await? {
        Some((addr, server)) => (Some(addr), Some(server)),
        None => (None, None),
    };
    Ok(Running { addr, metrics_addr, platform, stop, server, metrics_server, mappings, deliveries, _writer: writer })
}

/// Serves `/metrics` on `listen` until the platform stops: a listener apart from the API's, so
/// what the metrics say about tenants reaches only whoever reaches that address.
async fn serve_metrics(
    listen: MetricsListen,
    handle: metrics_exporter_prometheus::PrometheusHandle,
    mut stop: watch::Receiver<bool>,
) -> Result<Option<(SocketAddr, JoinHandle<std::io::Result<()>>)>> {
    let MetricsListen(Some(listen)) = listen else {
        tracing::info!("--metrics-listen off: no /metrics is served.");
        return Ok(None);
    };
    if !listen.ip().is_loopback() {
        tracing::warn!(%listen, "Metrics, which name tenants, are served beyond this machine: make sure only the scraper reaches the address.");
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen} for --metrics-listen (OPENQQ_METRICS_LISTEN; `off` serves none)"))?;
    let addr = listener.local_addr()?;
    // A scraper or two: a small ceiling, and the API's other connection bounds.
    let cfg = ServeConfig { max_connections: 16, max_connections_per_address: 16, ..ServeConfig::default() };
    let page = openqq_api::observe::metrics_page(handle);
    let server = tokio::spawn(openqq_api::serve::serve(listener, page, cfg, async move {
        let _ = stop.wait_for(|s| *s).await;
    }));
    Ok(Some((addr, server)))
}

/// The embedded log's writer lock in `data_dir`, or an error naming who may hold it.
pub fn writer_lock(data_dir: &std::path::Path) -> Result<openqq_adapters::embedded::WriterLock> {
    openqq_adapters::embedded::WriterLock::try_acquire(data_dir)
        .with_context(|| format!("locking the embedded log in {}", data_dir.display()))?
        .with_context(|| {
            format!(
                "the embedded log in {} is open in another process (`openqq up`, or `openqq dead-letters replay`); \
                 it has one writer: stop that process and try again (a replay's records are handled when \
                 `openqq up` starts)",
                data_dir.display()
            )
        })
}

/// Samples SQLite's heap for `/metrics` every 5 seconds (the recorder's own upkeep interval)
/// until the platform stops.
async fn sample_sqlite_memory(mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = tick.tick() => openqq_adapters::embedded::record_sqlite_memory(),
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// A consumer function that wakes the webhook worker after each batch: the batch's store writes
/// may have queued deliveries (in the same write as their feed entries), which then go out at
/// once rather than at the worker's next poll.
struct WakesDeliveries {
    inner: Arc<dyn BatchHandler>,
    wake: Arc<tokio::sync::Notify>,
}

#[async_trait::async_trait]
impl BatchHandler for WakesDeliveries {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn handle(&self, event: KafkaEvent) -> Result<(), FailedPartitions> {
        let handled = self.inner.handle(event).await;
        self.wake.notify_one();
        handled
    }

    async fn handle_records(&self, batch: &[LogRecord]) -> Result<(), FailedPartitions> {
        let handled = self.inner.handle_records(batch).await;
        self.wake.notify_one();
        handled
    }

    async fn dead_lettered(&self, records: &[Incoming], reason: &str) -> Result<(), PortError> {
        self.inner.dead_lettered(records, reason).await
    }
}

impl Running {
    /// Stops accepting requests; in-flight requests finish (live streams get the grace period),
    /// then the consumers finish and commit their batches, then the webhook attempts in flight.
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(true);
        self.server.await?.context("serving HTTP")?;
        if let Some(metrics) = self.metrics_server {
            metrics.await?.context("serving /metrics")?;
        }
        for m in self.mappings {
            m.await?;
        }
        // Attempts in flight finish (each within its timeout); the rest wait in the store.
        self.deliveries.stop().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openqq_up_refuses_to_trust_a_gateway_it_does_not_have() {
        let args = UpArgs::from_args(["--auth", "api-gateway"]).unwrap();
        let err = args.check().unwrap_err().to_string();
        assert!(err.contains("--auth api-gateway (OPENQQ_AUTH)"), "{err}");
        UpArgs::from_args(["--auth", "token"]).unwrap().check().unwrap();
    }

    #[test]
    fn metrics_are_served_on_loopback_apart_from_the_api_by_default_or_not_at_all() {
        let default = UpArgs::from_args(Vec::<String>::new()).unwrap();
        assert_eq!(default.metrics_listen, MetricsListen(Some("127.0.0.1:9464".parse().unwrap())));
        assert_eq!(UpArgs::from_args(["--metrics-listen", "off"]).unwrap().metrics_listen, MetricsListen(None));
        let err = UpArgs::from_args(["--metrics-listen", "everywhere"]).err().unwrap().to_string();
        assert!(err.contains("OPENQQ_METRICS_LISTEN"), "{err}");
        let same = UpArgs::from_args(["--listen", "127.0.0.1:8080", "--metrics-listen", "127.0.0.1:8080"]).unwrap();
        assert!(same.check().unwrap_err().to_string().contains("another address than --listen"));
    }

    #[test]
    fn api_only_runs_no_consumer_so_it_cannot_invoke_remote_ones() {
        assert!(UpArgs::from_args(["--api-only"]).unwrap().api_only);
        assert!(!UpArgs::from_args(Vec::<String>::new()).unwrap().api_only);
        let err = UpArgs::from_args(["--api-only", "--invoke", "http://127.0.0.1:9000"]).err().unwrap().to_string();
        assert!(err.contains("--invoke"), "{err}");
    }
}
