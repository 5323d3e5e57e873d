//! The body of `GET /v1/designs/{id}/report`: the stored report (the validator's JSON object)
//! with the `revision` and `verdict` the store keeps beside it.
//!
//! The report is not parsed into a tree: only its top level is read, each member's value kept as
//! a slice of the stored text, and the body is written from those slices. Memory is the stored
//! text plus the body, about twice the report, where a `serde_json::Value` tree takes many
//! times the text (a 73 MB report took the server to 1.39 GB).

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// The report's top-level members, in stored order, each value as its stored text.
struct Members<'a>(Vec<(std::borrow::Cow<'a, str>, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Top;
        impl<'de> Visitor<'de> for Top {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<std::borrow::Cow<'de, str>, &'de RawValue>()? {
                    out.push(entry);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Top)
    }
}

/// `report` (a JSON object) with `revision` and `verdict` set: members of those names in the
/// report are replaced, every other member is copied as stored.
pub fn splice(report: &str, revision: u64, verdict: &str) -> Result<String, serde_json::Error> {
    let Members(members) = serde_json::from_str(report)?;
    let mut out = String::with_capacity(report.len() + 64);
    out.push('{');
    for (key, value) in members.iter().filter(|(k, _)| k != "revision" && k != "verdict") {
        out.push_str(&serde_json::to_string(key)?);
        out.push(':');
        out.push_str(value.get());
        out.push(',');
    }
    out.push_str(&format!("\"revision\":{revision},\"verdict\":{}}}", serde_json::to_string(verdict)?));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// What the handler answered before: the report parsed whole, two members set.
    fn as_a_tree(report: &str, revision: u64, verdict: &str) -> Value {
        let mut body: serde_json::Map<String, Value> = serde_json::from_str(report).unwrap();
        body.insert("revision".into(), revision.into());
        body.insert("verdict".into(), verdict.into());
        Value::Object(body)
    }

    #[test]
    fn the_spliced_body_is_the_json_the_whole_parse_gave() {
        let report = r#"{"verdict":"pass","findings":[{"code":"E1","message":"a \"quoted\" \u00e9 text","location":{}}],
            "utilization":[{"resource":"LUT4","used":3,"available":7680}], "tru\nncated": null, "n": -1.5e3}"#;
        let body = splice(report, 7, "fail").unwrap();
        let parsed: Value = serde_json::from_str(&body).expect("the body is valid JSON");
        assert_eq!(parsed, as_a_tree(report, 7, "fail"));
        assert_eq!(body.matches("\"verdict\"").count(), 1, "the stored verdict is replaced, not repeated");
    }

    #[test]
    fn an_empty_report_gets_just_the_revision_and_verdict() {
        let body = splice("{}", 1, "pass").unwrap();
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"revision": 1, "verdict": "pass"}));
    }

    #[test]
    fn a_report_that_is_not_an_object_is_refused() {
        assert!(splice("[1,2]", 1, "pass").is_err());
        assert!(splice("{\"a\":", 1, "pass").is_err());
    }
}
