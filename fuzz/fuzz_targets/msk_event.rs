//! Fuzzes the MSK trigger's event as a Lambda function reads it: JSON bytes to the event
//! (`kafka::parse_event`, lenient about absent headers), the event to its records (base64 keys
//! and values, Kafka headers as lists of signed bytes), and each record's value to an envelope
//! and its headers to a dead letter, as the consumer and the replay tool read them.
//!
//! Round trip: the records that the local emulator could have carried (a UTF-8 key, a value)
//! must come back from the event it builds for them unchanged, partition by partition.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_core::{DeadLetter, Envelope, LogRecord};
use openqq_runtime::kafka::{parse_event, records, to_event, Incoming};

/// A record as the comparison sees it: topic, partition, offset, key, value, headers.
type Seen = (String, u32, u64, Option<Vec<u8>>, Vec<u8>, Vec<(String, Vec<u8>)>);

/// The records with a value, in one order whatever order the event gave them in.
fn shape(records: &[Incoming]) -> Vec<Seen> {
    let mut all: Vec<_> = records
        .iter()
        .filter_map(|r| {
            let value = r.value.as_ref().ok()?.clone();
            Some((r.topic.clone(), r.partition, r.offset, r.key.clone(), value, r.headers.clone()))
        })
        .collect();
    all.sort();
    all
}

fuzz_target!(|data: &[u8]| {
    let Ok(payload) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let Ok(event) = parse_event(payload) else { return };
    let incoming = records(&event);
    let mut carried = Vec::new();
    for rec in &incoming {
        let _ = rec.header_str("correlation-id");
        let Ok(value) = &rec.value else { continue };
        let _ = Envelope::decode(value);
        let Some(key) = rec.key.as_ref().and_then(|k| String::from_utf8(k.clone()).ok()) else { continue };
        let log = LogRecord {
            topic: rec.topic.clone(),
            partition: rec.partition,
            offset: rec.offset,
            timestamp_ms: 0,
            key,
            value: value.clone(),
            headers: rec.headers.clone(),
        };
        if let Ok(letter) = DeadLetter::from_record(&log) {
            let _ = letter.to_record();
        }
        carried.push(log);
    }
    let back = records(&to_event(&carried));
    let sent: Vec<Incoming> = carried.iter().map(Incoming::from).collect();
    assert_eq!(shape(&back), shape(&sent), "records survive the event the emulator builds");
});
