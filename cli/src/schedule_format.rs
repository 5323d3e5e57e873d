//! The pure half of `openqq schedule`: schedules and their fire ledger (as the API answers them)
//! as text, the items file of a fixed template read into JSON, and a refused schedule's problem
//! document said in terms of the command's own arguments. No I/O here; `schedule.rs` asks the
//! API. Everything is read leniently: a field the API leaves out prints as `—`.

use crate::batch_format::{clip, text};
use crate::design_format::table;
use serde_json::Value;
use std::fmt::Write as _;

/// The overlap policies the API knows, as `--overlap` offers them.
pub const OVERLAPS: [&str; 3] = ["skip", "buffer_one", "allow"];

/// Lines of an items file that are not items, listed before giving up.
const LISTED_BAD_LINES: usize = 20;

/// The template in words: `3 fixed items`, `revalidate every design`, `revalidate designs named
/// blink-*`.
pub fn template(t: &Value) -> String {
    if let Some(n) = t["items"].as_u64() {
        return format!("{n} fixed item{}", if n == 1 { "" } else { "s" });
    }
    match &t["revalidate"] {
        Value::String(all) if all == "all" => "revalidate every design".to_owned(),
        Value::Object(o) => format!("revalidate designs named {}*", text(&o["name_prefix"])),
        _ => "—".to_owned(),
    }
}

/// `active` or `paused`.
fn state(s: &Value) -> &'static str {
    if s["paused"] == true {
        "paused"
    } else {
        "active"
    }
}

/// `openqq schedule list`: a row per schedule with its next fire, or how to create the first.
pub fn list(schedules: &[Value]) -> String {
    if schedules.is_empty() {
        return "No schedules. Create one with: openqq schedule add NAME EXPRESSION --items FILE.jsonl\n".to_owned();
    }
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            vec![
                text(&s["schedule_id"]),
                text(&s["name"]),
                text(&s["expression"]),
                text(&s["time_zone"]),
                state(s).to_owned(),
                at(&s["next_fires"][0]),
                template(&s["template"]),
            ]
        })
        .collect();
    table(&["SCHEDULE_ID", "NAME", "EXPRESSION", "TIME_ZONE", "STATE", "NEXT_FIRE (UTC)", "TEMPLATE"], &rows)
}

/// `openqq schedule show` (and what `add`, `pause` and `resume` print): the schedule's heading,
/// timetable, template, policies, times and its next fires.
pub fn show(s: &Value) -> String {
    let mut out = format!("Schedule {} ({}): {}\n", text(&s["name"]), text(&s["schedule_id"]), state(s));
    let _ = writeln!(out, "Expression: {} in {}", text(&s["expression"]), text(&s["time_zone"]));
    let _ = writeln!(out, "Template: {}", template(&s["template"]));
    let jitter = s["jitter"].as_str().map_or("no jitter".to_owned(), |j| format!("jitter {j}"));
    let _ = writeln!(out, "Overlap {}, catch-up {}, {jitter}", text(&s["overlap"]), text(&s["catch_up"]));
    let _ = writeln!(out, "Created {}, updated {}", at(&s["created_at"]), at(&s["updated_at"]));
    if let Some(b) = s["last_batch_id"].as_str() {
        let _ = writeln!(out, "Last batch: {b} (openqq batch status {b})");
    }
    let next = s["next_fires"].as_array().map_or(&[][..], Vec::as_slice);
    if next.is_empty() {
        out.push_str("Next fires: none\n");
        return out;
    }
    let paused = if s["paused"] == true { "; paused: none of them runs until it is resumed" } else { "" };
    let _ = writeln!(out, "Next fires (UTC{paused}):");
    for t in next {
        let _ = writeln!(out, "  {}", at(t));
    }
    out
}

/// `openqq schedule fires`: a row per fire of the ledger, newest first as the API gives them.
pub fn fires(fires: &[Value]) -> String {
    let rows: Vec<Vec<String>> = fires
        .iter()
        .map(|f| {
            let mut outcome = text(&f["outcome"]);
            if let Some(was) = f["recorded_outcome"].as_str() {
                let _ = write!(outcome, " ({was})");
            }
            vec![
                at(&f["nominal_time"]),
                at(&f["fired_at"]),
                outcome,
                text(&f["batch_id"]),
                f["reason"].as_str().map_or(String::new(), |r| clip(r, 100)),
            ]
        })
        .collect();
    table(&["NOMINAL_TIME (UTC)", "FIRED_AT (UTC)", "OUTCOME", "BATCH_ID", "REASON"], &rows)
}

/// What `openqq schedule trigger` says of the fire it asked for.
pub fn fired(f: &Value) -> String {
    let nominal = at(&f["nominal_time"]);
    let batch = f["batch_id"].as_str();
    let reason = f["reason"].as_str().map_or(String::new(), |r| format!(": {r}"));
    let mut out = match (f["outcome"].as_str(), batch) {
        (Some("deduplicated"), _) => {
            let was = text(&f["recorded_outcome"]);
            let with = batch.map_or(String::new(), |b| format!(", batch {b}"));
            format!("The ledger already had the fire at {nominal} ({was}{with}): nothing more was submitted.\n")
        }
        (Some(outcome @ ("submitted" | "pending")), Some(b)) => format!("Fired at {nominal}: {outcome}, batch {b}.\n"),
        (outcome, _) => format!("Fired at {nominal}: {}{reason}.\n", outcome.unwrap_or("—")),
    };
    if let Some(b) = batch {
        let _ = writeln!(out, "Follow the batch with: openqq batch status {b}");
    }
    out
}

/// The items of a fixed template's JSON-lines file, and the line (from 1) of each: every line but
/// blank ones must be a JSON object. Otherwise the lines that are not, each with why.
pub fn template_items(text: &str) -> Result<(Vec<Value>, Vec<usize>), String> {
    let (mut items, mut lines, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(item @ Value::Object(_)) => {
                items.push(item);
                lines.push(n + 1);
            }
            Ok(_) => bad.push(format!("line {}: is not a JSON object", n + 1)),
            Err(e) => bad.push(format!("line {}: is not JSON: {e}", n + 1)),
        }
    }
    if bad.is_empty() {
        return Ok((items, lines));
    }
    let more = bad.len().saturating_sub(LISTED_BAD_LINES);
    bad.truncate(LISTED_BAD_LINES);
    if more > 0 {
        bad.push(format!("and {more} more"));
    }
    Err(bad.join("\n"))
}

/// The argument of `openqq schedule add` that sets a field the API names.
pub fn argument_of(field: &str) -> Option<&'static str> {
    Some(match field {
        "name" => "NAME",
        "expression" => "EXPRESSION",
        "time_zone" => "--time-zone",
        "overlap" => "--overlap",
        "catch_up" => "--catch-up",
        "jitter" => "--jitter",
        "paused" => "--paused",
        "template" | "template.revalidate" => "--revalidate-all, --revalidate-prefix",
        "template.items" => "--items",
        _ => return None,
    })
}

/// A schedule the API refused to create (422), said in the command's terms: the field's
/// argument and what is wrong with it, or each refused item of `--items` with its line in the
/// file (`lines` maps item indexes to lines). `None` for any other problem.
pub fn refused(problem: &Value, lines: Option<&[usize]>) -> Option<String> {
    let detail = text(&problem["detail"]);
    match problem["type"].as_str()? {
        "urn:openqq:problem:invalid-field" => {
            let arg = problem["field"].as_str().and_then(argument_of);
            let arg = arg.map_or(String::new(), |a| format!(" ({a})"));
            Some(format!("The schedule was refused: {detail}{arg}\n"))
        }
        "urn:openqq:problem:invalid-items" => {
            // The count ("2 of 4 items are invalid"); the rest of the API's sentence speaks of a
            // batch's options, which a schedule does not have.
            let count = detail.split(", the first").next().unwrap_or(&detail);
            let mut out = format!("The schedule was refused: {count} (--items); nothing was created\n");
            let errors = problem["errors"].as_array().map_or(&[][..], Vec::as_slice);
            let line = |e: &Value| {
                let at = e["index"].as_u64().and_then(|i| lines?.get(usize::try_from(i).ok()?).copied());
                at.map_or("—".to_owned(), |n| n.to_string())
            };
            let rows: Vec<Vec<String>> = errors
                .iter()
                .map(|e| vec![text(&e["index"]), line(e), text(&e["custom_id"]), clip(&text(&e["reason"]), 120)])
                .collect();
            if !rows.is_empty() {
                out.push_str(&table(&["INDEX", "LINE", "CUSTOM_ID", "REASON"], &rows));
            }
            Some(out)
        }
        _ => None,
    }
}

/// A value for a query string: everything but unreserved characters percent-encoded (a fires
/// cursor is a date-time, whose `+` would otherwise read as a space).
pub fn query_value(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An RFC 3339 time as `2026-03-03 01:30:00` (the milliseconds kept when there are any: a fire
/// on request is at the millisecond), or `—`.
fn at(v: &Value) -> String {
    let Some(t) = v.as_str() else { return "—".to_owned() };
    let t = t.trim_end_matches('Z').replacen('T', " ", 1);
    match t.split_once('.') {
        Some((secs, frac)) => {
            let digits: String = frac.chars().take_while(char::is_ascii_digit).take(3).collect();
            let ms = format!("{digits:0<3}");
            if ms.trim_end_matches('0').is_empty() {
                secs.to_owned()
            } else {
                format!("{secs}.{ms}")
            }
        }
        None => t,
    }
}

#[cfg(test)]
#[path = "schedule_format_tests.rs"]
mod tests;
