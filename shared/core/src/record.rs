//! Records as the event log publishes and stores them.

use crate::error::{PortError, PortResult};

/// Largest record value any event-log adapter accepts: Kafka's default `message.max.bytes`
/// (1 MiB), so what the embedded log accepts, MSK accepts too.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// A record to publish. The key is the tenant id, so a tenant's records share one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: String,
    pub value: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Record {
    /// The record's size as a log keeps it: key, value and headers (names and values).
    pub fn bytes(&self) -> usize {
        self.key.len() + self.value.len() + self.headers.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>()
    }
}

/// Refuses (permanently) any record over [`MAX_RECORD_BYTES`]; every event-log adapter calls
/// it before writing anything, so a batch is never half-published for size.
pub fn check_record_sizes(records: &[Record]) -> PortResult<()> {
    match records.iter().find(|r| r.value.len() > MAX_RECORD_BYTES) {
        Some(r) => Err(PortError::invalid(
            "record",
            format!("its {} bytes exceed the {MAX_RECORD_BYTES}-byte limit", r.value.len()),
        )),
        None => Ok(()),
    }
}

/// `items` gathered by topic: one entry per topic, topics in the order they first appear, each
/// topic's items in the order they came. What one append per topic publishes.
pub fn by_topic<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut grouped: Vec<(String, Vec<T>)> = Vec::new();
    for (topic, item) in items {
        match grouped.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, run)) => run.push(item),
            None => grouped.push((topic, vec![item])),
        }
    }
    grouped
}

/// A record as stored in a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: String,
    pub value: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}
