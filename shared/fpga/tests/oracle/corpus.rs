//! The generated differential corpora (`fixtures/hardip`, `fixtures/ecp5`): a recording of the
//! tool's verdict and utilisation per design, and the check that holds our reports to it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use openqq_fpga::{FileNames, Input, Report, Severity, Verdict};
use serde_json::Value;

/// One recorded corpus and how to read it.
pub struct Differential {
    /// The tool whose answers were recorded (`nextpnr-ice40`), for messages.
    pub tool: &'static str,
    /// The variable naming a directory the generator wrote, to compare against live results.
    pub dir_var: &'static str,
    /// The committed recording's directory, relative to the crate.
    pub fixtures: &'static str,
    /// The case's field holding the run whose exit status is the verdict (`flow`, `place`).
    pub verdict_run: &'static str,
    /// The case's field holding the constraints text, also its file extension (`pcf`, `lpf`).
    pub constraints: &'static str,
    /// The tool's first error, by a phrase in it, and the error codes of ours that say the same
    /// thing. When the tool fails, one of our errors must be one of these: the same verdict for
    /// another reason is a disagreement too.
    pub causes: &'static [(&'static str, &'static [&'static str])],
    /// Cases where we knowingly differ, each with its reason. The check fails if a listed case
    /// starts to agree, so the list can only shrink.
    pub known_different: &'static [(&'static str, &'static str)],
    /// Fewer recorded cases than this is a broken recording.
    pub min_cases: usize,
}

impl Differential {
    pub fn corpus(&self) -> Value {
        let dir = std::env::var_os(self.dir_var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(self.fixtures));
        let path = dir.join("corpus.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
    }

    fn validate(&self, case: &Value, netlist: &str) -> Report {
        let file = format!("top.{}", self.constraints);
        openqq_fpga::validate(&Input {
            device: case["device"].as_str().unwrap(),
            package: case["package"].as_str().unwrap(),
            netlist,
            constraints: case[self.constraints].as_str(),
            bitstream: None,
            top: None,
            allow_unconstrained: case["allow_unconstrained"].as_bool().unwrap_or(false),
            files: FileNames { netlist: None, constraints: Some(&file), bitstream: None },
            budget: None,
            started: None,
        })
    }

    /// What is wrong with our answer for one case, if anything: (verdict problem, utilisation
    /// problem).
    fn disagreement(&self, case: &Value, report: &Report) -> (Option<String>, Option<String>) {
        let run = &case[self.verdict_run];
        let tool_failed = run["exit"].as_i64() != Some(0);
        let we_failed = report.verdict == Verdict::Fail;
        let message = run["message"].as_str().unwrap_or("");
        let errors: Vec<&str> =
            report.findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.code.as_str()).collect();
        let same_cause = !tool_failed
            || self
                .causes
                .iter()
                .find(|(phrase, _)| message.contains(phrase))
                .is_some_and(|(_, codes)| codes.iter().any(|c| errors.contains(c)));
        let verdict = (tool_failed != we_failed || !same_cause).then(|| {
            let ours: Vec<String> = report
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Error)
                .take(5)
                .map(|f| format!("{}: {}", f.code, f.message))
                .collect();
            format!("{} exit {} ({message}), ours {:?} {ours:?}", self.tool, run["exit"], report.verdict)
        });
        let utilisation = case["pack"]["utilization"].as_object().and_then(|theirs| {
            let ours: BTreeMap<&str, (u32, u32)> =
                report.utilization.iter().map(|u| (u.resource.as_str(), (u.used, u.available))).collect();
            let diff: Vec<String> = theirs
                .iter()
                .filter_map(|(r, v)| {
                    let want = (v["used"].as_u64().unwrap() as u32, v["available"].as_u64().unwrap() as u32);
                    let got = ours.get(r.as_str()).copied().unwrap_or((0, 0));
                    (got != want).then(|| format!("{r}: {} {want:?}, ours {got:?}", self.tool))
                })
                .collect();
            (!diff.is_empty()).then(|| diff.join("; "))
        });
        (verdict, utilisation)
    }

    /// Every recorded case gets the tool's verdict (for the same cause) and, where the tool
    /// packed the design, its utilisation resource by resource; prints the agreement by class.
    pub fn check_every_case(&self) {
        let corpus = self.corpus();
        let netlists: BTreeMap<&str, String> =
            corpus["netlists"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.to_string())).collect();
        let cases = corpus["cases"].as_array().expect("corpus.json has a cases array");
        assert!(cases.len() >= self.min_cases, "only {} cases recorded", cases.len());
        // Per class: (cases, verdicts agreeing, utilisations compared, utilisations agreeing).
        let mut per_class: BTreeMap<&str, [u32; 4]> = BTreeMap::new();
        let mut problems = Vec::new();
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let class = case["class"].as_str().unwrap();
            let report = self.validate(case, &netlists[case["netlist"].as_str().unwrap()]);
            let (verdict, utilisation) = self.disagreement(case, &report);
            let packed = case["pack"]["utilization"].is_object();
            let tally = per_class.entry(class).or_default();
            tally[0] += 1;
            tally[1] += u32::from(verdict.is_none());
            tally[2] += u32::from(packed);
            tally[3] += u32::from(packed && utilisation.is_none());
            let differs = verdict.is_some() || utilisation.is_some();
            match (self.known_different.iter().find(|(n, _)| *n == name), differs) {
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
        eprintln!("agreement with {} by class:\n  {}", self.tool, table.join("\n  "));
        assert!(problems.is_empty(), "{} of {} cases disagree:\n{}", problems.len(), cases.len(), problems.join("\n"));
    }

    /// Every known difference names a recorded case and gives its reason.
    pub fn check_known_differences(&self) {
        let corpus = self.corpus();
        let names: Vec<&str> =
            corpus["cases"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        for (name, reason) in self.known_different {
            assert!(names.contains(name), "{name} is not in the corpus");
            assert!(reason.len() > 20, "{name} needs a reason");
        }
    }
}
