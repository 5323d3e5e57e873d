//! The one place the platform is assembled: [`Platform::build`] turns [`Settings`] into every
//! backend (log, store, objects), the limiter and the per-tenant policies; the API state, the
//! three consumer handlers and the webhook deliveries are then made from those. `openqq up`, the four Lambda
//! functions and in-process tests all go through here, so what runs on AWS is what runs locally.

use crate::settings::Settings;
use anyhow::{Context, Result};
use openqq_adapters::{Backends, Durability};
use openqq_api::{AppState, JwtKeys, LimitPolicy, TenantGuard};
use openqq_core::{EventKind, RateLimiter, Topics};
use openqq_runtime::{BatchHandler, Consumer, RecordHandler};
use std::sync::Arc;

/// The platform's parts, built once per process (once per cold start on Lambda).
pub struct Platform {
    pub settings: Settings,
    pub topics: Topics,
    pub backends: Backends,
    /// The per-tenant request (and byte) limiter: Redis when configured, else in process.
    pub limiter: Arc<dyn RateLimiter>,
    /// The request quota per tenant, with overrides from `--rate-limits`.
    pub limits: Arc<LimitPolicy>,
}

/// How often an idle event stream reads the store for what was applied since.
pub const FEED_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The topics the consumer functions read, in pipeline order.
pub const CONSUMED: [EventKind; 3] =
    [EventKind::DesignSubmitted, EventKind::ValidationRequested, EventKind::ValidationFinished];

impl Platform {
    /// Builds every backend `settings` asks for. Settings are checked (and an MSK cluster's
    /// brokers looked up) before anything is opened; each failure names its setting.
    pub async fn build(settings: Settings) -> Result<Self> {
        settings.check()?;
        let topics = settings.topics();
        let kafka = crate::flags::kafka::settings(&settings.kafka, settings.partitions, topics.all()).await?;
        let dynamo = crate::flags::dynamo::settings(&settings.dynamo)?;
        let s3 = crate::flags::s3::settings(&settings.s3)?;
        crate::flags::limiter::settings(&settings.limiter)?;
        crate::data_dir::create_private(&settings.data_dir)?;
        let durability = if settings.fsync { Durability::Power } else { Durability::Process };
        let backends =
            Backends::embedded_with(&settings.data_dir, settings.partitions, durability, &embedded_options(&settings))
                .with_context(|| format!("opening the data dir {}", settings.data_dir.display()))?;
        let backends = crate::flags::kafka::apply(backends, kafka).await?;
        // The store on DynamoDB (table created against a local endpoint, required on AWS).
        let backends = crate::flags::dynamo::apply(backends, dynamo).await?;
        // Objects (full reports, large netlists, uploads) in S3 (bucket created only locally).
        let backends = crate::flags::s3::apply(backends, s3).await?;
        let limiter = limiter(&settings, &backends).await?;
        let limits = Arc::new(LimitPolicy::new(settings.rate_limit.0));
        if let Some(path) = &settings.rate_limits {
            crate::overrides::watch_overrides(limits.clone(), path.clone())?;
        }
        Ok(Self { settings, topics, backends, limiter, limits })
    }

    /// The API's state. `keys` verify bearer tokens; `metrics` renders `/metrics` where metrics
    /// are scraped (absent on Lambda).
    pub fn api_state(&self, keys: JwtKeys, metrics: Option<metrics_exporter_prometheus::PrometheusHandle>) -> AppState {
        let s = &self.settings;
        AppState {
            log: self.backends.log.clone(),
            store: self.backends.store.clone(),
            accepted: openqq_api::group_commit::markers(self.backends.store.clone()),
            objects: self.backends.objects.clone(),
            limiter: self.limiter.clone(),
            limits: self.limits.clone(),
            keys: Arc::new(keys),
            identity: s.auth.into(),
            topics: self.topics.clone(),
            metrics,
            max_body_bytes: s.max_body_bytes,
            feed_poll: FEED_POLL,
            webhooks_allow_private: s.webhooks_allow_private,
            tenants: TenantGuard::new(s.tenant_limits()),
            quota: Arc::new(openqq_api::quota::StorageQuota::new(s.storage_limits())),
            dev_tokens: false,
        }
    }

    /// How webhook deliveries are sent: the settings' timeout, schedule and address rule. A
    /// claim lasts twice the timeout and 5 s more, so a delivery cut off by a crash is tried
    /// again soon after the restart.
    pub fn delivery_settings(&self) -> openqq_adapters::DeliverySettings {
        let s = &self.settings;
        openqq_adapters::DeliverySettings {
            timeout: s.webhook_timeout,
            lease: s.webhook_timeout * 2 + std::time::Duration::from_secs(5),
            schedule: s.webhook_schedule(),
            allow_private: s.webhooks_allow_private,
            ..Default::default()
        }
    }

    /// Starts sending the webhook deliveries the store queues, on the current Tokio runtime.
    pub fn start_deliveries(&self) -> Result<openqq_adapters::DeliveryWorker> {
        let store: Arc<dyn openqq_core::WebhookStore> = self.backends.store.clone();
        Ok(openqq_adapters::DeliveryWorker::start(store, self.delivery_settings())?)
    }

    /// The keys of `openqq up`: `OPENQQ_JWT_SECRET`, else the data dir's secret (created on
    /// first use).
    pub fn local_keys(&self) -> Result<JwtKeys> {
        let secret = crate::secret::load_or_create(&self.settings.data_dir)?;
        JwtKeys::with_rules(&secret, self.settings.jwt.rules()).map_err(anyhow::Error::msg)
    }

    /// The consumer function reading `kind`'s topic, wrapped in the runtime's [`Consumer`].
    pub fn handler(&self, kind: EventKind) -> Result<Arc<dyn BatchHandler>> {
        let b = &self.backends;
        Ok(match kind {
            EventKind::DesignSubmitted => self.consumer(openqq_design_job::DesignJob),
            EventKind::ValidationRequested => self.consumer(openqq_validation::Validation {
                objects: b.objects.clone(),
                budget: self.settings.validation_budget,
            }),
            EventKind::ValidationFinished => self.consumer(openqq_results::Results),
            other => anyhow::bail!("no function consumes {other}"),
        })
    }

    fn consumer<H: RecordHandler + 'static>(&self, handler: H) -> Arc<dyn BatchHandler> {
        let b = &self.backends;
        Arc::new(Consumer::new(handler, b.log.clone(), b.store.clone(), self.topics.clone()))
    }
}

/// The embedded backends' retention and readers, as the settings ask.
fn embedded_options(s: &Settings) -> openqq_adapters::embedded::EmbeddedOptions {
    let mut retention = openqq_adapters::embedded::Retention::days(7);
    retention.default = s.log_retention;
    retention.per_topic.insert(s.topics().dead_letter(), s.dead_letter_retention);
    openqq_adapters::embedded::EmbeddedOptions { retention: Some(retention), store_readers: s.store_readers }
}

/// The request limiter: Redis (by URL or ElastiCache cache name) behind its Redis-down policy, or
/// the in-process one.
async fn limiter(s: &Settings, backends: &Backends) -> Result<Arc<dyn RateLimiter>> {
    let settings = crate::flags::limiter::settings(&s.limiter)?;
    crate::flags::limiter::build(&settings, backends.limiter.clone()).await
}
