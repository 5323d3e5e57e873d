//! iCE40 PLL frequency checks. Where a PLL can sit (its input pad, its output pads, the
//! packages that bond it out) is checked in [`crate::sites`].
//!
//! Frequencies follow the iCE40 sysCLOCK PLL datasheet ranges, which icepll also uses: input
//! and phase detector 10–133 MHz, VCO 533–1066 MHz, output 16–275 MHz. nextpnr checks none of
//! these, so `PLL_FREQ_OUT_OF_RANGE` errors are deliberately stricter than the tool: such a
//! PLL places and routes but does not lock, or runs outside its specification.

use std::collections::HashMap;

use crate::design_view::{BitName, Names};
use crate::netlist::Param;
use crate::pcf::SetFrequency;
use crate::report::{Finding, Location};

const F_IN_MHZ: (f64, f64) = (10.0, 133.0);
const F_PFD_MHZ: (f64, f64) = (10.0, 133.0);
const F_VCO_MHZ: (f64, f64) = (533.0, 1066.0);
const F_OUT_MHZ: (f64, f64) = (16.0, 275.0);

/// One `SB_PLL40_*` cell, with the parameters that set its frequencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pll {
    /// Cell name, for finding locations.
    pub cell: String,
    /// Cell type (`SB_PLL40_PAD`, `SB_PLL40_2F_CORE`, …).
    pub cell_type: String,
    /// The top-level port bit on `PACKAGEPIN` (PAD variants only).
    pub pad_port: Option<BitName>,
    /// The name of the net on `REFERENCECLK` (CORE variants only), to find its `set_frequency`.
    pub reference_net: Option<BitName>,
    pub divr: u32,
    pub divf: u32,
    pub divq: u32,
    pub filter_range: u32,
    /// `SIMPLE` feeds the VCO back; the others (`DELAY`, `PHASE_AND_DELAY`, `EXTERNAL`) feed
    /// the divided output back, which moves where DIVQ sits.
    pub feedback_path: String,
}

impl Pll {
    fn input_net(&self) -> Option<BitName> {
        self.pad_port.or(self.reference_net)
    }
}

/// Reads a yosys parameter as an unsigned number: a bit string (`"0111111"`, the last 32 bits,
/// `x`/`z` as 0) or a JSON number. String parameters (with yosys' trailing space) give None.
pub(crate) fn param_u32(value: &Param<'_>) -> Option<u32> {
    match value {
        Param::Number(n) => n.parse::<u64>().ok().and_then(|n| u32::try_from(n).ok()),
        Param::Text(s) if !s.is_empty() && s.chars().all(|c| matches!(c, '0' | '1' | 'x' | 'z')) => {
            let tail = &s[s.len().saturating_sub(32)..];
            Some(tail.chars().fold(0u32, |acc, c| (acc << 1) | u32::from(c == '1')))
        }
        _ => None,
    }
}

/// Checks `set_frequency` values and, where a PLL's input frequency is known, its VCO, phase
/// detector and output frequencies. DIVQ outside 1–6 can never give a valid output with
/// simple feedback (533/275 > 2^0 and 1066/16 < 2^7), so that is checked even without one.
/// `names` resolves the `set_frequency` nets to the design's bits.
pub(crate) fn check_frequencies(
    plls: &[Pll],
    names: &Names<'_>,
    frequencies: &[SetFrequency],
    file: Option<&str>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    // The last set_frequency of a net wins; one lookup per PLL, however many lines there are.
    let mut mhz_of: HashMap<BitName, f64> = HashMap::new();
    for f in frequencies {
        mhz_of.extend(names.lookup(&f.net).map(|bit| (bit, f.mhz)));
    }
    let line_at = |line: u32| Location { file: file.map(str::to_owned), line: Some(line), ..Location::default() };
    for f in frequencies {
        if !(f.mhz > 0.0 && f.mhz <= F_OUT_MHZ.1) {
            findings.push(Finding::warning(
                "PLL_FREQ_OUT_OF_RANGE",
                format!(
                    "set_frequency {} {} MHz is outside what iCE40 clocks reach (above 0, at most {} MHz)",
                    f.net, f.mhz, F_OUT_MHZ.1
                ),
                line_at(f.line),
            ));
        }
    }
    for pll in plls {
        let cell_at =
            || Location { file: file.map(str::to_owned), cell: Some(pll.cell.clone()), ..Location::default() };
        let simple = pll.feedback_path == "SIMPLE";
        if simple && !(1..=6).contains(&pll.divq) {
            findings.push(Finding::error(
                "PLL_FREQ_OUT_OF_RANGE",
                format!(
                    "PLL '{}' has DIVQ {}; with simple feedback only 1 to 6 keep both VCO and output in range",
                    pll.cell, pll.divq
                ),
                cell_at(),
            ));
            continue;
        }
        let Some(f_in) = pll.input_net().and_then(|net| mhz_of.get(&net).copied()) else {
            continue;
        };
        let f_pfd = f_in / (f64::from(pll.divr) + 1.0);
        let multiplied = f_pfd * (f64::from(pll.divf) + 1.0);
        let divider = f64::from(1u32 << pll.divq.min(7));
        let (f_vco, f_out) =
            if simple { (multiplied, multiplied / divider) } else { (multiplied * divider, multiplied) };
        let stages = [
            ("input", f_in, F_IN_MHZ),
            ("phase detector", f_pfd, F_PFD_MHZ),
            ("VCO", f_vco, F_VCO_MHZ),
            ("output", f_out, F_OUT_MHZ),
        ];
        for (stage, mhz, (lo, hi)) in stages {
            if !(lo..=hi).contains(&mhz) {
                findings.push(Finding::error(
                    "PLL_FREQ_OUT_OF_RANGE",
                    format!(
                        "PLL '{}' {stage} runs at {mhz:.2} MHz (DIVR {}, DIVF {}, DIVQ {}, {f_in} MHz in); the datasheet range is {lo}–{hi} MHz",
                        pll.cell, pll.divr, pll.divf, pll.divq
                    ),
                    cell_at(),
                ));
            }
        }
        let expected = expected_filter_range(f_pfd);
        if (F_PFD_MHZ.0..=F_PFD_MHZ.1).contains(&f_pfd) && pll.filter_range != expected {
            findings.push(Finding::warning(
                "PLL_FREQ_OUT_OF_RANGE",
                format!("PLL '{}' has FILTER_RANGE {} but its {f_pfd:.2} MHz phase detector wants {expected} (as icepll computes it)", pll.cell, pll.filter_range),
                cell_at(),
            ));
        }
    }
    findings
}

/// The loop filter setting icepll picks for a phase detector frequency.
fn expected_filter_range(f_pfd: f64) -> u32 {
    [17.0, 26.0, 44.0, 66.0, 101.0].iter().position(|limit| f_pfd < *limit).map_or(6, |i| i as u32 + 1)
}

#[cfg(test)]
mod tests;
