//! Log lines in the shape of Lambda's JSON log format: one JSON object per line with
//! `timestamp` (RFC 3339, UTC), `level` (`TRACE` … `ERROR`), `message` and, inside an
//! invocation, `requestId`, the names Lambda's log-level filtering and CloudWatch Logs Insights
//! read. The fields of the spans an event is in (innermost wins: `requestId` from the runtime's
//! invocation span, `correlation_id`, `tenant_id`, `function` …) and the event's own fields are
//! members of the same object; `target` names the module.
//!
//! The general JSON format ([`crate::LogFormat::Json`]) nests span fields under `span`, where
//! Lambda does not look, so the functions use [`init`] instead.

use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The event format of a Lambda function's logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct LambdaJson;

impl<S> FormatEvent<S, JsonFields> for LambdaJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<JsonFields>>() else { continue };
                if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) {
                    line.extend(fields);
                }
            }
        }
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        line.extend(fields.0);
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert("level".into(), Value::String(event.metadata().level().as_str().to_owned()));
        line.insert("target".into(), Value::String(event.metadata().target().to_owned()));
        line.entry("message").or_insert_with(|| Value::String(String::new()));
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), serde_json::json!(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}").into());
    }
}

/// The filter: `RUST_LOG` when set, else the function's application log level
/// (`AWS_LAMBDA_LOG_LEVEL`, set by Lambda's logging configuration), else `info`.
fn filter() -> EnvFilter {
    EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(std::env::var("AWS_LAMBDA_LOG_LEVEL")?.to_lowercase()).map_err(Into::into))
        .unwrap_or_else(|_: Box<dyn std::error::Error>| EnvFilter::new("info"))
}

/// Installs the global subscriber of a Lambda function: [`LambdaJson`] lines on stderr. Calling
/// it twice is harmless (the second call does nothing).
pub fn init() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .json()
        .event_format(LambdaJson)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Captures what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines(log: impl FnOnce()) -> Vec<Value> {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::INFO)
            .json()
            .event_format(LambdaJson)
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
    }

    #[test]
    fn a_line_carries_lambdas_timestamp_level_message_and_the_invocations_request_id() {
        let lines = lines(|| {
            let invoke = tracing::info_span!("Lambda runtime invoke", requestId = "8f5c-1", xrayTraceId = "Root=1-x");
            let _invoke = invoke.enter();
            let handler = tracing::info_span!("event", correlation_id = "c-7", function = "results");
            let _handler = handler.enter();
            tracing::warn!(partition = 3u64, "Partitions of the batch failed.");
        });
        let line = &lines[0];
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["message"], "Partitions of the batch failed.");
        assert_eq!(line["requestId"], "8f5c-1");
        assert_eq!((&line["correlation_id"], &line["function"]), (&"c-7".into(), &"results".into()));
        assert_eq!(line["partition"], 3);
        let ts = line["timestamp"].as_str().unwrap();
        assert!(ts.len() >= 20 && ts.as_bytes()[10] == b'T' && ts.ends_with('Z'), "RFC 3339 in UTC: {ts}");
        assert!(line.get("span").is_none(), "span fields are top-level members");
    }

    #[test]
    fn outside_an_invocation_a_line_has_no_request_id_and_an_inner_span_field_wins() {
        let lines = lines(|| {
            let outer = tracing::info_span!("outer", function = "outer");
            let _outer = outer.enter();
            let inner = tracing::info_span!("inner", function = "inner");
            let _inner = inner.enter();
            tracing::info!("The cold start finished.");
        });
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["function"], "inner");
        assert!(lines[0].get("requestId").is_none());
    }
}
