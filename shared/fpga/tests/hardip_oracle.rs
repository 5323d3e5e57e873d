//! Hard-IP differential oracle: for every design recorded by `fixtures/hardip/generate.py`
//! (PLLs, IO primitives, global buffers and the UltraPlus hard cells at random legal and illegal
//! sites, on hx1k, hx4k, hx8k, lp8k, lp384, up5k and u4k in several packages), our verdict must be
//! the full nextpnr-ice40 flow's exit status, and where `--pack-only` packed the design our
//! utilisation must be its report's, resource by resource.
//!
//! The committed recording is `fixtures/hardip/corpus.json`; set `FPGA_HARDIP_DIR` to a
//! directory the generator wrote to compare against live tool results instead.

use std::collections::BTreeMap;
use std::path::PathBuf;

use openqq_fpga::{FileNames, Input, Report, Severity, Verdict};
use serde_json::Value;

/// Cases where we knowingly differ from nextpnr-ice40 0.4, each with its reason. The test fails
/// if a listed case starts to agree, so the list can only shrink.
const KNOWN_DIFFERENT: &[(&str, &str)] = &[];

fn corpus() -> Value {
    let dir = std::env::var_os("FPGA_HARDIP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/hardip"));
    let path = dir.join("corpus.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn validate(case: &Value, netlist: &str) -> Report {
    openqq_fpga::validate(&Input {
        device: case["device"].as_str().unwrap(),
        package: case["package"].as_str().unwrap(),
        netlist,
        constraints: case["pcf"].as_str(),
        bitstream: None,
        top: None,
        allow_unconstrained: case["allow_unconstrained"].as_bool().unwrap_or(false),
        files: FileNames { netlist: None, constraints: Some("top.pcf"), bitstream: None },
        budget: None,
    })
}

/// nextpnr-ice40's first error, by a phrase in it, and the error codes of ours that say the same
/// thing. When nextpnr fails, one of our errors must be one of these: the same verdict for
/// another reason is a disagreement too.
const CAUSES: &[(&str, &[&str])] = &[
    ("is not connected to any PLL BEL", &["PLL_PAD_PIN_INVALID"]),
    ("PACKAGEPIN SB_IO", &["PLL_PAD_PIN_INVALID"]),
    ("but BEL is already assigned to PLL", &["PLL_SITE_TAKEN"]),
    ("B output conflicts with SB_IO", &["PLL_OUTPUT_PAD_CONFLICT"]),
    ("couldn't be placed anywhere", &["PLL_NO_SITE"]),
    ("has no global buffer connection available", &["GB_IO_PIN_NOT_GLOBAL"]),
    ("Unconstrained SB_GB_IO", &["GB_IO_UNCONSTRAINED"]),
    ("is not valid for cell", &["IO_PAIR_CONFLICT"]),
    ("Found two arcs with same sink wire", &["IO_PAIR_CONFLICT"]),
    ("can only drive PLL", &["PLL_PAD_NOT_FROM_PIN"]),
    ("Invalid value for BUS_ADDR74", &["HARD_IP_SITE_INVALID"]),
    ("is unsupported (instantiated as", &["CELL_TYPE_UNSUPPORTED"]),
    ("package does not have a pin named", &["PIN_NOT_IN_PACKAGE"]),
    ("since it is already bound to cell", &["PIN_DOUBLE_ASSIGNED", "HARD_IP_SITE_TAKEN", "RESOURCE_OVER_CAPACITY"]),
    ("no BELs remaining to implement cell type", &["RESOURCE_OVER_CAPACITY", "RESOURCE_ABSENT"]),
    ("Unable to place cell", &["RESOURCE_ABSENT", "RESOURCE_OVER_CAPACITY"]),
    ("Unable to find placement for cell", &["RESOURCE_ABSENT", "HARD_IP_SITE_INVALID"]),
    ("should be driven by port LEDPU of SB_LED_DRV_CUR", &["LED_DRIVER_UNPOWERED"]),
    ("port connected to more than just package pin", &["LED_DRIVER_OUTPUT_SHARED"]),
    ("No wire found for port CLKHF_FABRIC", &["OSC_FABRIC_UNSUPPORTED"]),
];

/// What is wrong with our answer for one case, if anything: (verdict problem, utilisation problem).
fn disagreement(case: &Value, report: &Report) -> (Option<String>, Option<String>) {
    let flow = &case["flow"];
    let tool_failed = flow["exit"].as_i64() != Some(0);
    let we_failed = report.verdict == Verdict::Fail;
    let message = flow["message"].as_str().unwrap_or("");
    let errors: Vec<&str> =
        report.findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.code.as_str()).collect();
    let same_cause = !tool_failed
        || CAUSES
            .iter()
            .find(|(phrase, _)| message.contains(phrase))
            .is_some_and(|(_, codes)| codes.iter().any(|c| errors.contains(c)));
    let verdict = (tool_failed != we_failed || !same_cause).then(|| {
        let ours: Vec<String> =
            report.findings.iter().map(|f| format!("{:?} {}: {}", f.severity, f.code, f.message)).collect();
        format!("nextpnr exit {} ({message}), ours {:?} {ours:?}", flow["exit"], report.verdict)
    });
    let utilisation = case["pack"]["utilization"].as_object().and_then(|theirs| {
        let ours: BTreeMap<&str, (u32, u32)> =
            report.utilization.iter().map(|u| (u.resource.as_str(), (u.used, u.available))).collect();
        let diff: Vec<String> = theirs
            .iter()
            .filter_map(|(r, v)| {
                let want = (v["used"].as_u64().unwrap() as u32, v["available"].as_u64().unwrap() as u32);
                let got = ours.get(r.as_str()).copied().unwrap_or((0, 0));
                (got != want).then(|| format!("{r}: nextpnr {want:?}, ours {got:?}"))
            })
            .collect();
        (!diff.is_empty()).then(|| diff.join("; "))
    });
    (verdict, utilisation)
}

#[test]
fn every_hard_ip_design_gets_the_full_flows_verdict_and_pack_only_utilisation() {
    let corpus = corpus();
    let netlists: BTreeMap<&str, String> =
        corpus["netlists"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.to_string())).collect();
    let cases = corpus["cases"].as_array().expect("corpus.json has a cases array");
    assert!(cases.len() >= 300, "only {} cases recorded", cases.len());
    // Per class: (cases, verdicts agreeing, utilisations compared, utilisations agreeing).
    let mut per_class: BTreeMap<&str, [u32; 4]> = BTreeMap::new();
    let mut problems = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let class = case["class"].as_str().unwrap();
        let report = validate(case, &netlists[case["netlist"].as_str().unwrap()]);
        let (verdict, utilisation) = disagreement(case, &report);
        let tally = per_class.entry(class).or_default();
        tally[0] += 1;
        tally[1] += u32::from(verdict.is_none());
        tally[2] += u32::from(case["pack"]["utilization"].is_object());
        tally[3] += u32::from(case["pack"]["utilization"].is_object() && utilisation.is_none());
        let differs = verdict.is_some() || utilisation.is_some();
        match (KNOWN_DIFFERENT.iter().find(|(n, _)| *n == name), differs) {
            (Some(_), false) => problems.push(format!("{name}: now agrees; remove it from KNOWN_DIFFERENT")),
            (None, true) => problems.push(format!(
                "{name} ({} {}): {}",
                case["device"].as_str().unwrap(),
                case["package"].as_str().unwrap(),
                [verdict, utilisation].into_iter().flatten().collect::<Vec<_>>().join(" | ")
            )),
            _ => {}
        }
    }
    let table: Vec<String> =
        per_class.iter().map(|(c, [n, v, u, ua])| format!("{c}: verdict {v}/{n}, utilisation {ua}/{u}")).collect();
    eprintln!("agreement with nextpnr-ice40 by class:\n  {}", table.join("\n  "));
    assert!(problems.is_empty(), "{} of {} cases disagree:\n{}", problems.len(), cases.len(), problems.join("\n"));
}

#[test]
fn every_known_difference_names_a_recorded_case_and_a_reason() {
    let corpus = corpus();
    let names: Vec<&str> = corpus["cases"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    for (name, reason) in KNOWN_DIFFERENT {
        assert!(names.contains(name), "{name} is not in the corpus");
        assert!(reason.len() > 20, "{name} needs a reason");
    }
}
