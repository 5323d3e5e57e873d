//! ECP5 differential oracle: for every design recorded by `fixtures/ecp5/generate.py` (logic,
//! carry chains, wide multiplexers, registers, distributed and block RAM, multipliers, PLLs,
//! clock buffers and IO on every ECP5 device and package, legal and illegal), our verdict must be
//! nextpnr-ecp5's through placement (`--no-route`), and where it packed the design our
//! utilisation must be its report's, bel type by bel type.
//!
//! The committed recording is `fixtures/ecp5/corpus.json`; set `FPGA_ECP5_DIR` to a directory
//! the generator wrote to compare against live tool results instead.

use std::collections::BTreeMap;
use std::path::PathBuf;

use openqq_fpga::{FileNames, Input, Report, Severity, Verdict};
use serde_json::Value;

/// Cases where we knowingly differ from nextpnr-ecp5, each with its reason. The test fails if a
/// listed case starts to agree, so the list can only shrink.
const KNOWN_DIFFERENT: &[(&str, &str)] =
    &[("bad_iotype-000", UNKNOWN_IO_TYPE), ("bad_iotype-002", UNKNOWN_IO_TYPE), ("bad_iotype-004", UNKNOWN_IO_TYPE)];

const UNKNOWN_IO_TYPE: &str = "nextpnr-ecp5 accepts an IO_TYPE it does not know through packing, placement and routing and writes it into the textual config (PIOA.BASE_TYPE INPUT_HSTL15_I); only ecppack, which the corpus does not run, has no such setting. We reject it at the LPF (IO_TYPE_UNKNOWN)";

fn corpus() -> Value {
    let dir = std::env::var_os("FPGA_ECP5_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/ecp5"));
    let path = dir.join("corpus.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn validate(case: &Value, netlist: &str) -> Report {
    openqq_fpga::validate(&Input {
        device: case["device"].as_str().unwrap(),
        package: case["package"].as_str().unwrap(),
        netlist,
        constraints: case["lpf"].as_str(),
        bitstream: None,
        top: None,
        allow_unconstrained: case["allow_unconstrained"].as_bool().unwrap_or(false),
        files: FileNames { netlist: None, constraints: Some("top.lpf"), bitstream: None },
        budget: None,
    })
}

/// nextpnr-ecp5's first error, by a phrase in it, and the error codes of ours that say the same
/// thing. When nextpnr fails, one of our errors must be one of these: the same verdict for
/// another reason is a disagreement too.
const CAUSES: &[(&str, &[&str])] = &[
    ("which does not exist for package", &["PIN_NOT_IN_PACKAGE"]),
    ("is unconstrained in LPF", &["PORT_UNCONSTRAINED"]),
    ("since it is already bound to cell", &["PIN_DOUBLE_ASSIGNED", "RESOURCE_OVER_CAPACITY"]),
    ("unexpected input following", &["LPF_SYNTAX"]),
    ("expected", &["LPF_SYNTAX"]),
    ("failed to place PLL", &["RESOURCE_OVER_CAPACITY"]),
    ("no BELs remaining to implement cell type", &["RESOURCE_OVER_CAPACITY"]),
    ("must be driven by", &["DSP_ALU_INPUT", "DSP_SIGNED_INPUT"]),
    ("is unsupported (instantiated as", &["CELL_TYPE_UNSUPPORTED", "CELL_TYPE_UNKNOWN"]),
];

/// What is wrong with our answer for one case, if anything: (verdict problem, utilisation problem).
fn disagreement(case: &Value, report: &Report) -> (Option<String>, Option<String>) {
    let place = &case["place"];
    let tool_failed = place["exit"].as_i64() != Some(0);
    let we_failed = report.verdict == Verdict::Fail;
    let message = place["message"].as_str().unwrap_or("");
    let errors: Vec<&str> =
        report.findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.code.as_str()).collect();
    let same_cause = !tool_failed
        || CAUSES
            .iter()
            .find(|(phrase, _)| message.contains(phrase))
            .is_some_and(|(_, codes)| codes.iter().any(|c| errors.contains(c)));
    let verdict = (tool_failed != we_failed || !same_cause).then(|| {
        let ours: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .take(3)
            .map(|f| format!("{}: {}", f.code, f.message))
            .collect();
        format!("nextpnr exit {} ({message}), ours {:?} {ours:?}", place["exit"], report.verdict)
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
fn every_ecp5_design_gets_nextpnrs_verdict_and_pack_utilisation() {
    let corpus = corpus();
    let netlists: BTreeMap<&str, String> =
        corpus["netlists"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.to_string())).collect();
    let cases = corpus["cases"].as_array().expect("corpus.json has a cases array");
    assert!(cases.len() >= 150, "only {} cases recorded", cases.len());
    // Per class: (cases, verdicts agreeing, utilisations compared, utilisations agreeing).
    let mut per_class: BTreeMap<&str, [u32; 4]> = BTreeMap::new();
    let mut problems = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let class = case["class"].as_str().unwrap();
        let report = validate(case, &netlists[case["netlist"].as_str().unwrap()]);
        let (verdict, utilisation) = disagreement(case, &report);
        let packed = case["pack"]["utilization"].is_object();
        let tally = per_class.entry(class).or_default();
        tally[0] += 1;
        tally[1] += u32::from(verdict.is_none());
        tally[2] += u32::from(packed);
        tally[3] += u32::from(packed && utilisation.is_none());
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
    let mut total = [0; 4];
    let mut table = Vec::new();
    for (c, tally) in &per_class {
        let [n, v, u, ua] = tally;
        table.push(format!("{c}: verdict {v}/{n}, utilisation {ua}/{u}"));
        total.iter_mut().zip(tally).for_each(|(t, x)| *t += x);
    }
    let [n, v, u, ua] = total;
    table.push(format!("total: verdict {v}/{n}, utilisation {ua}/{u}"));
    eprintln!("agreement with nextpnr-ecp5 by class:\n  {}", table.join("\n  "));
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
