//! The pure half of `openqq batch`: batches, their items and a refused batch's problem document
//! (as the API answers them) as text, and the progress line `--wait` draws with its rate and
//! time left ([`Rate`]). No I/O here; `batch.rs` asks the API. Everything is read leniently: a
//! field the API leaves out prints as `—`.

use crate::design_format::table;
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt::Write as _;

/// The item statuses in the order a batch's counts are printed: open ones first.
pub const STATUSES: [&str; 6] = ["queued", "validating", "ready", "failed", "rejected", "cancelled"];

/// Whether a batch status is final (nothing of the batch will change any more).
pub fn is_final(status: &str) -> bool {
    matches!(status, "completed" | "cancelled" | "failed")
}

/// Items of the batch by status, and how many of them are done (no longer queued or validating).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub total: u64,
    pub done: u64,
}

impl Tally {
    pub fn of(batch: &Value) -> Self {
        let counts = &batch["counts"];
        let n = |s: &str| counts[s].as_u64().unwrap_or(0);
        let total = STATUSES.iter().map(|s| n(s)).sum();
        Self { total, done: total - n("queued") - n("validating") }
    }
}

/// Items done per second over the last [`Rate::WINDOW_SECS`] of observations, so the rate
/// follows a batch that speeds up or slows down rather than averaging its whole life.
#[derive(Debug, Default)]
pub struct Rate {
    /// (seconds since the wait began, items done then), oldest first.
    seen: VecDeque<(f64, u64)>,
}

impl Rate {
    pub const WINDOW_SECS: f64 = 30.0;

    pub fn observe(&mut self, at_secs: f64, done: u64) {
        self.seen.push_back((at_secs, done));
        while self.seen.len() > 2 && at_secs - self.seen[1].0 >= Self::WINDOW_SECS {
            self.seen.pop_front();
        }
    }

    /// Items a second, once at least a second has passed and an item has ended within it.
    pub fn per_sec(&self) -> Option<f64> {
        let (&(t0, d0), &(t1, d1)) = (self.seen.front()?, self.seen.back()?);
        (t1 - t0 >= 1.0 && d1 > d0).then(|| (d1 - d0) as f64 / (t1 - t0))
    }
}

/// The `--wait` progress line: `nightly: 412/1000 items (41%) · 23.5 items/s · ETA 25 s · running
/// · 400 ready, 10 failed, 2 rejected`.
pub fn progress_line(batch: &Value, rate: Option<f64>) -> String {
    let Tally { total, done } = Tally::of(batch);
    let pct = (done * 100).checked_div(total).unwrap_or(100);
    let speed = rate.map_or("— items/s".to_owned(), |r| format!("{} items/s", one_decimal(r)));
    let eta = match rate {
        _ if done >= total => "ETA 0 s".to_owned(),
        Some(r) if r > 0.0 => format!("ETA {}", duration((total - done) as f64 / r)),
        _ => "ETA —".to_owned(),
    };
    let ended: Vec<String> = STATUSES[2..]
        .iter()
        .filter_map(|s| batch["counts"][s].as_u64().filter(|n| *n > 0).map(|n| format!("{n} {s}")))
        .collect();
    let mut line = format!(
        "{}: {done}/{total} items ({pct}%) · {speed} · {eta} · {}",
        text(&batch["name"]),
        text(&batch["status"])
    );
    if !ended.is_empty() {
        let _ = write!(line, " · {}", ended.join(", "));
    }
    line
}

/// `openqq batch status`: the batch's heading, its times, and its counts and verdicts as a table.
pub fn status(batch: &Value) -> String {
    let mut out = heading(batch);
    let times = [("created", "created_at"), ("started", "started_at"), ("finished", "finished_at")]
        .map(|(word, key)| format!("{word} {}", when(&batch[key])));
    let _ = writeln!(out, "{}", capitalise(&times.join(", ")));
    if let Some(m) = batch.get("max_failed").filter(|m| !m.is_null()) {
        let _ = writeln!(out, "Fails past {} failed items", text(m));
    }
    if let Some(why) = batch["reason"].as_str() {
        let _ = writeln!(out, "Reason: {why}");
    }
    out.push_str(&counts(batch));
    out
}

/// `Batch NAME (ID): STATUS`.
fn heading(batch: &Value) -> String {
    format!("Batch {} ({}): {}\n", text(&batch["name"]), text(&batch["batch_id"]), text(&batch["status"]))
}

/// One row per item status and the total, then the verdicts of the items that ran.
fn counts(batch: &Value) -> String {
    let mut rows: Vec<Vec<String>> =
        STATUSES.iter().map(|s| vec![(*s).to_owned(), text(&batch["counts"][s])]).collect();
    rows.push(vec!["total".to_owned(), Tally::of(batch).total.to_string()]);
    let v = &batch["verdicts"];
    format!(
        "{}Verdicts: {} pass, {} fail\n",
        table(&["STATUS", "ITEMS"], &rows),
        v["pass"].as_u64().unwrap_or(0),
        v["fail"].as_u64().unwrap_or(0)
    )
}

/// `openqq batch items`: one row per item.
pub fn items(items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            vec![
                text(&i["index"]),
                text(&i["custom_id"]),
                text(&i["design_id"]),
                text(&i["status"]),
                text(&i["verdict"]),
                i["reason"].as_str().map_or(String::new(), |r| clip(r, 80)),
            ]
        })
        .collect();
    table(&["INDEX", "CUSTOM_ID", "DESIGN_ID", "STATUS", "VERDICT", "REASON"], &rows)
}

/// The summary `--wait` ends with: the batch's status and how long it took, its counts and
/// verdicts, and its failed and rejected items (`listed`, the first of `total` such items, each
/// with its reason).
pub fn summary(batch: &Value, listed: &[Value], total: u64) -> String {
    let took = match (seconds(&batch["created_at"]), seconds(&batch["finished_at"])) {
        (Some(from), Some(to)) if to >= from => format!(" in {}", duration(to - from)),
        _ => String::new(),
    };
    let mut out =
        format!("Batch {} ({}): {}{took}\n", text(&batch["name"]), text(&batch["batch_id"]), text(&batch["status"]));
    if let Some(why) = batch["reason"].as_str() {
        let _ = writeln!(out, "Reason: {why}");
    }
    out.push_str(&counts(batch));
    if total == 0 {
        out.push_str("No item failed or was rejected.\n");
        return out;
    }
    if listed.len() as u64 >= total {
        let _ = writeln!(out, "Failed or rejected items ({total}):");
    } else {
        let _ = writeln!(
            out,
            "Failed or rejected items (the first {} of {total}; `openqq batch items {} --status failed` lists every one):",
            listed.len(),
            text(&batch["batch_id"])
        );
    }
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|i| {
            let why = i["reason"].as_str().map_or("—".to_owned(), |r| clip(r, 100));
            vec![text(&i["index"]), text(&i["custom_id"]), text(&i["status"]), why]
        })
        .collect();
    out.push_str(&table(&["INDEX", "CUSTOM_ID", "STATUS", "REASON"], &rows));
    out
}

/// A refused batch (422 `invalid-items`): the detail, then each refused item the problem document
/// names (index, the file's line when `lines` maps indexes to them, custom_id, reason).
pub fn refused(problem: &Value, lines: Option<&[usize]>) -> String {
    let mut out = format!("The batch was refused: {}\n", text(&problem["detail"]));
    let errors = problem["errors"].as_array().map_or(&[][..], Vec::as_slice);
    if errors.is_empty() {
        return out;
    }
    let line = |e: &Value| {
        let at = e["index"].as_u64().and_then(|i| lines?.get(usize::try_from(i).ok()?).copied());
        at.map_or("—".to_owned(), |n| n.to_string())
    };
    let rows: Vec<Vec<String>> = errors
        .iter()
        .map(|e| vec![text(&e["index"]), line(e), text(&e["custom_id"]), clip(&text(&e["reason"]), 120)])
        .collect();
    let _ = writeln!(
        out,
        "Refused items (nothing was submitted; --on-invalid skip submits the others and marks these rejected):"
    );
    out.push_str(&table(&["INDEX", "LINE", "CUSTOM_ID", "REASON"], &rows));
    out
}

/// The line number (from 1) of each item of a JSON-lines file, as the API counts items: every
/// line but blank ones.
pub fn item_lines(text: &str) -> Vec<usize> {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(n, _)| n + 1).collect()
}

/// An RFC 3339 time as seconds since the epoch, when it reads.
fn seconds(v: &Value) -> Option<f64> {
    let t = humantime::parse_rfc3339_weak(v.as_str()?).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

/// A time as `2026-12-02 06:10:11` (UTC, as the API gives it), or `—`.
pub(crate) fn when(v: &Value) -> String {
    v.as_str().map_or("—".to_owned(), |at| at.get(..19).unwrap_or(at).replace('T', " "))
}

/// `0.4 s`, `12.3 s`, `4 min 05 s`, `2 h 03 min`.
pub fn duration(secs: f64) -> String {
    let secs = secs.max(0.0);
    if secs < 60.0 {
        return format!("{} s", one_decimal(secs));
    }
    let whole = secs.round() as u64;
    if whole < 3600 {
        return format!("{} min {:02} s", whole / 60, whole % 60);
    }
    format!("{} h {:02} min", whole / 3600, whole % 3600 / 60)
}

/// `23.5`, `0.4`; `120` past a hundred.
fn one_decimal(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
}

/// A string as it is, anything else as JSON, absent as `—`.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".to_owned(),
        other => other.to_string(),
    }
}

/// At most `max` characters of one line of `s`, ending in `…` when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
#[path = "batch_format_tests.rs"]
mod tests;
