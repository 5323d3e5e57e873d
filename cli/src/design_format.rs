//! The pure half of `openqq design show`: a design and its report (as the API answers them) as
//! text: its status and verdict, its source files, each generation attempt, each check's verdict
//! with how long it took, and for a failing testbench when it first failed and where its
//! waveform is. No I/O here; `design.rs` asks the API. Everything is read leniently: a report
//! capped to its verdicts (`details_omitted`) or from an older platform prints what it has.

use serde_json::Value;
use std::fmt::Write as _;

/// A failing testbench's waveform, as the report points at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveformRef {
    pub testbench: String,
    /// The dump's object digest, when it was kept.
    pub digest: Option<String>,
    /// The dump's time unit (`1ps`).
    pub timescale: String,
    pub first_failure_time: u64,
    /// The first failure's message, when the report kept one.
    pub message: Option<String>,
}

/// The waveforms of the report's failing testbenches.
pub fn waveforms(report: &Value) -> Vec<WaveformRef> {
    list(&report["checks"]["simulation"])
        .iter()
        .filter_map(|t| {
            let w = t.get("waveform")?;
            Some(WaveformRef {
                testbench: text(&t["testbench"]),
                digest: w["ref"]["digest"].as_str().map(str::to_owned),
                timescale: w["timescale"].as_str().unwrap_or("1s").to_owned(),
                first_failure_time: w["first_failure_time"].as_u64()?,
                message: t["messages"].get(0).and_then(Value::as_str).map(str::to_owned),
            })
        })
        .collect()
}

/// The whole page: the design, then, when there is a report, its source, attempts and checks.
pub fn show(design: &Value, report: Option<&Value>) -> String {
    let mut out = heading(design);
    let Some(report) = report else {
        let _ = writeln!(out, "\nNo report yet: it appears when validation finishes.");
        return out;
    };
    let checks = &report["checks"];
    if checks.is_null() {
        let _ = writeln!(out, "\nGiven as a netlist: no HDL checks ran.");
    }
    if let Some(source) = checks.get("source") {
        out.push('\n');
        out.push_str(&sources(source));
    }
    if let Some(generation) = checks.get("generation") {
        out.push('\n');
        out.push_str(&attempts(generation));
    }
    out.push('\n');
    out.push_str(&verdicts(report));
    for w in waveforms(report) {
        out.push('\n');
        out.push_str(&failure(&w));
    }
    if checks["details_omitted"] == true {
        let _ = writeln!(out, "\n(The checks' details were too large for the report: only their verdicts were kept.)");
    }
    out
}

/// `Design NAME (ID): revision N, STATUS, verdict V`, the update time and any failure reason.
fn heading(d: &Value) -> String {
    let mut out = format!(
        "Design {} ({}): revision {}, {}",
        text(&d["name"]),
        text(&d["design_id"]),
        d["revision"],
        text(&d["status"])
    );
    if let Some(v) = d["verdict"].as_str() {
        let _ = write!(out, ", verdict {v}");
    }
    out.push('\n');
    if let Some(at) = d["updated_at"].as_str() {
        let _ = writeln!(out, "Updated {}", at.get(..19).unwrap_or(at).replace('T', " "));
    }
    if let Some(why) = d["failure_reason"].as_str() {
        let _ = writeln!(out, "Failed: {why}");
    }
    out
}

/// The design's files, then each testbench's and the reference's.
fn sources(source: &Value) -> String {
    let mut rows = Vec::new();
    let mut add = |role: String, set: &Value| {
        for f in list(&set["files"]) {
            rows.push(vec![role.clone(), text(&f["name"]), bytes(f["bytes"].as_u64()), short(f["digest"].as_str())]);
        }
    };
    add(format!("design (top {})", text(&source["top"])), source);
    for t in list(&source["tests"]) {
        add(format!("testbench {} (top {})", text(&t["testbench"]), text(&t["top"])), t);
    }
    if let Some(r) = source.get("reference") {
        add(format!("reference (top {})", text(&r["top"])), r);
    }
    format!(
        "Source files (digests shortened; --json has them whole):\n{}",
        table(&["ROLE", "FILE", "SIZE", "DIGEST"], &rows)
    )
}

/// One row per generation attempt.
fn attempts(g: &Value) -> String {
    let tried = list(&g["attempts"]);
    let mut out = format!(
        "Generation: {} attempt{} of at most {}, stopped: {}\n",
        tried.len(),
        if tried.len() == 1 { "" } else { "s" },
        g["max_attempts"].as_u64().map_or("?".to_owned(), |n| n.to_string()),
        g["stopped"].as_str().unwrap_or("?").replace('_', " ")
    );
    let rows: Vec<Vec<String>> = tried
        .iter()
        .map(|a| {
            let tokens = match (a["prompt_tokens"].as_u64(), a["completion_tokens"].as_u64()) {
                (Some(p), Some(c)) => format!("{p} / {c}"),
                _ => "—".to_owned(),
            };
            let failed = a["failed"].as_str().unwrap_or("—").to_owned();
            let why = a["messages"].get(0).and_then(Value::as_str).map_or(String::new(), |m| clip(m, 72));
            vec![
                text(&a["attempt"]),
                tokens,
                took(a["duration_ms"].as_u64()),
                failed,
                short(a["hdl"]["digest"].as_str()),
                why,
            ]
        })
        .collect();
    out.push_str(&table(&["ATTEMPT", "TOKENS (PROMPT / COMPLETION)", "TOOK", "FAILED", "HDL", "WHY"], &rows));
    out
}

/// One row per check: synthesis, each testbench, equivalence, then validation of the netlist.
fn verdicts(report: &Value) -> String {
    let checks = &report["checks"];
    let mut rows = Vec::new();
    if let Some(s) = checks.get("synthesis") {
        let detail = match (s["family"].as_str(), list(&s["findings"]).len()) {
            (Some(family), n) if n > 0 => format!("{family}, {n} finding{}", if n == 1 { "" } else { "s" }),
            (Some(family), _) => family.to_owned(),
            _ => detail(s),
        };
        rows.push(vec!["synthesis".to_owned(), text(&s["verdict"]), took(s["elapsed_ms"].as_u64()), detail]);
    }
    for t in list(&checks["simulation"]) {
        let name = format!("testbench {}", text(&t["testbench"]));
        rows.push(vec![name, text(&t["verdict"]), took(t["elapsed_ms"].as_u64()), detail(t)]);
    }
    if let Some(e) = checks.get("equivalence") {
        let said = counterexample(e).unwrap_or_else(|| detail(e));
        rows.push(vec!["equivalence".to_owned(), text(&e["verdict"]), took(e["elapsed_ms"].as_u64()), said]);
    }
    if let Some(v) = report["verdict"].as_str() {
        let n = list(&report["findings"]).len();
        let found = format!("{n} finding{}", if n == 1 { "" } else { "s" });
        rows.push(vec!["validation".to_owned(), v.to_owned(), "—".to_owned(), found]);
    }
    format!("Checks:\n{}", table(&["CHECK", "VERDICT", "TOOK", "DETAIL"], &rows))
}

/// What a check's row says beside its verdict: why it did not pass.
fn detail(check: &Value) -> String {
    let first = |key: &str| check[key].get(0).and_then(Value::as_str).map(str::to_owned);
    let said = check["reason"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| first("messages"))
        .or_else(|| check["findings"].get(0).and_then(|f| f["message"].as_str()).map(str::to_owned));
    said.map_or(String::new(), |s| clip(&s, 80))
}

/// Where a counterexample's last step differs: `at step 3: count is 00000010, the reference's
/// 00000001`.
fn counterexample(e: &Value) -> Option<String> {
    let step = list(&e["counterexample"]["steps"]).last()?;
    let theirs = list(&step["reference_outputs"]);
    let differs = list(&step["design_outputs"]).iter().find_map(|o| {
        let other = theirs.iter().find(|r| r["name"] == o["name"])?;
        (other["value"] != o["value"]).then(|| {
            format!("{} is {}, the reference's {}", text(&o["name"]), text(&o["value"]), text(&other["value"]))
        })
    })?;
    Some(clip(&format!("at step {}: {differs}", step["step"]), 80))
}

/// A failing testbench's first failure and its waveform.
fn failure(w: &WaveformRef) -> String {
    let mut out = format!(
        "Testbench {} first failed at {} ({} × {})",
        w.testbench,
        human_time(w.first_failure_time, &w.timescale),
        w.first_failure_time,
        w.timescale
    );
    if let Some(m) = &w.message {
        let _ = write!(out, ": {}", clip(m, 100));
    }
    out.push('\n');
    match &w.digest {
        Some(d) => {
            let _ = writeln!(out, "  waveform: {d} (a VCD file; --waveform draws it here)");
        }
        None => out.push_str("  waveform: not kept\n"),
    }
    out
}

/// `count` units of `timescale` (`1ps`, `10ns`) in the largest unit that keeps it at least 1
/// (`20000` of `1ps` is `20 ns`); the count and unit as given when the unit does not read.
pub fn human_time(count: u64, timescale: &str) -> String {
    const UNITS: [(&str, u128); 6] = [
        ("s", 1_000_000_000_000_000),
        ("ms", 1_000_000_000_000),
        ("us", 1_000_000_000),
        ("ns", 1_000_000),
        ("ps", 1_000),
        ("fs", 1),
    ];
    let digits = timescale.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
    let (magnitude, unit) = timescale.trim().split_at(digits);
    let factor = UNITS.iter().find(|(u, _)| *u == unit.trim()).map(|(_, f)| *f);
    let (Ok(magnitude), Some(factor)) = (magnitude.parse::<u128>(), factor) else {
        return format!("{count} × {timescale}");
    };
    let fs = u128::from(count) * magnitude * factor;
    if fs == 0 {
        return format!("0 {}", unit.trim());
    }
    let (name, size) = UNITS.iter().find(|(_, f)| fs >= *f).copied().unwrap_or(("fs", 1));
    let value = format!("{:.3}", fs as f64 / size as f64);
    format!("{} {name}", value.trim_end_matches('0').trim_end_matches('.'))
}

/// Aligned columns under a header, each row indented by two spaces; the last column unpadded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::from("  ");
        for (i, cell) in cells.enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            l.push_str(cell);
            if i + 1 < widths.len() {
                l.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// A string as it is, anything else as JSON, absent as `—`.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".to_owned(),
        other => other.to_string(),
    }
}

fn took(ms: Option<u64>) -> String {
    match ms {
        None => "—".to_owned(),
        Some(ms) if ms < 1000 => format!("{ms} ms"),
        Some(ms) => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

fn bytes(n: Option<u64>) -> String {
    match n {
        None => "—".to_owned(),
        Some(n) if n < 10 * 1024 => format!("{n} B"),
        Some(n) => format!("{:.1} KiB", n as f64 / 1024.0),
    }
}

/// The first 12 characters of a digest (enough to tell objects apart on a page).
fn short(digest: Option<&str>) -> String {
    digest.map_or("—".to_owned(), |d| d.get(..12).unwrap_or(d).to_owned())
}

/// At most `max` characters of one line of `s`, ending in `…` when cut.
fn clip(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
#[path = "design_format_tests.rs"]
mod tests;
