//! The API contract, docs/openapi.yaml, against what `openqq up` really serves.
//!
//! Routes are compared both ways: every documented path answers, with exactly the documented
//! methods, and every route the API's source declares (`.route("…")` in functions/api/src) is
//! documented. Methods are read from the server itself: a method a path does not serve gets 405
//! with `Allow` naming the ones it does, while a path nothing serves gets the fallback 404. The
//! document's own promises are checked too: which operations need a token, and that every
//! response carries its correlation id and every error is a problem document.
//!
//! schemathesis (scripts/services/schemathesis.sh) checks the responses against the schemas.

use openqq_e2e::{repo_root, Server};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// A design id no tenant has, for path templates.
const SOME_ID: &str = "01a227d4-fb0d-7377-abd1-e342a03ff5cd";

fn contract() -> Value {
    let path = repo_root().join("docs/openapi.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
}

/// Documented path templates and their methods, upper case.
fn documented(doc: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let paths = doc["paths"].as_object().expect("the contract has paths");
    paths
        .iter()
        .map(|(path, item)| {
            let item = item.as_object().expect("a path item is a mapping");
            let methods = item.keys().filter(|k| METHODS.contains(&k.as_str())).map(|k| k.to_uppercase()).collect();
            (path.clone(), methods)
        })
        .collect()
}

/// The path of every `.route("…", …)` in the API's source.
fn declared_in_source() -> BTreeSet<String> {
    let dir = repo_root().join("functions/api/src");
    let mut found = BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    while let Some(file) = files.pop() {
        if file.is_dir() {
            files.extend(std::fs::read_dir(&file).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if file.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices(".route(") {
            let rest = text[at + ".route(".len()..].trim_start();
            if let Some(literal) = rest.strip_prefix('"') {
                let end = literal.find('"').expect("a route path literal ends");
                found.insert(literal[..end].to_owned());
            }
        }
    }
    found
}

/// A concrete path for a template: every `{param}` becomes a design id.
fn concrete(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').expect("a path parameter closes") + open;
        out.push_str(SOME_ID);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The methods the server serves on `template` (from a TRACE's 405 and its `Allow`, without the
/// HEAD axum adds to every GET), or `None` when nothing is routed there.
async fn served(http: &reqwest::Client, base: &str, token: &str, template: &str) -> Option<BTreeSet<String>> {
    let resp = http.request(reqwest::Method::TRACE, format!("{base}{}", concrete(template))).bearer_auth(token).send();
    let resp = resp.await.unwrap();
    match resp.status().as_u16() {
        405 => {
            let allow = resp.headers().get("allow").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
            let methods: BTreeSet<String> =
                allow.split(',').map(|m| m.trim().to_uppercase()).filter(|m| !m.is_empty() && m != "HEAD").collect();
            assert!(!methods.is_empty(), "{template}: a 405 without an Allow header");
            Some(methods)
        }
        404 => None,
        other => panic!("{template}: TRACE answered {other}; the probe expects 405 (routed) or 404 (not routed)"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_documents_exactly_the_routes_and_methods_the_server_serves() {
    let doc = contract();
    assert_eq!(doc["openapi"].as_str().map(|v| &v[..4]), Some("3.1."), "the contract is OpenAPI 3.1");
    let documented = documented(&doc);
    let in_source = declared_in_source();
    assert!(in_source.contains("/v1/designs"), "the source scan finds the router's routes: {in_source:?}");

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let token = server.token("contract");
    let http = reqwest::Client::new();
    assert_eq!(
        served(&http, &server.url, &token, "/v1/no-such-route").await,
        None,
        "the probe tells an unrouted path from a routed one"
    );

    let mut drift = Vec::new();
    for path in &in_source {
        if !documented.contains_key(path) {
            drift.push(format!("{path} is routed in functions/api/src but not documented in docs/openapi.yaml"));
        }
    }
    let templates: BTreeSet<&String> = documented.keys().chain(in_source.iter()).collect();
    for template in templates {
        let served = served(&http, &server.url, &token, template).await;
        match (documented.get(template), served) {
            (Some(_), None) => drift.push(format!("{template} is documented but the server does not route it")),
            (Some(doc_methods), Some(methods)) if doc_methods != &methods => {
                drift.push(format!("{template}: documented methods {doc_methods:?}, the server serves {methods:?}"))
            }
            (None, Some(methods)) => drift.push(format!("{template} ({methods:?}) is served but not documented")),
            _ => {}
        }
    }
    assert!(drift.is_empty(), "docs/openapi.yaml and the router disagree:\n{}", drift.join("\n"));
}

/// Every operation of the contract: (method, path template, operation object).
fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if METHODS.contains(&method.as_str()) {
                out.push((method.to_uppercase(), path.clone(), op));
            }
        }
    }
    out
}

/// Follows a local `$ref` (`#/components/…`).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("only local references: {r}"));
            resolve(doc, doc.pointer(pointer).unwrap_or_else(|| panic!("{r} does not resolve")))
        }
        None => v,
    }
}

fn needs_token(doc: &Value, op: &Value) -> bool {
    let security = op.get("security").unwrap_or(&doc["security"]);
    security.as_array().is_some_and(|s| !s.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_that_the_contract_says_need_a_token_refuse_requests_without_one_and_only_those() {
    let doc = contract();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let http = reqwest::Client::new();
    for (method, path, op) in operations(&doc) {
        let url = format!("{}{}", server.url, concrete(&path));
        let resp = http.request(method.parse().unwrap(), url).send().await.unwrap();
        let status = resp.status().as_u16();
        if needs_token(&doc, op) {
            assert_eq!(status, 401, "{method} {path} without a token");
            assert!(op["responses"].get("401").is_some(), "{method} {path} documents its 401");
        } else {
            assert_ne!(status, 401, "{method} {path} is documented as open");
        }
    }
}

#[test]
fn every_documented_response_carries_a_correlation_id_and_every_error_is_a_problem_document() {
    let doc = contract();
    for (method, path, op) in operations(&doc) {
        let responses = op["responses"].as_object().unwrap_or_else(|| panic!("{method} {path} has responses"));
        assert!(responses.keys().any(|s| s.starts_with('2')), "{method} {path} documents a success");
        for (status, response) in responses {
            let response = resolve(&doc, response);
            let what = format!("{method} {path} {status}");
            let headers = response["headers"].as_object().unwrap_or_else(|| panic!("{what} has headers"));
            let header = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
            assert!(header("x-correlation-id").is_some(), "{what} documents x-correlation-id");
            if status == "204" {
                assert!(response.get("content").is_none(), "{what} has no content");
                continue;
            }
            let content = response["content"].as_object().unwrap_or_else(|| panic!("{what} has content"));
            if !status.starts_with('2') {
                assert_eq!(content.keys().collect::<Vec<_>>(), ["application/problem+json"], "{what}");
                let schema = &content["application/problem+json"]["schema"]["$ref"];
                assert_eq!(schema, "#/components/schemas/Problem", "{what}");
            }
            let required = |name: &str| header(name).map(|h| resolve(&doc, h)["required"] == true);
            match status.as_str() {
                "202" => assert_eq!(required("Location"), Some(true), "{what} has Location"),
                "401" => assert_eq!(required("WWW-Authenticate"), Some(true), "{what} has WWW-Authenticate"),
                "429" | "503" => assert_eq!(required("Retry-After"), Some(true), "{what} has Retry-After"),
                _ => {}
            }
            if needs_token(&doc, op) && status != "401" && !status.starts_with('5') && status != "408" {
                assert!(header("RateLimit-Remaining").is_some(), "{what} documents the RateLimit headers");
            }
        }
        if needs_token(&doc, op) {
            assert!(responses.contains_key("401") && responses.contains_key("429"), "{method} {path}");
        }
        for param in op["parameters"].as_array().into_iter().flatten() {
            let param = resolve(&doc, param);
            assert!(param["schema"].is_object(), "{method} {path}: parameter {} has a schema", param["name"]);
        }
    }
}

#[test]
fn every_path_parameter_of_the_contract_is_declared() {
    let doc = contract();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let names: Vec<&str> =
            path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect();
        for (method, op) in item.as_object().unwrap().iter().filter(|(m, _)| METHODS.contains(&m.as_str())) {
            let declared: BTreeSet<String> = item["parameters"]
                .as_array()
                .into_iter()
                .chain(op["parameters"].as_array())
                .flatten()
                .map(|p| resolve(&doc, p))
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect();
            let wanted: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
            assert_eq!(declared, wanted, "{method} {path}: path parameters");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_number_written_as_a_whole_float_is_that_number_as_the_contracts_integer_type_says() {
    // JSON Schema's `integer` includes `1.0`; schemathesis sends such numbers, and JSON clients
    // may too. A fraction is still refused.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let client = openqq_e2e::Client::new(&server.url, &server.token("contract"));
    let mut body = openqq_e2e::blink_design("whole");
    body["revision"] = serde_json::json!(1.0);
    let (status, accepted) = client.post("/v1/designs", &body).await.unwrap();
    assert_eq!((status, &accepted["revision"]), (202, &serde_json::json!(1)), "{accepted}");
    body["revision"] = serde_json::json!(1.5);
    let (status, problem) = client.post("/v1/designs", &body).await.unwrap();
    assert_eq!((status, &problem["field"]), (422, &serde_json::json!("revision")), "{problem}");
}

/// Every problem `type` slug the API's source can answer with: the first string literal of each
/// `Problem::new(…)` (and `Self::new(…)` in problem.rs), and every `urn:openqq:problem:…` literal.
fn problem_slugs_in_source() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut files: Vec<_> = vec![repo_root().join("functions/api/src")];
    while let Some(file) = files.pop() {
        if file.is_dir() {
            files.extend(std::fs::read_dir(&file).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if file.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let mut calls = vec!["Problem::new("];
        if file.ends_with("problem.rs") {
            calls.push("Self::new(");
        }
        for call in calls {
            for (at, _) in text.match_indices(call) {
                let rest = &text[at + call.len()..];
                let statement = &rest[..rest.find(';').unwrap_or(rest.len())];
                if let Some(open) = statement.find('"') {
                    let literal = &statement[open + 1..];
                    found.insert(literal[..literal.find('"').unwrap()].to_owned());
                }
            }
        }
        for (at, _) in text.match_indices("urn:openqq:problem:") {
            let rest = &text[at + "urn:openqq:problem:".len()..];
            let end = rest.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')).unwrap();
            if end > 0 {
                found.insert(rest[..end].to_owned());
            }
        }
    }
    found
}

#[test]
fn every_problem_type_the_api_can_answer_is_named_in_the_contract() {
    let slugs = problem_slugs_in_source();
    assert!(
        slugs.contains("invalid-field") && slugs.contains("rate-limited"),
        "the scan finds the problems: {slugs:?}"
    );
    let text = std::fs::read_to_string(repo_root().join("docs/openapi.yaml")).unwrap();
    let missing: Vec<_> = slugs.iter().filter(|s| !text.contains(&format!("`{s}`"))).collect();
    assert!(missing.is_empty(), "problem types the API answers that docs/openapi.yaml never names: {missing:?}");
}

#[test]
fn the_contract_states_the_tenant_id_grammar_the_api_holds_tokens_to() {
    let doc = contract();
    let mint = &doc["paths"]["/v1/dev/tokens"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(mint["properties"]["tenant_id"]["pattern"].as_str(), Some(openqq_core::TENANT_ID_GRAMMAR));
    let bearer = doc["components"]["securitySchemes"]["bearer"]["description"].as_str().unwrap_or_default();
    assert!(bearer.contains(&format!("`{}`", openqq_core::TENANT_ID_GRAMMAR)), "the bearer scheme says: {bearer}");
}
