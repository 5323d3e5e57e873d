//! The one place the platform is assembled: [`Platform::build`] turns [`Settings`] into every
//! backend (log, store, objects), the limiter and the per-tenant policies; the API state, the
//! three consumer handlers and the webhook deliveries are then made from those. `openqq up`, the four Lambda
//! functions and in-process tests all go through here, so what runs on AWS is what runs locally.

use crate::settings::Settings;
use anyhow::{Context, Result};
use openqq_adapters::{
    Backends, Durability, EmbeddedDesignStore, EmbeddedEventLog, EmbeddedObjectStore, InProcessRateLimiter,
};
use openqq_api::{AppState, AppStateBuilder, JwtKeys, LimitPolicy};
use openqq_core::{DesignStore, EventKind, ObjectStore, RateLimiter, Topics};
use openqq_runtime::{BatchHandler, Consumer, RecordHandler};
use std::sync::Arc;
use std::time::Duration;

/// The platform's parts, built once per process (once per cold start on Lambda).
pub struct Platform {
    pub settings: Settings,
    pub topics: Topics,
    /// The backends the settings ask for: each embedded in the data dir unless configured
    /// elsewhere, and the per-tenant request (and byte) limiter (Redis when configured, else in
    /// process).
    pub backends: Backends,
    /// The request quota per tenant, with overrides from `--rate-limits`.
    pub limits: Arc<LimitPolicy>,
    /// The model that writes designs from prompts (one answering "not configured" without
    /// `--generation-url`).
    pub generation: Arc<dyn openqq_core::generation::GenerationBackend>,
    /// Whether the build created (or made private) the data dir: it did when something embedded
    /// opened there.
    data_dir_made: bool,
}

/// How often an idle event stream reads the store for what was applied since.
pub const FEED_POLL: std::time::Duration = openqq_api::DEFAULT_FEED_POLL;

/// The topics of the batch function: batches to fan out, and their items' ends. The batch lane's
/// twins of [`CONSUMED`] (`Topics::lane`) are read by the same functions under their own consumer
/// groups ([`BATCH_LANE_GROUP_PREFIX`]).
pub const BATCH_CONSUMED: [EventKind; 2] = [EventKind::BatchSubmitted, EventKind::BatchItemEnded];

/// What the consumer groups of the batch lane's topics start with (after the topic prefix).
pub const BATCH_LANE_GROUP_PREFIX: &str = "batch.";

/// The consumer group (after the topic prefix) under which `function` reads `kind`'s topic, in
/// the batch lane when `batch_lane`: the function's name, under [`BATCH_LANE_GROUP_PREFIX`] in the
/// batch lane. A Kafka trigger on AWS needs a group no other trigger of the cluster uses, so the
/// batch function, which reads two topics, reads `batch.item.ended` under a group of its own
/// (`batch-item-ended`). `openqq up` and the deployment template name groups alike.
pub fn consumer_group(function: &str, kind: EventKind, batch_lane: bool) -> String {
    match (batch_lane, kind) {
        (true, _) => format!("{BATCH_LANE_GROUP_PREFIX}{function}"),
        (false, EventKind::BatchItemEnded) => format!("{function}-item-ended"),
        (false, _) => function.to_owned(),
    }
}

/// The topics the consumer functions read, in pipeline order (synthesis and generation are
/// lanes beside validation, for revisions given as source or to be written by a model).
pub const CONSUMED: [EventKind; 5] = [
    EventKind::DesignSubmitted,
    EventKind::SynthesisRequested,
    EventKind::GenerationRequested,
    EventKind::ValidationRequested,
    EventKind::ValidationFinished,
];

impl Platform {
    /// Builds exactly the backends `settings` asks for. Settings are checked (and an MSK
    /// cluster's brokers looked up) before anything is opened; each failure names its setting.
    /// The data dir is created, and the embedded log, store or objects opened in it, only for
    /// the parts that are not elsewhere: a function on Kafka, DynamoDB and S3 writes no file.
    pub async fn build(settings: Settings) -> Result<Self> {
        settings.check()?;
        let topics = settings.topics();
        let kafka = crate::flags::kafka::settings(&settings.kafka, settings.partitions, topics.all()).await?;
        let dynamo = crate::flags::dynamo::settings(&settings.dynamo)?;
        let s3 = crate::flags::s3::settings(&settings.s3)?;
        let limiter_settings = crate::flags::limiter::settings(&settings.limiter)?;
        let generation = settings.generation.backend()?;
        let log = crate::flags::kafka::connect(kafka).await?;
        // The store on DynamoDB (table created against a local endpoint, required on AWS).
        let store = crate::flags::dynamo::connect(dynamo, settings.store_retention()).await?;
        // Objects (full reports, large netlists, uploads) in S3 (bucket created only locally).
        let objects = crate::flags::s3::connect(s3).await?;
        let mut embedded = Embedded::new(&settings);
        let (log, source) = match log {
            Some(log) => log,
            None => embedded.log()?,
        };
        let store = match store {
            Some(store) => store,
            None => embedded.store()?,
        };
        let (objects, presigned) = match objects {
            Some((objects, presigned)) => (objects, Some(presigned)),
            None => (embedded.objects()?, None),
        };
        let fallback: Arc<dyn RateLimiter> = Arc::new(InProcessRateLimiter::new());
        let limiter = crate::flags::limiter::build(&limiter_settings, fallback).await?;
        let limits = Arc::new(LimitPolicy::new(settings.rate_limit.0));
        if let Some(path) = &settings.rate_limits {
            crate::overrides::watch_overrides(limits.clone(), path.clone())?;
        }
        let data_dir_made = embedded.dir_made;
        let backends = Backends { log, source, store, objects, presigned, limiter };
        Ok(Self { settings, topics, backends, limits, generation, data_dir_made })
    }

    /// Whether the data dir exists and is private because the build opened something embedded
    /// in it; where every backend is elsewhere it was left alone.
    pub fn made_data_dir(&self) -> bool {
        self.data_dir_made
    }

    /// The API's state, as the settings ask. `keys` verify bearer tokens. The builder takes what
    /// only some processes set (`openqq up --dev-tokens`).
    pub fn api_state(&self, keys: JwtKeys) -> AppStateBuilder {
        let s = &self.settings;
        let b = &self.backends;
        AppState::builder(b.log.clone(), b.store.clone(), b.objects.clone(), b.limiter.clone(), Arc::new(keys))
            .limits(self.limits.clone())
            .identity(s.auth.into())
            .topics(self.topics.clone())
            .max_body_bytes(s.max_body_bytes)
            .feed_poll(FEED_POLL)
            .webhooks_allow_private(s.webhooks_allow_private)
            .tenant_limits(s.tenant_limits())
            .storage_limits(s.storage_limits())
            .idempotency_window(s.idempotency_window)
            .upload_limits(s.upload_limits())
            .presigned_uploads(b.presigned.clone())
            .generation(s.generation.policy())
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
        Ok(JwtKeys::with_rules(&secret, self.settings.jwt.rules())?)
    }

    /// The consumer function reading `kind`'s topic, wrapped in the runtime's [`Consumer`].
    pub fn handler(&self, kind: EventKind) -> Result<Arc<dyn BatchHandler>> {
        let b = &self.backends;
        Ok(match kind {
            EventKind::DesignSubmitted => self.consumer(openqq_design_job::DesignJob {
                specs: b.store.clone(),
                generation_lane: self.settings.bulkheads == crate::settings::Bulkheads::On,
            }),
            EventKind::ValidationRequested => self.consumer(openqq_validation::Validation {
                objects: b.objects.clone(),
                budget: self.settings.validation_budget,
            }),
            EventKind::SynthesisRequested => self.consumer(self.synthesis(openqq_synthesis::SOURCE_SHARE)),
            EventKind::GenerationRequested => {
                self.consumer(openqq_synthesis::Generation(self.synthesis(openqq_synthesis::GENERATION_SHARE)))
            }
            EventKind::ValidationFinished => self.consumer(openqq_results::Results),
            EventKind::BatchSubmitted | EventKind::BatchItemEnded => Arc::new(openqq_batch::BatchFunction {
                batches: b.store.clone(),
                feed: b.store.clone(),
                objects: b.objects.clone(),
                log: b.log.clone(),
                topics: self.topics.clone(),
                limits: openqq_core::batch::BatchLimits { in_flight: self.settings.batch_in_flight },
            }),
            other => anyhow::bail!("no function consumes {other}"),
        })
    }

    /// The synthesis function's work, as the settings ask (the generation function's too), with
    /// a tenant's `share` of a batch when the bulkheads are on.
    fn synthesis(&self, share: usize) -> openqq_synthesis::Synthesis {
        let per_job = self.settings.synthesis_budget;
        let budget = openqq_synthesis::Budget { per_run: per_job.min(Duration::from_secs(30)), per_job };
        openqq_synthesis::Synthesis {
            objects: self.backends.objects.clone(),
            budget,
            generation: self.generation.clone(),
            max_attempts: self.settings.generation.generation_max_attempts,
            budgets: self.backends.store.clone(),
            designs: self.backends.store.clone(),
            tokens: self.settings.generation.token_limits(),
            share: (self.settings.bulkheads == crate::settings::Bulkheads::On).then_some(share),
        }
    }

    fn consumer<H: RecordHandler + 'static>(&self, handler: H) -> Arc<dyn BatchHandler> {
        let b = &self.backends;
        Arc::new(Consumer::new(handler, b.log.clone(), b.store.clone(), self.topics.clone()))
    }
}

/// The embedded backends, opened in the data dir only when one is asked for (the directory is
/// created with the first).
struct Embedded<'s> {
    settings: &'s Settings,
    dir_made: bool,
}

impl<'s> Embedded<'s> {
    fn new(settings: &'s Settings) -> Self {
        Self { settings, dir_made: false }
    }

    fn dir(&mut self) -> Result<&'s std::path::Path> {
        let dir = self.settings.data_dir.as_path();
        if !self.dir_made {
            crate::data_dir::create_private(dir)?;
            self.dir_made = true;
        }
        Ok(dir)
    }

    fn durability(&self) -> Durability {
        if self.settings.fsync {
            Durability::Power
        } else {
            Durability::Process
        }
    }

    fn log(&mut self) -> Result<crate::flags::kafka::LogHandles> {
        let s = self.settings;
        let dir = self.dir()?;
        let log = EmbeddedEventLog::open_with_retention(dir, s.partitions, self.durability(), log_retention(s))
            .with_context(|| format!("opening the event log in the data dir {}", dir.display()))?;
        let log = Arc::new(log);
        Ok((log.clone(), log))
    }

    fn store(&mut self) -> Result<Arc<dyn DesignStore>> {
        let (readers, durability) = (self.settings.store_readers, self.durability());
        let dir = self.dir()?;
        let store = match readers {
            Some(readers) => EmbeddedDesignStore::open_with_readers(dir, durability, readers),
            None => EmbeddedDesignStore::open(dir, durability),
        }
        .with_context(|| format!("opening the design store in the data dir {}", dir.display()))?;
        Ok(Arc::new(store.with_retention(self.settings.store_retention())))
    }

    fn objects(&mut self) -> Result<Arc<dyn ObjectStore>> {
        let dir = self.dir()?;
        let objects = EmbeddedObjectStore::open_with_upload_ttl(dir, self.settings.upload_retention)
            .with_context(|| format!("opening the object store in the data dir {}", dir.display()))?;
        Ok(Arc::new(objects))
    }
}

/// How long the embedded log keeps records: `--log-retention` on every topic but the dead-letter
/// topic, which keeps its records for `--dead-letter-retention` (nobody consumes it, so it is
/// trimmed by age alone). Records every consumer group has read go after that, in the background.
fn log_retention(s: &Settings) -> openqq_adapters::embedded::Retention {
    let mut retention = openqq_adapters::embedded::Retention::days(7);
    retention.default = s.log_retention;
    retention.per_topic.insert(s.topics().dead_letter(), s.dead_letter_retention);
    retention
}

#[cfg(test)]
mod tests {
    use super::*;
    use openqq_core::{EventLog, LogSource, Record};

    #[test]
    fn the_dead_letter_topic_keeps_its_records_for_the_dead_letter_retention() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_str().unwrap();
        let args = ["--data-dir", data_dir, "--log-retention", "2d", "--dead-letter-retention", "9d"];
        let settings = Settings::from_args(args).unwrap();
        let retention = log_retention(&settings);
        assert_eq!(retention.default, Duration::from_secs(2 * 86_400));
        let dead_letters = settings.topics().dead_letter();
        assert_eq!(retention.per_topic.get(&dead_letters), Some(&Duration::from_secs(9 * 86_400)));
        assert_eq!(retention.per_topic.len(), 1, "every other topic keeps the log's retention");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dead_letters_older_than_the_dead_letter_retention_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_str().unwrap();
        let args = ["--data-dir", data_dir, "--log-retention", "30d", "--dead-letter-retention", "3d"];
        let settings = Settings::from_args(args).unwrap();
        let log = EmbeddedEventLog::open(dir.path(), 1, Durability::Process).unwrap();
        let (topic, other) = (settings.topics().dead_letter(), settings.topics().of(EventKind::DesignSubmitted));
        let record = || Record { key: "acme".into(), value: b"{}".to_vec(), headers: Vec::new() };
        log.publish(&topic, vec![record(), record()]).await.unwrap();
        log.publish(&other, vec![record()]).await.unwrap();
        log.commit("design-job", &other, 0, 1).await.unwrap();
        let day_ms = 86_400_000i64;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let kept = |topic: String| {
            let log = &log;
            async move { log.read(&topic, 0, 0, 10).await.unwrap().len() }
        };
        log.compact(&log_retention(&settings), now + 2 * day_ms).await.unwrap();
        assert_eq!(kept(topic.clone()).await, 2, "dead letters younger than 3 days stay");
        log.compact(&log_retention(&settings), now + 4 * day_ms).await.unwrap();
        assert_eq!(kept(topic.clone()).await, 0, "dead letters older than 3 days are removed");
        assert_eq!(kept(other).await, 1, "a consumed topic keeps the log's own 30 days");
    }
}
