//! `openqq up`: the whole platform in one process.
//!
//! The API router is served on `--listen`; each consumer function gets an event-source-mapping
//! emulator over the event log (embedded, or Kafka with `--kafka-brokers` or
//! `--msk-cluster-arn`, see `kafka.rs`), exactly as the MSK trigger would invoke it on AWS. The
//! design store is embedded, or on DynamoDB with `--dynamodb-table`.
//! SIGTERM or Ctrl-C stops accepting requests, lets the in-flight batches finish and commit, and
//! exits 0.

use crate::secret;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use openqq_adapters::{Backends, Durability};
use openqq_api::limit::{ByteQuotaSpec, QuotaSpec};
use openqq_api::{router, AppState, DownstreamConfig, JwtKeys, LimitPolicy, PoolConfig, ServeConfig};
use openqq_api::{TenantGuard, TenantLimits};
use openqq_core::{EventKind, Topics};
use openqq_runtime::{BatchHandler, Consumer, EventSourceMapping, MappingConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Json,
    Pretty,
}

/// Settings of the local runner; every flag has an environment variable too.
#[derive(Args, Clone)]
pub struct UpArgs {
    /// Where the embedded log, store and local secret live.
    #[arg(long, env = "OPENQQ_DATA_DIR", default_value = ".openqq")]
    data_dir: PathBuf,
    /// Address the API listens on (port 0 picks a free port; the URL is printed).
    #[arg(long, env = "OPENQQ_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Partitions per topic; fixed for the life of a data dir.
    #[arg(long, env = "OPENQQ_PARTITIONS", default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=1024))]
    partitions: u32,
    /// Most records per consumer invocation.
    #[arg(long, env = "OPENQQ_BATCH_SIZE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batch_size: u32,
    /// How long a partial batch waits for more records.
    #[arg(long, env = "OPENQQ_BATCH_WINDOW", default_value = "500ms", value_parser = humantime::parse_duration)]
    batch_window: Duration,
    /// Retries of a failed batch before its records go to the dead-letter topic.
    #[arg(long, env = "OPENQQ_MAX_RETRIES", default_value_t = 5)]
    max_retries: u32,
    /// Batches in flight per consumer function (on distinct partitions).
    #[arg(long, env = "OPENQQ_CONSUMER_CONCURRENCY", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    consumer_concurrency: u32,
    /// How long one design's validation may take; past it the design fails with a
    /// VALIDATION_BUDGET_EXCEEDED finding instead of holding its partition.
    #[arg(long, env = openqq_validation::BUDGET_ENV, default_value = "5s", value_parser = openqq_validation::parse_budget)]
    validation_budget: Duration,
    /// Default per-tenant limit, COUNT/WINDOW.
    #[arg(long, env = "OPENQQ_RATE_LIMIT", default_value = "100/1s")]
    rate_limit: QuotaSpec,
    /// Per-tenant overrides, one `TENANT COUNT/WINDOW` per line; reloaded when the file changes.
    #[arg(long, env = "OPENQQ_RATE_LIMITS")]
    rate_limits: Option<PathBuf>,
    /// Use Redis (or ElastiCache) for the limiter, e.g. redis://127.0.0.1:6379.
    #[arg(long, env = "OPENQQ_REDIS_URL")]
    redis_url: Option<String>,
    /// How long a limiter decision may wait for Redis before the Redis-down policy applies.
    #[arg(long, env = "OPENQQ_REDIS_TIMEOUT", default_value = "50ms", value_parser = humantime::parse_duration)]
    redis_timeout: Duration,
    /// While Redis is down, reject with 503 instead of limiting in process.
    #[arg(long, env = "OPENQQ_REDIS_FAIL_CLOSED")]
    redis_fail_closed: bool,
    /// API instances sharing the Redis limit; while Redis is down each admits limit ÷ instances.
    #[arg(long, env = "OPENQQ_INSTANCES", default_value_t = 1)]
    instances: u32,
    /// Signed webhooks per tenant: one `TENANT URL SECRET` per line (SECRET is `whsec_<base64>`).
    #[arg(long, env = "OPENQQ_WEBHOOKS")]
    webhooks: Option<PathBuf>,
    /// How long one webhook delivery may take.
    #[arg(long, env = "OPENQQ_WEBHOOK_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    webhook_timeout: Duration,
    /// Tries per webhook delivery (with exponential backoff from 0.5 s).
    #[arg(long, env = "OPENQQ_WEBHOOK_ATTEMPTS", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10))]
    webhook_attempts: u32,
    /// API requests in progress at once (default 2 × cores).
    #[arg(long, env = "OPENQQ_WORKERS")]
    workers: Option<usize>,
    /// API requests allowed to wait for a worker before new ones get 503.
    #[arg(long, env = "OPENQQ_QUEUE")]
    queue: Option<usize>,
    /// Dev only: every API request also waits this long on a simulated slow dependency, so
    /// overload experiments have something to bound (see `openqq_api::downstream`).
    #[arg(long, env = "OPENQQ_SIMULATED_DOWNSTREAM_LATENCY", hide = true, value_parser = humantime::parse_duration)]
    simulated_downstream_latency: Option<Duration>,
    /// Dev only: calls the simulated dependency serves at once (default: any number).
    #[arg(long, env = "OPENQQ_SIMULATED_DOWNSTREAM_CAPACITY", hide = true, requires = "simulated_downstream_latency")]
    simulated_downstream_capacity: Option<usize>,
    /// Largest request body, in bytes.
    #[arg(long, env = "OPENQQ_MAX_BODY_BYTES", default_value_t = openqq_api::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// How long a client may take to send a request's headers (idle keep-alive connections too).
    #[arg(long, env = "OPENQQ_HEADER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: Duration,
    /// How long a request body may take to arrive in full; 408 after it.
    #[arg(long, env = "OPENQQ_BODY_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    body_timeout: Duration,
    /// HTTP connections open at once; more are answered 503 and closed.
    #[arg(long, env = "OPENQQ_MAX_CONNECTIONS", default_value_t = openqq_api::serve::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Requests of one tenant in progress at once (body being read, queued or running); 429 above.
    #[arg(long, env = "OPENQQ_TENANT_CONCURRENCY", default_value_t = openqq_api::tenant_guard::DEFAULT_CONCURRENCY)]
    tenant_concurrency: usize,
    /// Live streams (`GET /v1/stream`) one tenant may hold open; 429 above.
    #[arg(long, env = "OPENQQ_TENANT_STREAMS", default_value_t = openqq_api::tenant_guard::DEFAULT_STREAMS)]
    tenant_streams: usize,
    /// Request-body bytes per tenant per window, SIZE/WINDOW (B, KiB, MiB, GiB); 429 above.
    #[arg(long, env = "OPENQQ_BYTE_LIMIT", default_value = "8MiB/10s")]
    byte_limit: ByteQuotaSpec,
    /// How long a request may wait for a pool worker before it gets 503.
    #[arg(long, env = "OPENQQ_QUEUE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    queue_timeout: Duration,
    /// Fsync every commit (survives power loss, not just a killed process).
    #[arg(long, env = "OPENQQ_FSYNC")]
    fsync: bool,
    /// Embedded log: records older than this, once every consumer group has read them, are deleted.
    #[arg(long, env = "OPENQQ_LOG_RETENTION", default_value = "7d", value_parser = humantime::parse_duration)]
    log_retention: Duration,
    /// Embedded log: how long dead letters are kept (nothing consumes them; an operator reads them).
    #[arg(long, env = "OPENQQ_DEAD_LETTER_RETENTION", default_value = "30d", value_parser = humantime::parse_duration)]
    dead_letter_retention: Duration,
    /// Reader connections of the embedded store (default one per core, two to eight).
    #[arg(long, env = "OPENQQ_STORE_READERS")]
    store_readers: Option<usize>,
    /// What one tenant may keep in the store (reports and timelines), e.g. 1GiB; 403 above.
    #[arg(long, env = "OPENQQ_TENANT_STORAGE", default_value = "1GiB", value_parser = openqq_api::quota::parse_size)]
    tenant_storage: u64,
    /// Designs one tenant may have; new ones get 403 above (revisions still go through).
    #[arg(long, env = "OPENQQ_TENANT_DESIGNS", default_value_t = openqq_api::quota::DEFAULT_TENANT_DESIGNS)]
    tenant_designs: u64,
    #[command(flatten)]
    jwt: crate::token::JwtRuleArgs,
    #[command(flatten)]
    kafka: openqq_runtime::kafka_flags::KafkaArgs,
    #[command(flatten)]
    dynamo: openqq_runtime::dynamo_flags::DynamoArgs,
    /// Topic name prefix; consumer groups carry it too.
    #[arg(long, env = "OPENQQ_TOPIC_PREFIX", default_value = "")]
    topic_prefix: String,
    #[arg(long, env = "OPENQQ_LOG_FORMAT", value_enum, default_value = "pretty")]
    log_format: LogFormat,
}

pub fn run(args: UpArgs) -> Result<()> {
    openqq_telemetry::init_logs(match args.log_format {
        LogFormat::Json => openqq_telemetry::LogFormat::Json,
        LogFormat::Pretty => openqq_telemetry::LogFormat::Pretty,
    });
    // Everything this process creates (data dir, store, log, secret, their -wal/-shm siblings)
    // is the owner's alone, before any of it is created.
    crate::data_dir::owner_only();
    front_door(&args)?;
    storage(&args)?;
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(args))
}

/// The per-tenant limits the flags ask for.
fn tenant_limits(args: &UpArgs) -> TenantLimits {
    TenantLimits {
        concurrency: args.tenant_concurrency,
        streams: args.tenant_streams,
        body_timeout: args.body_timeout,
        bytes: args.byte_limit.0,
    }
}

/// Checks the storage settings before anything is opened; each error names its setting.
fn storage(args: &UpArgs) -> Result<()> {
    if args.log_retention.is_zero() {
        anyhow::bail!("--log-retention (OPENQQ_LOG_RETENTION) must be longer than 0 s");
    }
    if args.dead_letter_retention.is_zero() {
        anyhow::bail!("--dead-letter-retention (OPENQQ_DEAD_LETTER_RETENTION) must be longer than 0 s");
    }
    if args.store_readers.is_some_and(|n| !(1..=64).contains(&n)) {
        anyhow::bail!("--store-readers (OPENQQ_STORE_READERS) must be between 1 and 64");
    }
    storage_limits(args).check().map_err(anyhow::Error::msg)
}

fn storage_limits(args: &UpArgs) -> openqq_api::quota::StorageLimits {
    openqq_api::quota::StorageLimits { bytes: args.tenant_storage, designs: args.tenant_designs }
}

/// The embedded backends' retention and readers, as the flags ask.
fn embedded_options(args: &UpArgs, topics: &Topics) -> openqq_adapters::embedded::EmbeddedOptions {
    let mut retention = openqq_adapters::embedded::Retention::days(7);
    retention.default = args.log_retention;
    retention.per_topic.insert(topics.dead_letter(), args.dead_letter_retention);
    openqq_adapters::embedded::EmbeddedOptions { retention: Some(retention), store_readers: args.store_readers }
}

/// Checks the front door's settings before anything is opened; each error names its setting.
fn front_door(args: &UpArgs) -> Result<()> {
    if args.header_timeout.is_zero() {
        anyhow::bail!("--header-timeout (OPENQQ_HEADER_TIMEOUT) must be longer than 0 s");
    }
    if args.queue_timeout.is_zero() {
        anyhow::bail!("--queue-timeout (OPENQQ_QUEUE_TIMEOUT) must be longer than 0 s");
    }
    if args.max_connections == 0 {
        anyhow::bail!("--max-connections (OPENQQ_MAX_CONNECTIONS) must allow at least 1 connection");
    }
    if args.max_body_bytes == 0 || u32::try_from(args.max_body_bytes).is_err() {
        anyhow::bail!("--max-body-bytes (OPENQQ_MAX_BODY_BYTES) must be between 1 byte and 4 GiB");
    }
    tenant_limits(args).check(args.max_body_bytes).map_err(anyhow::Error::msg)?;
    crate::data_dir::check_open_files(args.max_connections)
}

fn mapping(args: &UpArgs, topics: &Topics, kind: EventKind) -> MappingConfig {
    let mut cfg = MappingConfig::new(topics.of(kind), topics.dead_letter());
    cfg.batch_size = args.batch_size as usize;
    cfg.batch_window = args.batch_window;
    cfg.max_retries = args.max_retries;
    cfg.concurrency = args.consumer_concurrency as usize;
    cfg.group_prefix = args.topic_prefix.clone();
    cfg
}

async fn serve(args: UpArgs) -> Result<()> {
    let topics = Topics::new(args.topic_prefix.clone());
    // Kafka flags are checked (and an MSK cluster's brokers looked up) before anything is opened.
    let kafka = kafka_settings(&args, &topics).await?;
    let dynamo = openqq_runtime::dynamo_flags::settings(&args.dynamo)?;
    crate::data_dir::create_private(&args.data_dir)?;
    let durability = if args.fsync { Durability::Power } else { Durability::Process };
    let backends =
        Backends::embedded_with(&args.data_dir, args.partitions, durability, &embedded_options(&args, &topics))
            .with_context(|| format!("opening the data dir {}", args.data_dir.display()))?;
    let backends = openqq_runtime::kafka_flags::apply(backends, kafka).await?;
    // The store on DynamoDB (table created against a local endpoint, required on AWS).
    let backends = openqq_runtime::dynamo_flags::apply(backends, dynamo).await?;
    let keys =
        JwtKeys::with_rules(&secret::load_or_create(&args.data_dir)?, args.jwt.rules()).map_err(anyhow::Error::msg)?;
    let metrics = openqq_telemetry::metrics("openqq");
    let notifier: Arc<dyn openqq_core::Notifier> = match &args.webhooks {
        Some(path) => {
            let endpoints = crate::webhooks::load(path)?;
            tracing::info!(tenants = endpoints.len(), "Signed webhooks are configured.");
            let hooks =
                openqq_adapters::WebhookNotifier::start(endpoints, args.webhook_timeout, args.webhook_attempts)?;
            Arc::new(openqq_adapters::FanoutNotifier(vec![backends.notifier(), hooks]))
        }
        None => backends.notifier(),
    };

    let consumers: Vec<(EventKind, Arc<dyn BatchHandler>)> = vec![
        (
            EventKind::DesignSubmitted,
            Arc::new(Consumer::new(
                openqq_design_job::DesignJob { store: backends.store.clone() },
                backends.log.clone(),
                backends.store.clone(),
                topics.clone(),
            )),
        ),
        (
            EventKind::ValidationRequested,
            Arc::new(Consumer::new(
                openqq_validation::Validation {
                    store: backends.store.clone(),
                    objects: backends.objects.clone(),
                    budget: args.validation_budget,
                },
                backends.log.clone(),
                backends.store.clone(),
                topics.clone(),
            )),
        ),
        (
            EventKind::ValidationFinished,
            Arc::new(Consumer::new(
                openqq_results::Results { store: backends.store.clone(), notifier },
                backends.log.clone(),
                backends.store.clone(),
                topics.clone(),
            )),
        ),
    ];
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut mappings = Vec::new();
    for (kind, handler) in consumers {
        let esm = EventSourceMapping::new(
            backends.source.clone(),
            backends.log.clone(),
            handler,
            mapping(&args, &topics, kind),
        )
        .await?;
        mappings.push(tokio::spawn(esm.run(stop_rx.clone())));
    }

    let limiter = match &args.redis_url {
        Some(url) => crate::limits::redis(url, args.redis_timeout, args.redis_fail_closed, args.instances).await?,
        None => backends.limiter.clone(),
    };
    let limits = Arc::new(LimitPolicy::new(args.rate_limit.0));
    if let Some(path) = &args.rate_limits {
        crate::limits::watch_overrides(limits.clone(), path.clone())?;
    }
    let defaults = PoolConfig::default();
    let simulated_downstream = args.simulated_downstream_latency.map(|latency| {
        tracing::warn!(?latency, capacity = ?args.simulated_downstream_capacity, "A simulated slow downstream is on: every API request is delayed.");
        DownstreamConfig { latency, capacity: args.simulated_downstream_capacity }
    });
    let pool = PoolConfig {
        workers: args.workers.unwrap_or(defaults.workers),
        queue: args.queue.unwrap_or(defaults.queue),
        queue_timeout: args.queue_timeout,
        simulated_downstream,
    };
    let state = AppState {
        log: backends.log.clone(),
        store: backends.store.clone(),
        objects: backends.objects.clone(),
        limiter,
        limits,
        keys: Arc::new(keys),
        topics,
        metrics: Some(metrics),
        max_body_bytes: args.max_body_bytes,
        live: Some(backends.notifier.clone()),
        tenants: TenantGuard::new(tenant_limits(&args)),
        quota: Arc::new(openqq_api::quota::StorageQuota::new(storage_limits(&args))),
    };
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let mut http_stop = stop_rx.clone();
    let serve = ServeConfig {
        header_timeout: args.header_timeout,
        max_connections: args.max_connections,
        ..ServeConfig::default()
    };
    let server = tokio::spawn(openqq_api::serve::serve(listener, router(state, pool), serve, async move {
        let _ = http_stop.wait_for(|s| *s).await;
    }));
    println!("OpenQQuantify is up at http://{addr} (data in {})", args.data_dir.display());
    tracing::info!(%addr, data_dir = %args.data_dir.display(), "The platform is up.");

    shutdown_signal().await;
    tracing::info!("Shutting down: finishing in-flight requests and batches.");
    let _ = stop_tx.send(true);
    // In-flight requests finish; long-lived ones (live streams) get the grace period, then close.
    server.await?.context("serving HTTP")?;
    for m in mappings {
        m.await?;
    }
    tracing::info!("Stopped cleanly.");
    Ok(())
}

async fn kafka_settings(args: &UpArgs, topics: &Topics) -> Result<Option<openqq_runtime::kafka_flags::KafkaSettings>> {
    openqq_runtime::kafka_flags::settings(&args.kafka, args.partitions, topics.all()).await
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
