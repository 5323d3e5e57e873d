use super::*;
use proptest::prelude::*;

fn finding(severity: Severity, code: &str, text: &str) -> Finding {
    Finding {
        severity,
        code: code.to_owned(),
        message: text.to_owned(),
        location: Location {
            file: Some(text.to_owned()),
            line: Some(u32::MAX),
            port: Some(text.to_owned()),
            pin: Some(text.to_owned()),
            cell: Some(text.to_owned()),
        },
    }
}

fn unconstrained_bits(n: usize) -> Vec<Finding> {
    (0..n)
        .map(|i| {
            let location = Location { port: Some(format!("bus[{i}]")), ..Location::default() };
            Finding::error("PORT_UNCONSTRAINED", format!("port 'bus[{i}]' has no set_io"), location)
        })
        .collect()
}

fn json_len(report: &Report) -> usize {
    serde_json::to_vec(report).expect("reports serialise").len()
}

#[test]
fn a_report_within_the_cap_comes_back_whole_and_without_a_summary() {
    let full = Report::new(
        vec![Utilization { resource: "ICESTORM_LC".into(), used: 1, available: 384 }],
        unconstrained_bits(3),
    );
    let (capped, cut) = full.clone().capped(MAX_REPORT_FINDINGS);
    assert!(!cut);
    assert_eq!(capped, full);
    let json = serde_json::to_value(&capped).unwrap();
    assert!(json.get("truncated").is_none(), "{json}");
}

#[test]
fn a_capped_report_keeps_errors_before_warnings_and_counts_what_it_left_out_by_code() {
    let mut findings = vec![Finding::warning("CELL_TYPE_UNKNOWN", "odd cell", Location::default()); 5];
    findings.extend(unconstrained_bits(20_000));
    findings.push(Finding::error("PLL_CONFIG_INVALID", "bad divider", Location::default()));
    let (capped, cut) = Report::new(Vec::new(), findings).capped(10);

    assert!(cut);
    assert_eq!(capped.verdict, Verdict::Fail);
    assert_eq!(capped.findings.len(), 10);
    assert!(capped.findings.iter().all(|f| f.severity == Severity::Error));
    assert_eq!(capped.findings[0].location.port.as_deref(), Some("bus[0]"), "keeps the first findings");
    let json = serde_json::to_value(&capped).unwrap();
    assert_eq!(
        json["truncated"],
        serde_json::json!({
            "findings_total": 20_006,
            "findings_kept": 10,
            "by_code": {"PORT_UNCONSTRAINED": 19_990, "PLL_CONFIG_INVALID": 1, "CELL_TYPE_UNKNOWN": 5},
        })
    );
}

#[test]
fn a_capped_report_keeps_the_verdict_of_the_full_report_even_with_no_findings_kept() {
    let (capped, cut) = Report::new(Vec::new(), unconstrained_bits(2)).capped(0);
    assert!(cut);
    assert!(capped.findings.is_empty());
    assert_eq!(capped.verdict, Verdict::Fail);
    assert_eq!(capped.truncated.unwrap().by_code["PORT_UNCONSTRAINED"], 2);
}

#[test]
fn huge_names_are_clipped_so_that_a_few_findings_cannot_fill_a_record() {
    let name = "n".repeat(1 << 20);
    let full = Report::new(Vec::new(), vec![finding(Severity::Error, "PORT_UNCONSTRAINED", &name); 4]);
    let (capped, cut) = full.capped(MAX_REPORT_FINDINGS);
    assert!(cut);
    assert_eq!(capped.findings.len(), 4, "clipping keeps the findings");
    let f = &capped.findings[0];
    assert!(f.message.ends_with('…') && f.message.len() <= MAX_MESSAGE_JSON_BYTES, "{}", f.message.len());
    assert!(f.location.cell.as_ref().unwrap().len() <= MAX_NAME_JSON_BYTES);
    let summary = capped.truncated.as_ref().unwrap();
    assert_eq!((summary.findings_kept, summary.texts_clipped), (4, 4));
    assert!(json_len(&capped) < 8 * 1024, "{}", json_len(&capped));
}

#[test]
fn the_byte_budget_stops_a_report_of_long_escaped_texts_before_the_count_does() {
    let text = "\u{1}".repeat(10_000);
    let full = Report::new(Vec::new(), vec![finding(Severity::Warning, "X", &text); 5_000]);
    let (capped, cut) = full.capped(usize::MAX);
    assert!(cut);
    assert!(capped.findings.len() < 5_000);
    assert!(json_len(&capped) <= MAX_CAPPED_REPORT_JSON_BYTES, "{}", json_len(&capped));
    let summary = capped.truncated.unwrap();
    assert_eq!(summary.by_code["X"], 5_000 - summary.findings_kept);
}

#[test]
fn clipping_counts_escapes_and_never_splits_a_character() {
    let mut quotes = "\"".repeat(100);
    assert!(clip(&mut quotes, 20));
    assert_eq!(quotes, format!("{}…", "\"".repeat(8)));
    let mut wide = "😀".repeat(10);
    assert!(clip(&mut wide, 11));
    assert_eq!(wide, "😀😀…");
    let mut short = "fits".to_owned();
    assert!(!clip(&mut short, 4));
    assert_eq!(short, "fits");
}

#[test]
fn a_capped_report_reads_back_as_the_same_report() {
    let (capped, _) = Report::new(Vec::new(), unconstrained_bits(700)).capped(MAX_REPORT_FINDINGS);
    let back: Report = serde_json::from_slice(&serde_json::to_vec(&capped).unwrap()).unwrap();
    assert_eq!(back, capped);
}

fn text() -> impl Strategy<Value = String> {
    ("[\u{0}-\u{1f}\"\\\\a-z_\\[\\]0-9é€😀]{0,6}", 0usize..3_000).prop_map(|(s, n)| s.repeat(n))
}

fn any_finding() -> impl Strategy<Value = Finding> {
    let severity = prop_oneof![Just(Severity::Error), Just(Severity::Warning), Just(Severity::Info)];
    let opt = || proptest::option::of(text());
    (severity, "[A-Z_\u{0}-\u{1f}]{1,12}", text(), (opt(), any::<Option<u32>>(), opt(), opt(), opt())).prop_map(
        |(severity, code, message, (file, line, port, pin, cell))| Finding {
            severity,
            code,
            message,
            location: Location { file, line, port, pin, cell },
        },
    )
}

fn any_report() -> impl Strategy<Value = Report> {
    let row = (text(), any::<u32>(), any::<u32>()).prop_map(|(resource, used, available)| Utilization {
        resource,
        used,
        available,
    });
    (prop::collection::vec(row, 0..40), prop::collection::vec(any_finding(), 0..1_200))
        .prop_map(|(utilization, findings)| Report::new(utilization, findings))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_capped_report_serialises_under_the_bound(full in any_report(), max in prop_oneof![Just(MAX_REPORT_FINDINGS), Just(usize::MAX), 0usize..50]) {
        let total = full.findings.len();
        let verdict = full.verdict;
        let (capped, cut) = full.capped(max);
        prop_assert!(json_len(&capped) <= MAX_CAPPED_REPORT_JSON_BYTES, "{} bytes", json_len(&capped));
        prop_assert_eq!(capped.verdict, verdict);
        prop_assert!(capped.findings.len() <= max);
        prop_assert!(capped.findings.windows(2).all(|w| w[0].severity <= w[1].severity));
        prop_assert_eq!(cut, capped.truncated.is_some());
        if let Some(t) = &capped.truncated {
            let dropped: usize = t.by_code.values().sum::<usize>() + t.other_codes;
            prop_assert_eq!(t.findings_total, total);
            prop_assert_eq!(t.findings_kept + dropped, total);
        } else {
            prop_assert_eq!(capped.findings.len(), total);
        }
    }
}
