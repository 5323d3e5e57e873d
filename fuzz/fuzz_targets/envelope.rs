//! Fuzzes the log record envelope as the consumer functions decode a record's value: the raw
//! envelope (`Envelope::decode`), and in one pass with each payload a function reads
//! (`Envelope::decode_as`). Whatever decodes must encode and decode again to the same record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openqq_core::batch::BatchSubmitted;
use openqq_core::event::{DesignSubmitted, ResultsReady, ValidationFinished};
use openqq_core::{Envelope, EventKind};

fuzz_target!(|data: &[u8]| {
    let _ = Envelope::<DesignSubmitted>::decode_as(data, EventKind::DesignSubmitted);
    let _ = Envelope::<DesignSubmitted>::decode_as(data, EventKind::ValidationRequested);
    let _ = Envelope::<ValidationFinished>::decode_as(data, EventKind::ValidationFinished);
    let _ = Envelope::<ResultsReady>::decode_as(data, EventKind::ResultsReady);
    let _ = Envelope::<BatchSubmitted>::decode_as(data, EventKind::BatchSubmitted);
    let Ok(envelope) = Envelope::decode(data) else { return };
    let record = envelope.to_record();
    let again = Envelope::decode(&record.value).expect("an envelope's own record decodes");
    assert_eq!(again.to_record(), record, "decode and encode reach a fixed point");
    let _ = envelope.typed::<DesignSubmitted>(EventKind::DesignSubmitted);
});
