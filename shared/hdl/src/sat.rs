//! Pure parsers for what the equivalence check reads back from Yosys: the ports of a prepared
//! design (`write_rtlil` of its port wires), whether it holds state, and the `sat` pass's
//! results and counterexample table.

use crate::findings::clip;
use serde::{Deserialize, Serialize};

/// A port as the check compares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    pub name: String,
    /// `input`, `output` or `inout`.
    pub direction: String,
    pub width: u32,
}

/// Ports from RTLIL wire declarations: `wire width 4 input 2 \a` (also `offset N`, `upto`,
/// `signed`), in declaration order.
pub fn parse_ports(rtlil: &str) -> Vec<Port> {
    let mut ports = Vec::new();
    for line in rtlil.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("wire") {
            continue;
        }
        let words: Vec<&str> = words.collect();
        let Some(name) = words.last().and_then(|n| n.strip_prefix('\\')) else { continue };
        let mut width = 1;
        let mut direction = None;
        let mut i = 0;
        while i + 1 < words.len() {
            match words[i] {
                "width" => width = words[i + 1].parse().unwrap_or(1),
                "input" | "output" | "inout" => direction = Some(words[i]),
                _ => {}
            }
            i += 1;
        }
        if let Some(direction) = direction {
            ports.push(Port { name: name.to_string(), direction: direction.to_string(), width });
        }
    }
    ports
}

/// Whether an RTLIL line declares a cell that holds state (flip-flops, latches, memories).
pub fn is_state_cell(line: &str) -> bool {
    let mut words = line.split_whitespace();
    if words.next() != Some("cell") {
        return false;
    }
    let kind = words.next().unwrap_or("").to_ascii_lowercase();
    kind.starts_with('$')
        && (kind.contains("dff")
            || kind.contains("latch")
            || kind.starts_with("$mem")
            || matches!(kind.as_str(), "$ff" | "$_ff_" | "$sr")
            || kind.starts_with("$_sr_"))
}

/// One signal's value at one step of a counterexample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalValue {
    /// The port's name.
    pub name: String,
    /// Binary, most significant bit first (`x` for undefined bits), clipped.
    pub value: String,
}

/// The signals of one time step (1 is the first clock cycle from the all-zero state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterexampleStep {
    pub step: u32,
    /// The inputs both designs received.
    pub inputs: Vec<SignalValue>,
    /// What the design under test drove.
    pub design_outputs: Vec<SignalValue>,
    /// What the reference drove.
    pub reference_outputs: Vec<SignalValue>,
}

/// Input values per step that make the two designs' outputs differ at the last step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counterexample {
    pub steps: Vec<CounterexampleStep>,
    /// Whether steps or signals were left out to keep it bounded.
    pub truncated: bool,
}

/// Steps kept in a counterexample.
pub const MAX_COUNTEREXAMPLE_STEPS: usize = 64;
/// Signals kept per step and side.
pub const MAX_COUNTEREXAMPLE_SIGNALS: usize = 64;
/// Bytes kept of one value.
const MAX_VALUE_BYTES: usize = 256;

/// The counterexample in a `sat -show-inputs -show-outputs` log of a miter built with
/// `miter -make_outputs` (inputs `in_*`, outputs `gold_*` for the design and `gate_*` for the
/// reference); rows look like `    2 \in_en   0   0   0` or, without `-seq`, `\in_a 0 0 0`.
pub fn parse_counterexample(log: &str) -> Option<Counterexample> {
    let mut steps: Vec<CounterexampleStep> = Vec::new();
    let mut truncated = false;
    let mut in_table = false;
    let mut first_difference = None;
    for line in log.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.windows(2).any(|w| w == ["Signal", "Name"]) {
            in_table = true;
            continue;
        }
        if !in_table || words.is_empty() || words[0].starts_with("--") {
            continue;
        }
        let (step, name) = match words[0].strip_prefix('\\') {
            Some(name) => (1, name),
            None => match (words[0].parse::<u32>(), words.get(1).and_then(|n| n.strip_prefix('\\'))) {
                (Ok(step), Some(name)) => (step, name),
                _ if words[0] == "init" => continue,
                _ => {
                    in_table = false;
                    continue;
                }
            },
        };
        let value = SignalValue { name: String::new(), value: clip(words[words.len() - 1], MAX_VALUE_BYTES) };
        let position = match steps.iter().position(|s| s.step == step) {
            Some(position) => position,
            None if steps.len() < MAX_COUNTEREXAMPLE_STEPS => {
                steps.push(CounterexampleStep {
                    step,
                    inputs: vec![],
                    design_outputs: vec![],
                    reference_outputs: vec![],
                });
                steps.len() - 1
            }
            None => {
                truncated = true;
                continue;
            }
        };
        if name == "trigger" && value.value.contains('1') {
            first_difference = Some(first_difference.map_or(step, |s: u32| s.min(step)));
        }
        let entry = &mut steps[position];
        let (list, port) = if let Some(port) = name.strip_prefix("in_") {
            (&mut entry.inputs, port)
        } else if let Some(port) = name.strip_prefix("gold_") {
            (&mut entry.design_outputs, port)
        } else if let Some(port) = name.strip_prefix("gate_") {
            (&mut entry.reference_outputs, port)
        } else {
            continue;
        };
        if list.len() < MAX_COUNTEREXAMPLE_SIGNALS {
            list.push(SignalValue { name: clip(port, MAX_VALUE_BYTES), ..value });
        } else {
            truncated = true;
        }
    }
    steps.sort_by_key(|s| s.step);
    // `sat -seq N` shows all N steps; the counterexample ends where the outputs first differ.
    if let Some(last) = first_difference {
        steps.retain(|s| s.step <= last);
    }
    (!steps.is_empty()).then_some(Counterexample { steps, truncated })
}

/// What one `sat` run concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SatResult {
    /// The property holds (all steps checked, or the induction step proven at this length).
    Proven { induction_length: Option<u32> },
    /// A model violating the property was found.
    Failed,
    /// Induction failed at every length up to the maximum.
    InductionInconclusive,
    /// The solver gave up on its time limit.
    TimedOut,
    /// The log says none of the above (the run was cut short).
    Unfinished,
}

/// The conclusion of a `sat` log (plain proof, `-seq` bounded proof or `-tempinduct`).
pub fn parse_sat_result(log: &str) -> SatResult {
    let mut length = None;
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("** Trying induction with length ") {
            length = rest.trim_end_matches(" **").parse().ok();
        } else if line.contains("Induction step proven: SUCCESS!") {
            return SatResult::Proven { induction_length: length };
        } else if line.contains("no model found: SUCCESS!") || line.contains("proved base case for") {
            return SatResult::Proven { induction_length: None };
        } else if line.contains("model found") && line.contains("FAIL!") {
            return SatResult::Failed;
        } else if line.contains("Reached maximum number of time steps -> proof failed") {
            return SatResult::InductionInconclusive;
        } else if line.contains("TIMEOUT") || line.contains("did time out") {
            return SatResult::TimedOut;
        }
    }
    SatResult::Unfinished
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_read_from_wire_declarations() {
        let rtlil = "module \\gold\n  attribute \\src \"a.v:1\"\n  wire width 4 input 2 \\a\n  wire input 1 \\clk\n\
                     \x20 wire width 8 offset 2 upto signed output 3 \\q\n  wire width 2 \\internal\n  connect \\w \\a\nend\n";
        assert_eq!(
            parse_ports(rtlil),
            vec![
                Port { name: "a".into(), direction: "input".into(), width: 4 },
                Port { name: "clk".into(), direction: "input".into(), width: 1 },
                Port { name: "q".into(), direction: "output".into(), width: 8 },
            ]
        );
    }

    #[test]
    fn state_cells_are_flip_flops_latches_and_memories() {
        for line in [
            "  cell $dff $procdff$12",
            "  cell $adffe $x",
            "  cell $_DFF_P_ $y",
            "  cell $dlatch $z",
            "  cell $mem_v2 m",
        ] {
            assert!(is_state_cell(line), "{line}");
        }
        for line in ["  cell $add $a", "  cell \\sub u", "  wire $dff", "  cell $mux $m"] {
            assert!(!is_state_cell(line), "{line}");
        }
    }

    #[test]
    fn a_sequential_counterexample_is_split_by_step_and_side() {
        let log = "SAT temporal induction proof finished - model found for base case: FAIL!\n\
                   \x20 Time Signal Name              Dec       Hex           Bin\n\
                   \x20 ---- ---------------- ----------- --------- -------------\n\
                   \x20 init \\gate.count                0         0      00000000\n\
                   \x20 ---- ---------------- ----------- --------- -------------\n\
                   \x20    1 \\gate_count                0         0      00000000\n\
                   \x20    1 \\in_en                     1         1             1\n\
                   \x20    1 \\trigger                   0         0             0\n\
                   \x20    2 \\gate_count                1         1      00000001\n\
                   \x20    2 \\gold_count                0         0      00000000\n\
                   \x20    2 \\in_rst                    1         1             1\n\
                   \x20    2 \\trigger                   1         1             1\n\
                   \x20    3 \\in_rst                    0         0             0\n\
                   \x20    3 \\trigger                   1         1             1\n\
                   ERROR: Called with -verify and proof did fail!\n";
        let cex = parse_counterexample(log).unwrap();
        assert_eq!(cex.steps.len(), 2);
        assert_eq!(cex.steps[0].inputs, vec![SignalValue { name: "en".into(), value: "1".into() }]);
        assert_eq!(cex.steps[1].design_outputs, vec![SignalValue { name: "count".into(), value: "00000000".into() }]);
        assert_eq!(cex.steps[1].reference_outputs[0].value, "00000001");
        assert!(!cex.truncated);
    }

    #[test]
    fn a_combinational_counterexample_is_one_step() {
        let log = "  Signal Name             Dec       Hex           Bin\n\
                   \x20 --------------- ----------- --------- -------------\n\
                   \x20 \\gate_y                   1         1      00000001\n\
                   \x20 \\gold_y                   0         0      00000000\n\
                   \x20 \\in_b                   128        80      10000000\n";
        let cex = parse_counterexample(log).unwrap();
        assert_eq!(cex.steps.len(), 1);
        assert_eq!(cex.steps[0].step, 1);
        assert_eq!(cex.steps[0].inputs[0], SignalValue { name: "b".into(), value: "10000000".into() });
        assert_eq!(parse_counterexample("no table here\n"), None);
    }

    #[test]
    fn counterexamples_are_bounded() {
        let mut log = String::from("Time Signal Name Dec Hex Bin\n");
        for step in 1..=100 {
            for signal in 0..100 {
                log.push_str(&format!("  {step} \\in_s{signal} 0 0 {}\n", "1".repeat(1000)));
            }
        }
        let cex = parse_counterexample(&log).unwrap();
        assert!(cex.truncated);
        assert_eq!(cex.steps.len(), MAX_COUNTEREXAMPLE_STEPS);
        assert!(cex.steps.iter().all(|s| s.inputs.len() == MAX_COUNTEREXAMPLE_SIGNALS));
        assert!(cex.steps[0].inputs[0].value.len() <= MAX_VALUE_BYTES);
    }

    #[test]
    fn sat_conclusions_are_recognised() {
        assert_eq!(
            parse_sat_result("** Trying induction with length 7 **\nInduction step proven: SUCCESS!\n"),
            SatResult::Proven { induction_length: Some(7) }
        );
        assert_eq!(
            parse_sat_result("SAT proof finished - no model found: SUCCESS!"),
            SatResult::Proven { induction_length: None }
        );
        assert_eq!(parse_sat_result("SAT proof finished - model found: FAIL!"), SatResult::Failed);
        assert_eq!(
            parse_sat_result("SAT temporal induction proof finished - model found for base case: FAIL!"),
            SatResult::Failed
        );
        assert_eq!(
            parse_sat_result("Reached maximum number of time steps -> proof failed.\n"),
            SatResult::InductionInconclusive
        );
        assert_eq!(parse_sat_result("Interrupted SAT solver: TIMEOUT!\n"), SatResult::TimedOut);
        assert_eq!(parse_sat_result(""), SatResult::Unfinished);
    }
}
