//! Unit tests for the PLL checks.

use super::*;
use crate::constraints::Design;

/// The names of a design with one port, `clk`.
fn names() -> Names<'static> {
    Design::with_ports(&["clk"]).names
}

fn clk() -> BitName {
    names().lookup("clk").next().unwrap()
}

fn pll(divr: u32, divf: u32, divq: u32, filter_range: u32) -> Pll {
    Pll {
        cell: "pll".to_owned(),
        cell_type: "SB_PLL40_PAD".to_owned(),
        pad_port: Some(clk()),
        reference_net: None,
        divr,
        divf,
        divq,
        filter_range,
        feedback_path: "SIMPLE".to_owned(),
    }
}

fn at_12_mhz() -> Vec<SetFrequency> {
    vec![SetFrequency { line: 3, net: "clk".to_owned(), mhz: 12.0 }]
}

fn codes(findings: &[Finding]) -> Vec<(crate::report::Severity, &str)> {
    findings.iter().map(|f| (f.severity, f.code.as_str())).collect()
}

#[test]
fn yosys_bit_string_and_number_parameters_are_read() {
    let text = |s: &str| Param::Text(s.to_owned().into());
    assert_eq!(param_u32(&text("0111111")), Some(63));
    assert_eq!(param_u32(&text("x1")), Some(1));
    assert_eq!(param_u32(&Param::Number("5")), Some(5));
    assert_eq!(param_u32(&Param::Number("5.5")), None);
    assert_eq!(param_u32(&text("SIMPLE")), None);
    assert_eq!(param_u32(&text("01 ")), None);
    assert_eq!(param_u32(&text(&"1".repeat(40))), Some(u32::MAX));
}

#[test]
fn a_12_to_48_mhz_pll_is_in_range() {
    assert!(check_frequencies(&[pll(0, 63, 4, 1)], &names(), &at_12_mhz(), None).is_empty());
}

#[test]
fn a_vco_above_1066_mhz_is_an_error() {
    let findings = check_frequencies(&[pll(0, 127, 4, 1)], &names(), &at_12_mhz(), None);
    assert_eq!(codes(&findings), vec![(crate::report::Severity::Error, "PLL_FREQ_OUT_OF_RANGE")]);
    assert!(findings[0].message.contains("VCO"));
}

#[test]
fn divq_zero_is_an_error_even_without_an_input_frequency() {
    let findings = check_frequencies(&[pll(0, 63, 0, 1)], &names(), &[], None);
    assert_eq!(codes(&findings), vec![(crate::report::Severity::Error, "PLL_FREQ_OUT_OF_RANGE")]);
}

#[test]
fn without_an_input_frequency_only_divq_is_checked() {
    assert!(check_frequencies(&[pll(15, 127, 6, 0)], &names(), &[], None).is_empty());
}

#[test]
fn a_wrong_filter_range_is_a_warning() {
    let findings = check_frequencies(&[pll(0, 63, 4, 3)], &names(), &at_12_mhz(), None);
    assert_eq!(codes(&findings), vec![(crate::report::Severity::Warning, "PLL_FREQ_OUT_OF_RANGE")]);
}

#[test]
fn non_simple_feedback_divides_after_the_output() {
    let mut p = pll(0, 3, 4, 1);
    p.feedback_path = "DELAY".to_owned();
    // 12 MHz × 4 = 48 MHz out; VCO = 48 × 16 = 768 MHz.
    assert!(check_frequencies(&[p], &names(), &at_12_mhz(), None).is_empty());
}

#[test]
fn a_non_positive_set_frequency_is_a_warning() {
    let f = vec![SetFrequency { line: 1, net: "clk".to_owned(), mhz: -5.0 }];
    assert_eq!(
        codes(&check_frequencies(&[], &names(), &f, None)),
        vec![(crate::report::Severity::Warning, "PLL_FREQ_OUT_OF_RANGE")]
    );
}

#[test]
fn huge_divider_parameters_do_not_overflow() {
    let findings = check_frequencies(&[pll(u32::MAX, u32::MAX, 3, 0)], &names(), &at_12_mhz(), None);
    assert!(findings.iter().all(|f| f.code == "PLL_FREQ_OUT_OF_RANGE"));
}
