//! A tenant's share of a batch, for the functions whose records are slow (synthesis, generation:
//! seconds each), and a tenant's time slice of a batch, for those whose records are usually quick
//! but need not be (validation).
//!
//! Records are keyed by tenant, so a tenant's backlog sits on one partition, and a batch of that
//! partition runs its lanes (one per tenant) side by side but ends only when the longest lane
//! does. A tenant with a hundred slow records in the batch would hold the partition, and every
//! other tenant hashed to it, for all hundred. With a share of `n`, a lane handles its tenant's
//! first `n` records and puts the rest back at the end of the topic (the same key, value and
//! headers, counted in a `deferred` header), so the partition moves on after `n` of them and the
//! other tenants' records there wait for at most that. Nothing is dropped: a deferred record is
//! read again after what arrived meanwhile.
//!
//! A handler whose records are quick but may each take up to a budget (validation: milliseconds,
//! up to its time budget for a netlist built to be slow) gives a time slice instead
//! ([`RecordHandler::slice`](crate::RecordHandler::slice)): once the slice has passed since the
//! batch began, a lane begins no more records and puts the rest back the same way, so a tenant
//! holds the partition for at most the slice plus one record's work, however many of its records
//! the batch holds, while a batch of quick records is still handled whole.
//!
//! Each design's revisions still apply in order (every write is conditional on revision: a
//! revision deferred behind a newer one of its design finds that one's entries and stops); a
//! tenant's different designs may finish in another order than they were submitted.

use crate::kafka::Incoming;
use openqq_core::event::headers;
use openqq_core::Record;

/// Splits `lanes` into what this batch handles (each lane's first `share` records, and any
/// whose bytes did not decode, which end at once) and the records deferred past the share.
pub(crate) fn split(lanes: Vec<Vec<Incoming>>, share: Option<usize>) -> (Vec<Vec<Incoming>>, Vec<Incoming>) {
    let Some(share) = share else { return (lanes, Vec::new()) };
    let mut deferred = Vec::new();
    let kept = lanes
        .into_iter()
        .map(|lane| {
            let mut taken = 0;
            let mut kept = Vec::with_capacity(lane.len().min(share));
            for rec in lane {
                if rec.value.is_err() || taken < share {
                    taken += usize::from(rec.value.is_ok());
                    kept.push(rec);
                } else {
                    deferred.push(rec);
                }
            }
            kept
        })
        .collect();
    (kept, deferred)
}

/// The record a deferred one is published again as: its key, value and headers, with the
/// `deferred` header counting how many times it was put back.
pub(crate) fn again(rec: &Incoming) -> Record {
    let times = rec.header_str(headers::DEFERRED).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0) + 1;
    let mut kept: Vec<(String, Vec<u8>)> =
        rec.headers.iter().filter(|(name, _)| name != headers::DEFERRED).cloned().collect();
    kept.push((headers::DEFERRED.to_owned(), times.to_string().into_bytes()));
    Record {
        key: rec.key.as_deref().map(|k| String::from_utf8_lossy(k).into_owned()).unwrap_or_default(),
        value: rec.value.as_ref().cloned().unwrap_or_default(),
        headers: kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, key: &str, value: Result<Vec<u8>, String>) -> Incoming {
        Incoming {
            topic: "synthesis.requested".into(),
            partition: 0,
            offset,
            key: Some(key.as_bytes().to_vec()),
            value,
            headers: vec![("correlation-id".into(), b"c".to_vec())],
        }
    }

    fn offsets(lanes: &[Vec<Incoming>]) -> Vec<Vec<u64>> {
        lanes.iter().map(|l| l.iter().map(|r| r.offset).collect()).collect()
    }

    #[test]
    fn each_lane_keeps_its_first_records_up_to_the_share_and_defers_the_rest_in_order() {
        let lanes = vec![(0..5).map(|o| rec(o, "noisy", Ok(vec![1]))).collect(), vec![rec(5, "quiet", Ok(vec![2]))]];
        let (kept, deferred) = split(lanes, Some(2));
        assert_eq!(offsets(&kept), [vec![0, 1], vec![5]]);
        assert_eq!(deferred.iter().map(|r| r.offset).collect::<Vec<_>>(), [2, 3, 4]);
    }

    #[test]
    fn without_a_share_nothing_is_deferred_and_undecodable_records_are_never_deferred() {
        let lane = || vec![rec(0, "t", Ok(vec![1])), rec(1, "t", Err("bad base64".into())), rec(2, "t", Ok(vec![1]))];
        let (kept, deferred) = split(vec![lane()], None);
        assert_eq!((offsets(&kept), deferred.len()), (vec![vec![0, 1, 2]], 0));
        let (kept, deferred) = split(vec![lane()], Some(1));
        assert_eq!(offsets(&kept), [vec![0, 1]], "the bad record ends at once (dead-lettered), so it stays");
        assert_eq!(deferred.iter().map(|r| r.offset).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn a_deferred_record_keeps_its_key_value_and_headers_and_counts_its_deferrals() {
        let first = again(&rec(7, "noisy", Ok(b"{}".to_vec())));
        assert_eq!((first.key.as_str(), first.value.as_slice()), ("noisy", &b"{}"[..]));
        assert!(first.headers.contains(&("correlation-id".into(), b"c".to_vec())));
        assert!(first.headers.contains(&(headers::DEFERRED.into(), b"1".to_vec())));
        let mut back = rec(9, "noisy", Ok(b"{}".to_vec()));
        back.headers = first.headers;
        let second = again(&back);
        let counts: Vec<_> = second.headers.iter().filter(|(n, _)| n == headers::DEFERRED).collect();
        assert_eq!(counts, [&(headers::DEFERRED.to_owned(), b"2".to_vec())]);
    }
}
