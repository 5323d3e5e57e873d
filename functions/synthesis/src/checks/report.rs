//! The checks' report as it travels in `validation.requested`: the whole of it when it fits in
//! [`MAX_CHECKS_BYTES`], else clipped in steps (simulation output, then lists), and as a last
//! resort the verdicts alone (with each failing testbench's waveform, and the source files when
//! they still fit).

use super::Outcome;
use serde_json::Value;

/// Most bytes of the checks' report, which travels in `validation.requested` (beside the
/// constraints, within [`openqq_core::design::MAX_DESIGN_RECORD_BYTES`]).
pub const MAX_CHECKS_BYTES: usize = 24 * 1024;

/// The checks' report as JSON, within [`MAX_CHECKS_BYTES`]: [`bounded`] of [`whole`].
pub fn report(outcome: Option<&Outcome>, generation: Option<Value>) -> Value {
    bounded(&whole(outcome, generation))
}

/// Everything the checks found, unbounded: the outcome and, for a design written by a model,
/// its attempts (`generation`).
pub fn whole(outcome: Option<&Outcome>, generation: Option<Value>) -> Value {
    let mut whole = outcome.map_or_else(|| serde_json::json!({}), |o| serde_json::to_value(o).unwrap_or_default());
    if let Some(generation) = generation {
        whole["generation"] = generation;
    }
    whole
}

/// `whole` within [`MAX_CHECKS_BYTES`]: when it is larger, the simulations' output is clipped
/// (its end kept), then lists (findings, failure messages, counterexample steps) are shortened,
/// and as a last resort only the verdicts are kept, with `"details_omitted": true`.
pub fn bounded(whole: &Value) -> Value {
    for (output, items) in [(usize::MAX, usize::MAX), (2048, 8), (512, 3), (0, 1)] {
        let mut shrunk = whole.clone();
        shrink(&mut shrunk, output, items);
        if size(&shrunk) <= MAX_CHECKS_BYTES {
            return shrunk;
        }
    }
    verdicts_only(whole)
}

/// Lists [`shrink`] never shortens.
const UNCUT: [&str; 3] = ["simulation", "files", "tests"];

fn size(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// Clips every `output` string to its last `output` bytes and every list inside a step to
/// `items` entries (a list of testbenches is never cut: each keeps its verdict; nor are the
/// source's lists of files, which name every file the checks read).
fn shrink(v: &mut Value, output: usize, items: usize) {
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(s) if key == "output" && s.len() > output => *s = clip_start(s, output),
                    Value::Array(list) if !UNCUT.contains(&key.as_str()) && list.len() > items => {
                        list.truncate(items);
                    }
                    _ => {}
                }
                shrink(value, output, items);
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|x| shrink(x, output, items)),
        _ => {}
    }
}

/// The last `max` bytes of `s`, on a character boundary.
fn clip_start(s: &str, max: usize) -> String {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_owned()
}

/// The verdicts alone, with each failing testbench's waveform and, when they still fit, the
/// source files.
pub(crate) fn verdicts_only(whole: &Value) -> Value {
    let verdict = |v: &Value| serde_json::json!({"testbench": v.get("testbench"), "verdict": v.get("verdict")});
    let mut out = serde_json::json!({"details_omitted": true, "synthesis": verdict(&whole["synthesis"])});
    if let Some(tests) = whole.get("simulation").and_then(Value::as_array) {
        let test = |t: &Value| {
            let mut v = verdict(t);
            if let Some(w) = t.get("waveform") {
                v["waveform"] = w.clone();
            }
            v
        };
        out["simulation"] = tests.iter().map(test).collect();
    }
    if let Some(e) = whole.get("equivalence") {
        out["equivalence"] = verdict(e);
    }
    if let Some(g) = whole.get("generation") {
        out["generation"] = serde_json::json!({"stopped": g.get("stopped")});
    }
    if let Some(source) = whole.get("source") {
        let mut with = out.clone();
        with["source"] = source.clone();
        if size(&with) <= MAX_CHECKS_BYTES {
            return with;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_report_is_clipped_to_fit_and_keeps_every_verdict() {
        let test = |i: usize| {
            serde_json::json!({"testbench": format!("t{i}"), "verdict": "fail", "output": "x".repeat(8192),
                "messages": vec!["ERROR: a mismatch"; 20], "warnings": []})
        };
        let whole = serde_json::json!({
            "synthesis": {"verdict": "ok", "findings": vec![serde_json::json!({"message": "w"}); 50]},
            "simulation": (0..16).map(test).collect::<Vec<_>>(),
        });
        let mut shrunk = whole.clone();
        shrink(&mut shrunk, 512, 3);
        assert!(size(&shrunk) <= MAX_CHECKS_BYTES, "{}", size(&shrunk));
        assert_eq!(shrunk["simulation"].as_array().unwrap().len(), 16, "every testbench keeps its verdict");
        assert_eq!(shrunk["simulation"][3]["output"].as_str().unwrap().len(), 512);
        assert_eq!(shrunk["synthesis"]["findings"].as_array().unwrap().len(), 3);
        let only = verdicts_only(&whole);
        assert_eq!(only["simulation"][15], serde_json::json!({"testbench": "t15", "verdict": "fail"}));
        assert_eq!(only["details_omitted"], true);
    }

    #[test]
    fn clipping_keeps_the_end_on_a_character_boundary() {
        assert_eq!(clip_start("abcdef", 3), "def");
        assert_eq!(clip_start("aé", 1), "");
        assert_eq!(clip_start("ab", 5), "ab");
    }
}
