//! The Kafka / MSK event log, through `rdkafka` (librdkafka).
//!
//! - [`KafkaSettings`]: brokers, security, topic layout for local use, timeouts; validated before
//!   any connection is made.
//! - [`security`]: plaintext, TLS, SASL/SCRAM or MSK IAM, an optional CA file, and their
//!   librdkafka properties; [`Secret`] keeps the SASL password out of every `Debug`.
//! - `iam.rs`: MSK IAM tokens (SASL/OAUTHBEARER, signed with the process's AWS credentials) and
//!   [`KafkaContext`], the client context every producer, consumer and admin client is made with.
//! - [`msk`]: an MSK cluster's bootstrap brokers from its ARN (`GetBootstrapBrokers`).
//! - [`KafkaEventLog`]: the [`EventLog`] (an idempotent `FutureProducer`) and, in `source.rs`,
//!   the [`LogSource`](openqq_core::LogSource) the local runner's event-source-mapping emulator
//!   reads through (manually assigned readers; consumer-group membership and offsets).
//! - `admin.rs`: creating the platform's topics at start (local use; skipped on MSK).
//!
//! The partitioner is `murmur2_random`: for keyed records it computes what Kafka's Java client
//! computes, and what [`openqq_core::partition::partition_for`] computes for the embedded log, so a
//! tenant has the same partition number on every backend with the same partition count.

mod admin;
mod group;
mod iam;
pub mod msk;
pub mod security;
mod source;

pub use iam::KafkaContext;
pub use msk::ClusterArn;
pub use security::{KafkaAuth, KafkaSecurity, ScramMechanism, Secret};

/// The `rdkafka` this adapter is built with, for tests that start its mock cluster.
pub use rdkafka;

use crate::append_signal::AppendSignal;
use crate::SettingsError;
use async_trait::async_trait;
use openqq_core::ports::{PortResult, MAX_RECORD_BYTES};
use openqq_core::{EventLog, Failure, PortError, Record};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::future_producer::Delivery;
use rdkafka::producer::Producer;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to reach Kafka and how the platform's topics are laid out.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    /// `HOST:PORT[,HOST:PORT…]`, the bootstrap brokers.
    pub brokers: String,
    /// TLS and authentication (plaintext by default).
    pub security: KafkaSecurity,
    /// Topics the platform uses; their partition counts are read (and cached) at start.
    pub topics: Vec<String>,
    /// Create `topics` at start if missing (local clusters). MSK topics are managed elsewhere.
    pub create_topics: bool,
    /// Partitions of a created topic. Match the embedded log's count to keep tenants on the same
    /// partition numbers.
    pub partitions: u32,
    /// Replication factor of a created topic (1 for a one-broker local cluster; 3 on MSK).
    pub replication: u32,
    /// How long a publish may wait for every acknowledgement (`message.timeout.ms`) and a
    /// metadata, offset or watermark request may wait for its answer.
    pub timeout: Duration,
    /// How long a consumer-group member may go silent before its partitions move to the other
    /// members (the local runner's consumers; on AWS the MSK trigger consumes).
    pub session_timeout: Duration,
    /// librdkafka producer properties set after the platform's own: for measurements only
    /// (`acks=1` against the default, say). Per-tenant order and "nothing acknowledged lost"
    /// rest on the defaults: an idempotent producer with `acks=all`.
    pub producer_overrides: Vec<(String, String)>,
}

impl KafkaSettings {
    pub fn new(brokers: impl Into<String>, topics: Vec<String>) -> Self {
        Self {
            brokers: brokers.into(),
            security: KafkaSecurity::default(),
            topics,
            create_topics: true,
            partitions: 12,
            replication: 1,
            timeout: Duration::from_secs(30),
            session_timeout: Duration::from_secs(6),
            producer_overrides: Vec::new(),
        }
    }

    /// Rejects settings that cannot work, with a sentence an operator can act on.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let brokers: Vec<&str> = self.brokers.split(',').map(str::trim).collect();
        if brokers.iter().any(|b| b.is_empty()) {
            return Err(SettingsError::new(format!(
                "the Kafka broker list {:?} has an empty entry; give HOST:PORT[,HOST:PORT…]",
                self.brokers
            )));
        }
        for b in &brokers {
            let port = b.rsplit_once(':').and_then(|(host, port)| (!host.is_empty()).then_some(port));
            if port.and_then(|p| p.parse::<u16>().ok()).filter(|p| *p > 0).is_none() {
                return Err(SettingsError::new(format!("the Kafka broker {b:?} is not HOST:PORT")));
            }
        }
        if self.partitions == 0 {
            return Err(SettingsError::new("Kafka topics need at least 1 partition"));
        }
        if self.replication == 0 {
            return Err(SettingsError::new("the Kafka replication factor must be at least 1"));
        }
        if self.session_timeout < Duration::from_secs(1) {
            return Err(SettingsError::new(format!(
                "the Kafka session timeout {:?} is shorter than a second",
                self.session_timeout
            )));
        }
        if self.timeout < Duration::from_millis(100) {
            return Err(SettingsError::new(format!(
                "the Kafka timeout {:?} is too short to get an acknowledgement",
                self.timeout
            )));
        }
        self.security.validate()
    }

    fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        c.set("socket.timeout.ms", self.timeout.as_millis().to_string());
        self.security.apply(&mut c);
        c
    }

    /// Idempotent producer: a retried batch can neither duplicate nor reorder records, and a
    /// delivery counts only once every in-sync replica has it.
    fn producer_config(&self) -> ClientConfig {
        let mut c = self.client_config();
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .set("message.timeout.ms", self.timeout.as_millis().to_string())
            // A record of MAX_RECORD_BYTES plus its key and headers must fit in a request.
            .set("message.max.bytes", (MAX_RECORD_BYTES + 64 * 1024).to_string())
            // Publishes are small and latency-bound (a request waits for them).
            .set("linger.ms", "5");
        for (k, v) in &self.producer_overrides {
            c.set(k, v);
        }
        c
    }

    /// A consumer that never moves offsets by itself: reads are by manual assignment, and the
    /// emulator commits explicitly after a batch succeeded.
    fn consumer_config(&self, group: &str) -> ClientConfig {
        let mut c = self.client_config();
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100");
        c
    }

    /// A consumer-group member (see `group.rs`): cooperative rebalances, and a short session so
    /// a killed process's partitions move to the others within seconds.
    fn member_config(&self, group: &str) -> ClientConfig {
        let mut c = self.consumer_config(group);
        c.set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", self.session_timeout.as_millis().to_string())
            .set("heartbeat.interval.ms", (self.session_timeout.as_millis() / 4).max(100).to_string());
        c
    }

    fn consumer(&self, group: &str, context: &KafkaContext) -> Result<BaseConsumer<KafkaContext>, KafkaError> {
        self.consumer_config(group).create_with_context(context.clone())
    }
}

/// A partition reader, shared by the calls that read that partition.
type SharedReader = Arc<source::Reader>;

/// A consumer group's member in this process and the partitions it holds.
#[derive(Clone)]
struct GroupMember {
    consumer: Arc<group::Member>,
    membership: Arc<group::Membership>,
}

/// The event log on a Kafka cluster. One producer for every topic; consumers are created per
/// partition read and per consumer group, on first use.
pub struct KafkaEventLog {
    settings: KafkaSettings,
    /// The context of every client: MSK IAM tokens when that is the auth.
    context: KafkaContext,
    producer: FutureProducer<KafkaContext>,
    /// Answers watermark and metadata requests.
    meta: BaseConsumer<KafkaContext>,
    /// Partition count per topic, from metadata; a topic's count never shrinks in Kafka.
    partitions: Mutex<HashMap<String, u32>>,
    /// One reader per (topic, partition), positioned where the last read stopped.
    readers: Mutex<HashMap<(String, u32), SharedReader>>,
    /// Per (topic, partition), the offset after the last record this process's producer had
    /// acknowledged: where the partition ends at least, known without asking the broker.
    acknowledged: Mutex<HashMap<(String, u32), u64>>,
    /// One member per consumer group: it holds the group's partitions for this process, and
    /// fetches and commits its offsets.
    groups: Mutex<HashMap<String, GroupMember>>,
    /// Wakes this process's waiting consumers when it publishes (see `wait_for_append`).
    appended: AppendSignal,
}

impl KafkaEventLog {
    /// Validates `settings`, connects, creates the topics if asked, and reads every topic's
    /// partition count. Fails when the brokers cannot be reached within the timeout, or, with
    /// MSK IAM auth, when no AWS credentials can be loaded.
    pub async fn connect(settings: KafkaSettings) -> PortResult<Self> {
        settings.validate()?;
        let context = KafkaContext::for_security(&settings.security).await?;
        let producer: FutureProducer<KafkaContext> = settings
            .producer_config()
            .create_with_context(context.clone())
            .map_err(|e| invalid_config("producer", e))?;
        context.seed(producer.client())?;
        let meta = settings.consumer("openqq-metadata", &context).map_err(|e| invalid_config("consumer", e))?;
        context.seed(meta.client())?;
        let log = Self {
            settings,
            context,
            producer,
            meta,
            partitions: Mutex::new(HashMap::new()),
            readers: Mutex::new(HashMap::new()),
            acknowledged: Mutex::new(HashMap::new()),
            groups: Mutex::new(HashMap::new()),
            appended: AppendSignal::default(),
        };
        if log.settings.create_topics {
            admin::create_topics(&log.settings, &log.context, &log.settings.topics)
                .await
                .map_err(|e| log.context.explain(e))?;
        }
        for topic in log.settings.topics.clone() {
            let n = log.fetch_partitions(&topic).map_err(|e| log.context.explain(e))?;
            if log.settings.create_topics && n != log.settings.partitions {
                tracing::warn!(
                    topic,
                    partitions = n,
                    configured = log.settings.partitions,
                    "The topic already existed with another partition count; tenants map to partitions by its count."
                );
            }
        }
        Ok(log)
    }

    pub fn settings(&self) -> &KafkaSettings {
        &self.settings
    }
}

#[async_trait]
impl EventLog for KafkaEventLog {
    async fn publish(&self, topic: &str, records: Vec<Record>) -> PortResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        openqq_core::ports::check_record_sizes(&records)?;
        if self.settings.create_topics && !self.partitions.lock().unwrap().contains_key(topic) {
            self.fetch_partitions(topic)?; // creates a topic the cluster does not have yet
        }
        // librdkafka should time a record out `message.timeout.ms` after it was enqueued, but
        // with every broker down (seen on the mock cluster) the publishes that follow the first
        // timeouts waited for a broker to come back: the idempotent producer, which must
        // re-acquire its producer id after an in-flight timeout, holds them meanwhile. A deadline
        // of our own keeps a publish, and the API request behind it, bounded. A record given up
        // on here may still be delivered later, as after any timeout: at least once.
        let deadline = self.settings.timeout + Duration::from_secs(1);
        match tokio::time::timeout(deadline, self.enqueue_and_wait(topic, &records)).await {
            Ok(outcome) => self.acknowledged(topic, outcome?),
            Err(_) => {
                return Err(PortError::Unavailable(
                    format!("Kafka did not acknowledge the publish within {deadline:?}").into(),
                ))
            }
        }
        self.appended.appended(topic);
        Ok(())
    }
}

impl KafkaEventLog {
    /// Notes where the acknowledged records landed (each partition ends after them at least)
    /// before the waiting consumers are woken.
    fn acknowledged(&self, topic: &str, delivered: Vec<Delivery>) {
        let mut ends = self.acknowledged.lock().unwrap();
        for d in delivered.iter().filter(|d| d.partition >= 0 && d.offset >= 0) {
            let end = ends.entry((topic.to_owned(), d.partition as u32)).or_default();
            *end = (*end).max(d.offset as u64 + 1);
        }
    }

    /// Enqueues every record, then waits for every acknowledgement; says where each record
    /// landed.
    async fn enqueue_and_wait(&self, topic: &str, records: &[Record]) -> PortResult<Vec<Delivery>> {
        // Enqueue everything first so the records travel in as few requests as possible, then
        // wait for every acknowledgement. The idempotent producer keeps enqueue order within a
        // partition, retries included.
        let mut pending: Vec<DeliveryFuture> = Vec::with_capacity(records.len());
        let mut delivered = Vec::with_capacity(records.len());
        for r in records {
            let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
            for (k, v) in &r.headers {
                headers = headers.insert(Header { key: k, value: Some(v) });
            }
            let mut record = FutureRecord::to(topic).key(&r.key).payload(&r.value).headers(headers);
            loop {
                match self.producer.send_result(record) {
                    Ok(f) => {
                        pending.push(f);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        // The local queue is full: drain what is in flight, then enqueue again.
                        // (Other publishers may own the queue: then just wait a little.)
                        record = back;
                        let in_flight = std::mem::take(&mut pending);
                        if in_flight.is_empty() {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        } else {
                            delivered.extend(await_all(in_flight).await?);
                        }
                    }
                    Err((e, _)) => return Err(produce_error(e)),
                }
            }
        }
        delivered.extend(await_all(pending).await?);
        Ok(delivered)
    }
}

/// Waits for every delivery; the first error, if any, once all have ended.
async fn await_all(pending: Vec<DeliveryFuture>) -> PortResult<Vec<Delivery>> {
    let mut first_error = None;
    let mut delivered = Vec::with_capacity(pending.len());
    for f in pending {
        let outcome = match f.await {
            Ok(Ok(d)) => {
                delivered.push(d);
                continue;
            }
            Ok(Err((e, _))) => produce_error(e),
            Err(_) => PortError::Unavailable("the producer dropped a delivery before it was acknowledged".into()),
        };
        first_error.get_or_insert(outcome);
    }
    first_error.map_or(Ok(delivered), Err)
}

/// Permanent for records the broker will never take; everything else (timeouts, brokers down,
/// leader changes, unknown topic while it is being created) is worth retrying.
fn produce_error(e: KafkaError) -> PortError {
    match e.rdkafka_error_code() {
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord,
        ) => PortError::invalid("record", Failure::new(format!("Kafka refused it: {e}"), e)),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed | RDKafkaErrorCode::ClusterAuthorizationFailed) => {
            PortError::backend(format!("Kafka refused the publish: {e}"), false, e)
        }
        _ => PortError::unavailable(format!("Kafka did not acknowledge the publish: {e}"), e),
    }
}

fn invalid_config(what: &str, e: impl std::fmt::Display) -> PortError {
    crate::SettingsError::new(format!("the Kafka {what} settings are invalid: {e}")).into()
}

/// An error and its sources, `outer: inner: innermost` (an AWS SDK error's `Display` is only
/// its outermost layer, such as "dispatch failure").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn unavailable(what: &str, e: KafkaError) -> PortError {
    PortError::unavailable(format!("Kafka {what} failed: {e}"), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(brokers: &str) -> KafkaSettings {
        KafkaSettings::new(brokers, vec!["t".into()])
    }

    #[test]
    fn broker_lists_must_be_host_port_pairs() {
        assert!(settings("127.0.0.1:9092").validate().is_ok());
        assert!(settings("a:9092, b:9093").validate().is_ok());
        for bad in ["", "localhost", "a:9092,", ":9092", "a:x", "a:0"] {
            let err = settings(bad).validate().err().unwrap_or_else(|| panic!("{bad:?} is refused"));
            assert!(err.to_string().contains("the Kafka broker"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn zero_partitions_or_replicas_are_refused() {
        let mut s = settings("a:1");
        s.partitions = 0;
        assert!(s.validate().unwrap_err().to_string().contains("partition"));
        let mut s = settings("a:1");
        s.replication = 0;
        assert!(s.validate().unwrap_err().to_string().contains("replication"));
    }

    #[test]
    fn oversized_records_are_permanent_and_timeouts_retriable() {
        assert!(!produce_error(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)).is_retriable());
        assert!(produce_error(KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)).is_retriable());
        assert!(produce_error(KafkaError::MessageProduction(RDKafkaErrorCode::AllBrokersDown)).is_retriable());
    }
}
