//! The pure half of `openqq trace`: which log lines belong to a correlation id, and how the hops
//! they describe are printed (a table, or JSON), and the CloudWatch Logs Insights query that
//! finds the same lines on AWS. No I/O here; `trace.rs` reads the files.

use serde_json::{json, Map, Value};
use std::fmt::Write;

/// The four services a request passes through, in the order it reaches them.
pub const SERVICES: [&str; 4] = ["api", "design-job", "validation", "results"];

/// One log line of the traced request, with the fields a trace shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    /// When it was written (RFC 3339, UTC, as the log writes it).
    pub at: String,
    pub level: String,
    /// The service that wrote it (`api`, `design-job`, `validation`, `results`).
    pub function: String,
    /// The event kind of the record being handled.
    pub kind: Option<String>,
    /// The API's route template and method (`POST /v1/designs`), for a request's line.
    pub route: Option<String>,
    pub partition: Option<u64>,
    pub offset: Option<u64>,
    /// How long the record took, in milliseconds.
    pub elapsed_ms: Option<f64>,
    /// `applied`, `retried` or `dead_lettered` for a record's line; for a request's, its status
    /// and problem type (`HTTP 202`, `HTTP 422 invalid-field (netlist)`).
    pub outcome: Option<String>,
    /// Why a record was retried or dead-lettered.
    pub reason: Option<String>,
    pub design_id: Option<String>,
    pub tenant_id: Option<String>,
    pub message: String,
}

impl Hop {
    /// Whether this line says a record went to the dead-letter topic.
    pub fn is_dead_letter(&self) -> bool {
        self.outcome.as_deref() == Some("dead_lettered")
    }
}

/// The line's fields, the event's over those of its spans (innermost first), so a field a span
/// set (the request's or the record's correlation id) counts as the line's own.
fn fields(line: &Value) -> Map<String, Value> {
    let mut all = Map::new();
    if let Some(spans) = line.get("spans").and_then(Value::as_array) {
        for span in spans {
            if let Some(span) = span.as_object() {
                all.extend(span.iter().filter(|(k, _)| k.as_str() != "name").map(|(k, v)| (k.clone(), v.clone())));
            }
        }
    }
    if let Some(span) = line.get("span").and_then(Value::as_object) {
        all.extend(span.iter().filter(|(k, _)| k.as_str() != "name").map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(event) = line.as_object() {
        all.extend(
            event.iter().filter(|(k, _)| !matches!(k.as_str(), "spans" | "span")).map(|(k, v)| (k.clone(), v.clone())),
        );
    }
    all
}

/// The hop one log line describes, if it is a JSON line of `correlation_id`.
pub fn parse(line: &str, correlation_id: &str) -> Option<Hop> {
    // Cheap refusal first: most lines are about other requests.
    if !line.contains(correlation_id) {
        return None;
    }
    let value: Value = serde_json::from_str(line).ok()?;
    let f = fields(&value);
    if f.get("correlation_id").and_then(Value::as_str) != Some(correlation_id) {
        return None;
    }
    let text = |k: &str| f.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    Some(Hop {
        at: text("timestamp").unwrap_or_default(),
        level: text("level").unwrap_or_default(),
        function: text("function").unwrap_or_else(|| "?".into()),
        kind: text("kind"),
        route: text("route").map(|r| match text("method") {
            Some(m) => format!("{m} {r}"),
            None => r,
        }),
        partition: f.get("partition").and_then(Value::as_u64),
        offset: f.get("offset").and_then(Value::as_u64),
        elapsed_ms: f.get("elapsed_ms").and_then(Value::as_f64),
        outcome: text("outcome").or_else(|| {
            let status = text("status")?;
            Some(match (text("problem"), text("field")) {
                (Some(p), Some(f)) => format!("HTTP {status} {p} ({f})"),
                (Some(p), None) => format!("HTTP {status} {p}"),
                _ => format!("HTTP {status}"),
            })
        }),
        reason: text("reason"),
        design_id: text("design_id"),
        tenant_id: text("tenant_id"),
        message: text("message").unwrap_or_default(),
    })
}

/// Puts hops in time order (the timestamps are UTC RFC 3339 of one width, so they sort as text;
/// lines of one instant keep the order they were written in).
pub fn in_time_order(mut hops: Vec<Hop>) -> Vec<Hop> {
    hops.sort_by(|a, b| a.at.cmp(&b.at));
    hops
}

/// The services the hops pass through, in the order each first appears.
pub fn services(hops: &[Hop]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for h in hops {
        if !seen.contains(&h.function.as_str()) {
            seen.push(&h.function);
        }
    }
    seen
}

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// The hops as a table, a line naming the path, and the dead letters, for a terminal.
pub fn table(correlation_id: &str, hops: &[Hop]) -> String {
    let mut out = String::new();
    if hops.is_empty() {
        let _ = writeln!(out, "No log line names correlation id {correlation_id}.");
        return out;
    }
    let path = services(hops).join(" → ");
    let lines = if hops.len() == 1 { "1 log line".to_owned() } else { format!("{} log lines", hops.len()) };
    let _ = writeln!(out, "Correlation id {correlation_id}: {lines}, {path}");
    let ids = hops.iter().find_map(|h| h.design_id.clone().zip(h.tenant_id.clone()));
    if let Some((design, tenant)) = ids {
        let _ = writeln!(out, "Design {design} of tenant {tenant}");
    }
    out.push('\n');
    let header = ["TIME (UTC)", "FUNCTION", "EVENT / ROUTE", "PARTITION", "OFFSET", "TOOK", "OUTCOME", "MESSAGE"];
    let rows: Vec<[String; 8]> = hops
        .iter()
        .map(|h| {
            [
                h.at.get(..23).unwrap_or(&h.at).replace('T', " "),
                h.function.clone(),
                or_dash(h.kind.as_deref().or(h.route.as_deref())),
                or_dash(h.partition),
                or_dash(h.offset),
                or_dash(h.elapsed_ms.map(|ms| format!("{ms:.1} ms"))),
                or_dash(h.outcome.as_deref()),
                h.message.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let _ = write!(l, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    let letters: Vec<&Hop> = hops.iter().filter(|h| h.is_dead_letter()).collect();
    if !letters.is_empty() {
        out.push_str("\nDead letters:\n");
        for h in letters {
            let _ = writeln!(
                out,
                "  {} gave up on {} at partition {} offset {}: {}",
                h.function,
                or_dash(h.kind.as_deref()),
                or_dash(h.partition),
                or_dash(h.offset),
                h.reason.as_deref().unwrap_or("(no reason logged)")
            );
        }
        out.push_str("  (openqq dead-letters list shows them; replay once the cause is fixed)\n");
    }
    out
}

/// The trace as one JSON document.
pub fn to_json(correlation_id: &str, hops: &[Hop]) -> Value {
    let hop = |h: &Hop| {
        json!({
            "timestamp": h.at, "level": h.level, "function": h.function, "kind": h.kind, "route": h.route,
            "partition": h.partition, "offset": h.offset, "elapsed_ms": h.elapsed_ms,
            "outcome": h.outcome, "reason": h.reason, "design_id": h.design_id, "tenant_id": h.tenant_id,
            "message": h.message,
        })
    };
    json!({
        "correlation_id": correlation_id,
        "services": services(hops),
        "hops": hops.iter().map(hop).collect::<Vec<_>>(),
        "dead_letters": hops.iter().filter(|h| h.is_dead_letter()).map(hop).collect::<Vec<_>>(),
    })
}

/// The four functions' log groups for a stack, as template.yaml names them.
pub fn log_groups(stack: &str) -> Vec<String> {
    SERVICES.iter().map(|s| format!("/aws/lambda/{stack}-{s}")).collect()
}

/// The CloudWatch Logs Insights query that finds the same lines in the functions' JSON logs. Lambda
/// keeps each line as the function wrote it; the functions put span fields beside the event's
/// (`openqq_telemetry::lambda_logs`), the general JSON format under `span.`: the query takes both.
pub fn insights_query(correlation_id: &str) -> String {
    let id = correlation_id.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "fields @timestamp, @log, coalesce(function, span.function) as fn, coalesce(kind, span.kind) as event_kind, \
         route, status, partition, offset, elapsed_ms, outcome, reason, design_id, tenant_id, message\n\
         | filter correlation_id = \"{id}\" or span.correlation_id = \"{id}\"\n\
         | sort @timestamp asc\n\
         | limit 1000"
    )
}

/// What `openqq trace --aws` prints: the log groups, the query, and the AWS CLI call that runs it.
pub fn aws_instructions(correlation_id: &str, stack: &str) -> String {
    let groups = log_groups(stack);
    let query = insights_query(correlation_id);
    let mut out = String::new();
    let _ = writeln!(out, "# CloudWatch Logs Insights: select these log groups");
    for g in &groups {
        let _ = writeln!(out, "#   {g}");
    }
    let _ = writeln!(out, "# and run this query over the incident's time range:\n{query}\n");
    let _ = writeln!(out, "# Or from a shell (results with: aws logs get-query-results --query-id ID):");
    let _ = writeln!(
        out,
        "aws logs start-query --log-group-names {} \\\n  --start-time $(date -d '-1 hour' +%s) --end-time $(date +%s) \\\n  --query-string '{}'",
        groups.join(" "),
        query.replace('\'', "'\\''").replace('\n', " ")
    );
    out
}

#[cfg(test)]
#[path = "trace_format_tests.rs"]
mod tests;
