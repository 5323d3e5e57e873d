//! Our packer against nextpnr-ice40 0.4: for every recorded fixture (see
//! `fixtures/generate.py`), the utilisation we compute must equal what `nextpnr-ice40
//! --pack-only --report` reported for the same netlist — used and available, every resource.

use std::collections::BTreeMap;
use std::path::PathBuf;

use openqq_fpga::{device, netlist, pack};

/// Fixtures where our utilisation is known to differ from nextpnr's. Empty: every recorded
/// fixture must match. Kept so a future known difference is listed, not hidden; the test fails
/// if a listed fixture starts to match, so the list can only shrink.
const KNOWN_DIFFERENT: &[&str] = &[];

fn cases() -> Vec<(String, serde_json::Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cases");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures/cases exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn ours(case: &serde_json::Value) -> (BTreeMap<String, (u64, u64)>, pack::Breakdown) {
    let dev = device::device(case["device"].as_str().unwrap()).unwrap();
    let text = case["netlist"].to_string();
    let module = netlist::parse(&text, None).unwrap();
    let packed = pack::pack(&module, dev);
    let util = dev
        .capacities()
        .into_iter()
        .map(|(r, avail)| (r.to_owned(), (u64::from(packed.used.get(r).copied().unwrap_or(0)), u64::from(avail))))
        .collect();
    (util, packed.breakdown)
}

#[test]
fn our_utilisation_equals_nextpnr_pack_only_for_every_fixture() {
    let cases = cases();
    assert!(cases.len() >= 40, "expected the recorded fixtures, found {}", cases.len());
    let mut failures = Vec::new();
    for (name, case) in &cases {
        let theirs: BTreeMap<String, (u64, u64)> = case["nextpnr"]["utilization"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), (v["used"].as_u64().unwrap(), v["available"].as_u64().unwrap())))
            .collect();
        let (ours, breakdown) = ours(case);
        if KNOWN_DIFFERENT.contains(&name.as_str()) {
            if ours == theirs {
                failures.push(format!("{name}: now matches nextpnr; remove it from KNOWN_DIFFERENT"));
            }
            continue;
        }
        if ours != theirs {
            let diff: Vec<String> = theirs
                .iter()
                .filter(|(k, v)| ours.get(*k) != Some(v))
                .map(|(k, v)| format!("{k}: nextpnr {v:?}, ours {:?}", ours.get(k)))
                .chain(ours.keys().filter(|k| !theirs.contains_key(*k)).map(|k| format!("{k}: only ours")))
                .collect();
            failures.push(format!(
                "{name}: {}\n    nextpnr log {}\n    ours {breakdown:?}",
                diff.join("; "),
                case["nextpnr"]["log"]
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} fixtures differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
