//! The MSK trigger's `KafkaEvent`, both ways.

use aws_lambda_events::encodings::MillisecondTimestamp;
use aws_lambda_events::event::kafka::{KafkaEvent, KafkaRecord};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openqq_core::LogRecord;
use std::collections::HashMap;

/// The source ARN the local emulator puts in its events.
pub const LOCAL_SOURCE_ARN: &str = "arn:aws:kafka:local:000000000000:cluster/openqq-local/embedded";

/// Builds the event the MSK trigger would deliver for these records (grouped by partition, each
/// group in offset order).
pub fn to_event(records: &[LogRecord]) -> KafkaEvent {
    let mut by_partition: HashMap<String, Vec<KafkaRecord>> = HashMap::new();
    for r in records {
        let mut k = KafkaRecord::default();
        k.topic = Some(r.topic.clone());
        k.partition = r.partition as i64;
        k.offset = r.offset as i64;
        k.timestamp = MillisecondTimestamp(chrono::DateTime::from_timestamp_millis(r.timestamp_ms).unwrap_or_default());
        k.timestamp_type = Some("CREATE_TIME".into());
        k.key = Some(B64.encode(r.key.as_bytes()));
        k.value = Some(B64.encode(&r.value));
        k.headers = r
            .headers
            .iter()
            .map(|(name, v)| HashMap::from([(name.clone(), v.iter().map(|b| *b as i8).collect())]))
            .collect();
        by_partition.entry(format!("{}-{}", r.topic, r.partition)).or_default().push(k);
    }
    let mut event = KafkaEvent::default();
    event.event_source = Some("aws:kafka".into());
    event.event_source_arn = Some(LOCAL_SOURCE_ARN.into());
    event.records = by_partition;
    event
}

/// Parses an invocation payload leniently: a record without `headers` gets an empty list
/// (the library type requires the field; producers that set no headers may omit it).
pub fn parse_event(mut payload: serde_json::Value) -> Result<KafkaEvent, serde_json::Error> {
    if let Some(groups) = payload.get_mut("records").and_then(|r| r.as_object_mut()) {
        for list in groups.values_mut().filter_map(|l| l.as_array_mut()) {
            for rec in list.iter_mut().filter_map(|r| r.as_object_mut()) {
                rec.entry("headers").or_insert_with(|| serde_json::Value::Array(Vec::new()));
                if rec.get("headers").is_some_and(|h| h.is_null()) {
                    rec.insert("headers".into(), serde_json::Value::Array(Vec::new()));
                }
                // The library's timestamp reader panics on a fraction of a millisecond.
                if rec.get("timestamp").is_some_and(fractional) {
                    return Err(serde::de::Error::custom("a record's timestamp is not a whole number of milliseconds"));
                }
            }
        }
    }
    serde_json::from_value(payload)
}

/// A number, or a string holding one, with a fractional part.
fn fractional(v: &serde_json::Value) -> bool {
    let n = match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.parse::<f64>().ok(),
        _ => None,
    };
    n.is_some_and(|n| n.fract() != 0.0)
}

/// One record of an event, decoded from the wire shape.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub key: Option<Vec<u8>>,
    /// The value bytes, or why they could not be decoded.
    pub value: Result<Vec<u8>, String>,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Incoming {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_slice())
    }

    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }
}

impl From<&LogRecord> for Incoming {
    fn from(r: &LogRecord) -> Self {
        Self {
            topic: r.topic.clone(),
            partition: r.partition,
            offset: r.offset,
            key: Some(r.key.as_bytes().to_vec()),
            value: Ok(r.value.clone()),
            headers: r.headers.clone(),
        }
    }
}

/// The records of a batch read from the log in the order [`records`] gives the event that
/// carries them: partition by partition, each in offset order.
pub fn in_event_order(batch: &[LogRecord]) -> Vec<Incoming> {
    let mut sorted: Vec<&LogRecord> = batch.iter().collect();
    sorted.sort_by(|a, b| (&a.topic, a.partition, a.offset).cmp(&(&b.topic, b.partition, b.offset)));
    sorted.into_iter().map(Incoming::from).collect()
}

/// The records of an event, partition by partition (sorted by topic-partition key, so the order
/// is deterministic), each partition in offset order.
pub fn records(event: &KafkaEvent) -> Vec<Incoming> {
    let mut keys: Vec<&String> = event.records.keys().collect();
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let mut list: Vec<&KafkaRecord> = event.records[key].iter().collect();
        list.sort_by_key(|r| r.offset);
        for r in list {
            let topic =
                r.topic.clone().unwrap_or_else(|| key.rsplit_once('-').map(|(t, _)| t.to_owned()).unwrap_or_default());
            let value = match &r.value {
                Some(v) => B64.decode(v).map_err(|e| format!("value is not base64: {e}")),
                None => Err("record has no value".to_owned()),
            };
            out.push(Incoming {
                topic,
                partition: r.partition.max(0) as u32,
                offset: r.offset.max(0) as u64,
                key: r.key.as_ref().and_then(|k| B64.decode(k).ok()),
                value,
                headers: r
                    .headers
                    .iter()
                    .flat_map(|h| h.iter().map(|(k, v)| (k.clone(), v.iter().map(|b| *b as u8).collect())))
                    .collect(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aws_example_event_decodes_with_signed_header_bytes() {
        let ev = parse_event(serde_json::from_str(include_str!("../tests/fixtures/msk-event.json")).unwrap()).unwrap();
        let recs = records(&ev);
        assert_eq!(recs.len(), 4);
        // Partition lists come out sorted by key, each in offset order.
        assert_eq!(
            recs.iter().map(|r| (r.partition, r.offset)).collect::<Vec<_>>(),
            vec![(0, 15), (0, 16), (1, 3), (1, 4)]
        );
        assert_eq!(recs[0].topic, "design.submitted");
        assert_eq!(recs[0].header_str("correlation-id"), Some("corr-é"), "negative i8 bytes become UTF-8 again");
        assert!(recs[2].headers.is_empty(), "a record without headers decodes with none");
        assert!(recs[3].value.is_err(), "a value that is not base64 is reported, not a panic");
    }

    #[test]
    fn records_survive_a_round_trip_through_the_wire_shape() {
        let rec = LogRecord {
            topic: "t".into(),
            partition: 7,
            offset: 42,
            timestamp_ms: 1_700_000_000_123,
            key: "tenant".into(),
            value: vec![0, 159, 255, 10],
            headers: vec![("h".into(), vec![200, 1])],
        };
        let wire = serde_json::to_value(to_event(std::slice::from_ref(&rec))).unwrap();
        assert!(wire["records"]["t-7"][0]["headers"][0]["h"][0].as_i64().unwrap() < 0, "bytes are signed on the wire");
        let back = records(&parse_event(wire).unwrap());
        assert_eq!(back.len(), 1);
        assert_eq!((back[0].partition, back[0].offset), (7, 42));
        assert_eq!(back[0].value.as_ref().unwrap(), &rec.value);
        assert_eq!(back[0].key.as_deref(), Some(&b"tenant"[..]));
        assert_eq!(back[0].headers, rec.headers);
    }

    #[test]
    fn records_taken_straight_from_the_log_are_those_the_event_carries_partition_by_partition() {
        let rec = |partition: u32, offset: u64| LogRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp_ms: 1_700_000_000_000,
            key: format!("tenant-{}", offset % 3),
            value: format!("value {partition}/{offset}").into_bytes(),
            headers: vec![("h".into(), vec![200, offset as u8])],
        };
        // As the log hands a batch over: partitions interleaved, 10 after 2.
        let batch = [rec(10, 5), rec(2, 7), rec(10, 3), rec(2, 8), rec(0, 1), rec(10, 4)];
        // Each partition's records in order, as text: offset, key, value and headers.
        let shape = |recs: Vec<Incoming>| {
            let mut by_partition: HashMap<u32, Vec<String>> = HashMap::new();
            for r in recs {
                let seen = format!("{} {:?} {:?} {:?}", r.offset, r.key, r.value, r.headers);
                by_partition.entry(r.partition).or_default().push(seen);
            }
            by_partition
        };
        let direct = in_event_order(&batch);
        assert_eq!(
            direct.iter().map(|r| (r.partition, r.offset)).collect::<Vec<_>>(),
            [(0, 1), (2, 7), (2, 8), (10, 3), (10, 4), (10, 5)]
        );
        assert_eq!(shape(direct), shape(records(&to_event(&batch))));
    }

    /// Found by the `msk_event` fuzz target (fuzz/): aws_lambda_events asserts, and so panics, on
    /// a timestamp with a fraction of a millisecond; the event is refused as an error instead.
    #[test]
    fn an_event_whose_timestamp_has_a_fraction_is_an_error_not_a_panic() {
        let text = include_str!("../tests/fixtures/fuzz/msk-event-fractional-timestamp.json");
        assert!(parse_event(serde_json::from_str(text).unwrap()).is_err());
        let string = serde_json::json!({"records": {"t-0": [{"topic": "t", "partition": 0, "offset": 0,
            "timestamp": "1.5", "timestampType": "CREATE_TIME", "key": "", "value": ""}]}});
        assert!(parse_event(string).is_err());
    }
}
