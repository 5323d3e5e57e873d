//! The consumer side of [`KafkaEventLog`], for the local event-source-mapping emulator (on AWS
//! the MSK trigger consumes instead).
//!
//! - Reads go through one consumer per (topic, partition), manually assigned, that never stores
//!   or commits offsets itself. It stays positioned after the last record returned, so a
//!   consumer reading a partition in order keeps librdkafka's prefetched records; reading from
//!   elsewhere re-assigns it at that offset.
//! - Where a partition ends is known without a request to the broker once its reader exists:
//!   the reader keeps fetching, and each fetch response carries the partition's high watermark,
//!   which librdkafka keeps; this process's own acknowledged publishes raise it at once. Only a
//!   partition without a reader, or whose reader has had no fetch response yet, is asked for
//!   its watermarks, and it gets a reader then (positioned at its end until a read moves it).
//! - Offsets of a consumer group are fetched and committed through this process's member of that
//!   group, which `join` subscribes so the group divides the partitions among processes
//!   (`group.rs`); it is also the only member whose commits the coordinator accepts.
//! - librdkafka's calls block, so they run under `block_in_place` on a multi-threaded runtime.

use super::group::{GroupContext, GroupLease, Membership};
use super::{unavailable, GroupMember, KafkaContext, KafkaEventLog};
use async_trait::async_trait;
use openqq_core::ports::PortResult;
use openqq_core::{Lease, LogRecord, LogSource, PortError};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `wait_for_append` waits at most when nothing in this process publishes: records
/// appended by other processes are noticed within this delay (Kafka has no push to consumers
/// that are not fetching).
const EXTERNAL_APPEND_POLL: Duration = Duration::from_millis(200);

/// A consumer assigned to one partition, and where its next record will come from (held for
/// the whole of a read; the consumer's cached watermarks are read without it).
pub(super) struct Reader {
    consumer: BaseConsumer<KafkaContext>,
    next: std::sync::Mutex<Option<u64>>,
}

/// Runs a blocking librdkafka call without stalling the other tasks of a multi-threaded runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

impl KafkaEventLog {
    /// Reads `topic`'s partition count from metadata and caches it. A missing topic is created
    /// when topic creation is on (otherwise the cluster may auto-create it on the metadata
    /// request).
    pub(super) fn fetch_partitions(&self, topic: &str) -> PortResult<u32> {
        let deadline = Instant::now() + self.settings.timeout;
        let mut last_error;
        let mut created = false;
        loop {
            let md = blocking(|| self.producer.client().fetch_metadata(Some(topic), self.settings.timeout));
            last_error = match md {
                Ok(md) => match md.topics().iter().find(|t| t.name() == topic) {
                    Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                        let n = t.partitions().len() as u32;
                        self.partitions.lock().unwrap().insert(topic.to_owned(), n);
                        return Ok(n);
                    }
                    Some(t) => format!("the topic is not ready ({:?})", t.error()),
                    None => "the topic is missing from the metadata".to_owned(),
                },
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(PortError::Unavailable(
                    format!(
                        "cannot read the partitions of Kafka topic {topic:?} from {}: {last_error}",
                        self.settings.brokers
                    )
                    .into(),
                ));
            }
            if self.settings.create_topics && !created {
                created = true;
                blocking(|| {
                    futures_executor::block_on(super::admin::create_topics(
                        &self.settings,
                        &self.context,
                        &[topic.to_owned()],
                    ))
                })?;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The partition's reader. A new one is assigned at the partition's end, so that it fetches
    /// (and keeps the high watermark current) until a read positions it.
    fn reader(&self, topic: &str, partition: u32) -> PortResult<Arc<Reader>> {
        let mut readers = self.readers.lock().unwrap();
        if let Some(r) = readers.get(&(topic.to_owned(), partition)) {
            return Ok(r.clone());
        }
        let consumer =
            self.settings.consumer("openqq-reader", &self.context).map_err(|e| unavailable("creating a reader", e))?;
        self.context.seed(consumer.client())?;
        consumer
            .assign(&partition_list(topic, partition, Offset::End)?)
            .map_err(|e| unavailable("assigning a partition", e))?;
        let r = Arc::new(Reader { consumer, next: std::sync::Mutex::new(None) });
        readers.insert((topic.to_owned(), partition), r.clone());
        Ok(r)
    }

    /// The offset after the partition's last record: the high watermark of its reader's last
    /// fetch response (asked of the broker only before the first response), or past this
    /// process's own acknowledged publishes if those are further.
    fn end(&self, topic: &str, partition: u32) -> PortResult<u64> {
        let reader = self.reader(topic, partition)?;
        let fetched = match cached_high_watermark(&reader.consumer, topic, partition) {
            Some(hi) => hi,
            None => self.watermarks(topic, partition)?.1,
        };
        let acknowledged = self.acknowledged.lock().unwrap().get(&(topic.to_owned(), partition)).copied();
        Ok(fetched.max(acknowledged.unwrap_or(0)))
    }

    /// This process's member of `group`: it fetches and commits the group's offsets and, once
    /// `join`ed, holds partitions. Until its own poll thread runs, it serves its token refresh
    /// (MSK IAM) before each use.
    fn group(&self, group: &str) -> PortResult<GroupMember> {
        let mut groups = self.groups.lock().unwrap();
        if let Some(m) = groups.get(group) {
            if !m.membership.is_polled() {
                self.context.serve_refresh(&m.consumer);
            }
            return Ok(m.clone());
        }
        let membership = Arc::new(Membership::new(self.settings.timeout));
        let context = GroupContext { membership: membership.clone(), auth: self.context.clone() };
        let consumer: super::group::Member = self
            .settings
            .member_config(group)
            .create_with_context(context)
            .map_err(|e| unavailable("creating a group member", e))?;
        self.context.seed(consumer.client())?;
        let m = GroupMember { consumer: Arc::new(consumer), membership };
        groups.insert(group.to_owned(), m.clone());
        Ok(m)
    }

    fn watermarks(&self, topic: &str, partition: u32) -> PortResult<(u64, u64)> {
        // The metadata consumer is never polled for records: serve its token refresh first.
        self.context.serve_refresh(&self.meta);
        let (lo, hi) = blocking(|| self.meta.fetch_watermarks(topic, partition as i32, self.settings.timeout))
            .map_err(|e| unavailable("fetching watermarks", e))?;
        Ok((lo.max(0) as u64, hi.max(0) as u64))
    }
}

/// The high watermark of the partition in `consumer`'s last fetch response, which librdkafka
/// keeps (`rd_kafka_get_watermark_offsets`; rdkafka has no wrapper for it): no request is made.
/// `None` before the first response.
fn cached_high_watermark(consumer: &BaseConsumer<KafkaContext>, topic: &str, partition: u32) -> Option<u64> {
    let topic = std::ffi::CString::new(topic).ok()?;
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the client pointer is live for the borrow of `consumer`; `topic` is NUL-terminated
    // and outlives the call, which only reads it; `low` and `high` are writable i64s.
    let code = unsafe {
        rdkafka::bindings::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition as i32,
            &mut low,
            &mut high,
        )
    };
    if code != rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return None;
    }
    u64::try_from(high).ok()
}

fn partition_list(topic: &str, partition: u32, offset: Offset) -> PortResult<TopicPartitionList> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition as i32, offset)
        .map_err(|e| unavailable("building a partition list", e))?;
    Ok(tpl)
}

#[async_trait]
impl LogSource for KafkaEventLog {
    /// The cached count, or the count from metadata on first use. Should the cluster not answer,
    /// the configured count stands in (uncached): it is what the topic was created with.
    fn partitions(&self, topic: &str) -> u32 {
        if let Some(n) = self.partitions.lock().unwrap().get(topic) {
            return *n;
        }
        self.fetch_partitions(topic).unwrap_or_else(|e| {
            tracing::warn!(topic, error = %e, "The partition count is unknown; using the configured count.");
            self.settings.partitions
        })
    }

    async fn read(&self, topic: &str, partition: u32, from: u64, max: usize) -> PortResult<Vec<LogRecord>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let end = self.end(topic, partition)?;
        if from >= end {
            return Ok(Vec::new());
        }
        let reader = self.reader(topic, partition)?;
        let timeout = self.settings.timeout;
        blocking(move || {
            let mut next = reader.next.lock().unwrap();
            if *next != Some(from) {
                reader
                    .consumer
                    .assign(&partition_list(topic, partition, Offset::Offset(from as i64))?)
                    .map_err(|e| unavailable("assigning a partition", e))?;
                *next = Some(from);
            }
            let want = max.min((end - from) as usize);
            let mut out = Vec::with_capacity(want);
            let deadline = Instant::now() + timeout;
            while out.len() < want {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let m = match reader.consumer.poll(left) {
                    None => break,
                    Some(Err(e)) => {
                        // Leave the reader to be re-assigned: its position is unknown now.
                        *next = None;
                        return Err(unavailable("reading", e));
                    }
                    Some(Ok(m)) => m,
                };
                let offset = m.offset().max(0) as u64;
                if m.topic() != topic || m.partition() != partition as i32 || offset < from {
                    continue; // left over from an earlier assignment
                }
                let expected = next.unwrap_or(from);
                if offset > expected {
                    // Our topics are neither compacted nor transactional: a gap is records the
                    // broker did not return (or retention deleted unread), worth a look.
                    tracing::warn!(
                        topic,
                        partition,
                        expected,
                        offset,
                        "Kafka returned a record past the expected offset; the records between were skipped."
                    );
                }
                out.push(LogRecord {
                    topic: topic.to_owned(),
                    partition,
                    offset,
                    timestamp_ms: m.timestamp().to_millis().unwrap_or(0),
                    key: String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    value: m.payload().unwrap_or_default().to_vec(),
                    headers: m
                        .headers()
                        .map(|h| h.iter().map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec())).collect())
                        .unwrap_or_default(),
                });
                *next = Some(offset + 1);
                if offset + 1 >= end {
                    break;
                }
            }
            if out.is_empty() {
                *next = None;
                return Err(PortError::Unavailable(
                    format!("no record of {topic}/{partition} from offset {from} arrived within {timeout:?}").into(),
                ));
            }
            Ok(out)
        })
    }

    async fn end_offsets(&self, topic: &str) -> PortResult<Vec<u64>> {
        (0..self.partitions(topic)).map(|p| self.end(topic, p)).collect()
    }

    async fn committed(&self, group: &str, topic: &str, partition: u32) -> PortResult<u64> {
        let member = self.group(group)?.consumer;
        let tpl = partition_list(topic, partition, Offset::Invalid)?;
        let got = blocking(|| member.committed_offsets(tpl, self.settings.timeout))
            .map_err(|e| unavailable("fetching a committed offset", e))?;
        let offset = got.find_partition(topic, partition as i32).map(|e| e.offset()).unwrap_or(Offset::Invalid);
        match offset {
            Offset::Offset(n) if n >= 0 => Ok(n as u64),
            // No commit yet: the group starts at the beginning (TRIM_HORIZON).
            _ => Ok(0),
        }
    }

    async fn commit(&self, group: &str, topic: &str, partition: u32, next: u64) -> PortResult<()> {
        let member = self.group(group)?.consumer;
        let tpl = partition_list(topic, partition, Offset::Offset(next as i64))?;
        blocking(|| member.commit(&tpl, CommitMode::Sync)).map_err(|e| unavailable("committing an offset", e))
    }

    /// Publishes from this process wake the waiter at once; otherwise it returns after a short
    /// poll interval (at most [`EXTERNAL_APPEND_POLL`]) so appends by other producers are seen
    /// soon after, without a fetch per waiting consumer.
    async fn wait_for_append(&self, topic: &str, timeout: Duration) {
        self.appended.wait(topic, timeout.min(EXTERNAL_APPEND_POLL)).await;
    }

    /// Subscribes the group's member: the coordinator assigns this process its share of the
    /// partitions (all of them while it is the only member), shortly after.
    async fn join(&self, group: &str, topic: &str) -> PortResult<Arc<dyn Lease>> {
        let m = self.group(group)?;
        let lease = GroupLease::subscribe(m.consumer, m.membership, topic)
            .map_err(|e| unavailable("joining the consumer group", e))?;
        Ok(Arc::new(lease))
    }
}
