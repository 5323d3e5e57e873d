//! The deployment template (template.yaml) against the code it deploys.
//!
//! cfn-lint and `sam validate --lint` (scripts/services/cfn-lint.sh) check the template against
//! AWS's schemas, but they pass a starting position AWS refuses, a batch size over the limit, a
//! runtime that does not exist and a reference to a missing resource inside an environment
//! block. These tests hold the template to the code instead: each function's binary is a bin of
//! `openqq-lambda`, every environment variable a function sets is one the settings read, topics
//! and consumer groups are the ones the platform uses, the table is the store adapter's, and the
//! triggers stay within what AWS documents for MSK. The batch lane is held to the code the same
//! way: the batch function reads the batch topics, and each consumer has a twin in the lane, its
//! original with a trigger on the twin topic and a reserved concurrency of its own. The scheduler
//! function is held to its invocation: one rule a minute, a bounded retry policy, a dead-letter
//! queue for the minutes that did not run, one runner at a time.

use openqq_core::{EventKind, Topics};
use openqq_e2e::repo_root;
use openqq_platform::{Platform, Settings};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The functions that deploy each bin of `openqq-lambda`: logical id in the template, and the bin
/// it runs. The batch lane's twins ([`BATCH_LANE`]) run their originals' bins.
pub(crate) const FUNCTIONS: [(&str, &str); 8] = [
    ("ApiFunction", "api"),
    ("DesignJobFunction", "design-job"),
    ("SynthesisFunction", "synthesis"),
    ("GenerationFunction", "generation"),
    ("ValidationFunction", "validation"),
    ("ResultsFunction", "results"),
    ("BatchFunction", "batch"),
    ("SchedulerFunction", "scheduler"),
];

/// The functions no MSK trigger invokes: the API (the HTTP API) and the scheduler (its rule).
const NOT_CONSUMERS: [&str; 2] = ["ApiFunction", "SchedulerFunction"];

/// The batch lane's twin of each consumer function: its logical id, and its original's.
const BATCH_LANE: [(&str, &str); 5] = [
    ("BatchDesignJobFunction", "DesignJobFunction"),
    ("BatchSynthesisFunction", "SynthesisFunction"),
    ("BatchGenerationFunction", "GenerationFunction"),
    ("BatchValidationFunction", "ValidationFunction"),
    ("BatchResultsFunction", "ResultsFunction"),
];

/// Every function of the template: the bins' functions, then the batch lane's twins.
fn all_functions() -> impl Iterator<Item = &'static str> {
    FUNCTIONS.iter().map(|(id, _)| *id).chain(BATCH_LANE.iter().map(|(twin, _)| *twin))
}

/// The functions invoked by MSK triggers: all but the API and the scheduler.
fn consumer_functions() -> impl Iterator<Item = &'static str> {
    all_functions().filter(|id| !NOT_CONSUMERS.contains(id))
}

/// The functions of the batch lane: the batch function and the twins.
fn batch_lane_functions() -> impl Iterator<Item = &'static str> {
    std::iter::once("BatchFunction").chain(BATCH_LANE.iter().map(|(twin, _)| *twin))
}

/// Variables every function must set: without them a function falls back to embedded storage in
/// its own /tmp, which is right for one machine and wrong for a fleet.
const SHARED_BACKENDS: [&str; 5] =
    ["OPENQQ_MSK_CLUSTER_ARN", "OPENQQ_KAFKA_AUTH", "OPENQQ_DYNAMODB_TABLE", "OPENQQ_S3_BUCKET", "OPENQQ_TOPIC_PREFIX"];

/// Standard variables of the AWS SDK and the Rust runtime a function may set.
const STANDARD: [&str; 6] =
    ["AWS_ENDPOINT_URL", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_USE_FIPS_ENDPOINT", "RUST_LOG", "RUST_BACKTRACE"];

/// A prefix to resolve `${TopicPrefix}` with, so a missing prefix shows.
const PREFIX: &str = "stage-";

// --- Reading the template ---------------------------------------------------------------------

/// template.yaml as JSON, with CloudFormation's short tags in their long form (`!Ref X` is
/// `{"Ref": "X"}`, `!GetAtt A.B` is `{"Fn::GetAtt": ["A", "B"]}`, `!Sub …` is `{"Fn::Sub": …}`).
pub(crate) fn template() -> Value {
    let path = repo_root().join("template.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let yaml: serde_norway::Value =
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    long_form(yaml)
}

fn long_form(v: serde_norway::Value) -> Value {
    use serde_norway::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::from_str(&n.to_string()).expect("a YAML number is a JSON number"),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(long_form).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| match k {
                    Y::String(k) => (k, long_form(v)),
                    other => panic!("a mapping key that is not a string: {other:?}"),
                })
                .collect(),
        ),
        Y::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let value = long_form(tagged.value);
            match name {
                "Ref" => json!({ "Ref": value }),
                "Condition" => json!({ "Condition": value }),
                "GetAtt" => match value {
                    Value::String(s) => {
                        let (resource, attribute) = s.split_once('.').expect("!GetAtt names RESOURCE.ATTRIBUTE");
                        json!({ "Fn::GetAtt": [resource, attribute] })
                    }
                    other => json!({ "Fn::GetAtt": other }),
                },
                other => json!({ format!("Fn::{other}"): value }),
            }
        }
    }
}

fn resources(t: &Value) -> &Map<String, Value> {
    t["Resources"].as_object().expect("the template has resources")
}

pub(crate) fn properties<'a>(t: &'a Value, logical_id: &str) -> &'a Value {
    let r = &resources(t)[logical_id];
    assert!(r.is_object(), "the template declares {logical_id}");
    &r["Properties"]
}

/// Resolves what the tests need to compare: strings, `Ref` to a parameter (from `params`) and
/// `Fn::Sub` of a string over them. Anything else is `None`.
fn resolve(v: &Value, params: &BTreeMap<&str, &str>) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Object(o) if o.len() == 1 => {
            // A condition is taken as met: the sample deployment configures everything optional.
            if let Some(Value::Array(branches)) = o.get("Fn::If") {
                return resolve(branches.get(1)?, params);
            }
            if let Some(Value::String(name)) = o.get("Ref") {
                return params.get(name.as_str()).map(|v| v.to_string());
            }
            let Some(Value::String(text)) = o.get("Fn::Sub") else { return None };
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some(at) = rest.find("${") {
                out.push_str(&rest[..at]);
                let end = rest[at..].find('}').expect("a ${…} in a Sub string closes") + at;
                out.push_str(params.get(&rest[at + 2..end])?);
                rest = &rest[end + 1..];
            }
            out.push_str(rest);
            Some(out)
        }
        _ => None,
    }
}

/// Sample values for the template's parameters and the names its resources would get.
fn sample_values() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("TopicPrefix", PREFIX),
        ("MskClusterArn", "arn:aws:kafka:eu-west-1:123456789012:cluster/openqq/0b1c2d3e-4f56-7890-abcd-ef0123456789-2"),
        ("JwtIssuer", "https://issuer.example.com/"),
        ("JwtAudience", "openqq"),
        ("ApiReservedConcurrency", "50"),
        ("Table", "openqq-Table-1ABCDEF"),
        ("ObjectBucket", "openqq-objectbucket-1abcdef"),
        ("LimiterCache", "openqq-limiter"),
        ("GenerationUrl", "https://api.openai.com/v1"),
        ("GenerationModel", "gpt-4o-mini"),
        ("GenerationApiKeySecretName", "openqq/generation-key"),
        ("GenerationDailyTokens", "1000000"),
        ("GenerationJobTokens", "100000"),
        ("AWS::StackName", "openqq"),
    ])
}

fn variables(t: &Value, function: &str) -> Map<String, Value> {
    properties(t, function)["Environment"]["Variables"].as_object().cloned().unwrap_or_default()
}

/// The MSK triggers of a consumer function (at least one), by event name.
fn msk_triggers<'a>(t: &'a Value, function: &str) -> Vec<(&'a str, &'a Value)> {
    let events = properties(t, function)["Events"].as_object().expect("a consumer function has events");
    let msk: Vec<_> =
        events.iter().filter(|(_, e)| e["Type"] == "MSK").map(|(name, e)| (name.as_str(), &e["Properties"])).collect();
    assert!(!msk.is_empty(), "{function} has an MSK trigger");
    msk
}

/// A trigger's one topic and its consumer group, with `${TopicPrefix}` resolved.
fn topic_and_group(trigger: &Value, values: &BTreeMap<&str, &str>) -> (String, String) {
    let topics: Vec<_> = trigger["Topics"].as_array().unwrap().iter().map(|v| resolve(v, values).unwrap()).collect();
    assert_eq!(topics.len(), 1, "an MSK trigger reads one topic: {topics:?}");
    let group = resolve(&trigger["ConsumerGroupId"], values).expect("a fixed consumer group id");
    (topics[0].clone(), group)
}

/// The role a function runs as (`Role: !GetAtt SomeRole.Arn`).
fn role_of<'a>(t: &'a Value, function: &str) -> &'a str {
    let role = &properties(t, function)["Role"]["Fn::GetAtt"];
    assert_eq!(role[1], "Arn", "{function}'s role is a role of the template");
    role[0].as_str().unwrap()
}

/// The `[[bin]]` names of openqq-lambda, with their source files.
fn lambda_bins() -> BTreeMap<String, String> {
    let manifest = std::fs::read_to_string(repo_root().join("functions/lambda/Cargo.toml")).unwrap();
    let mut bins = BTreeMap::new();
    for section in manifest.split("[[bin]]").skip(1) {
        let field = |key: &str| {
            section.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        bins.insert(field("name").expect("a bin has a name"), field("path").expect("a bin has a path"));
    }
    bins
}

/// The event kind a consumer bin's `main` hands to `openqq_platform::lambda::consumer` (the
/// results function's `lambda::results` consumes `validation.finished`).
fn consumed_by(bin_source: &str) -> Option<EventKind> {
    let text = std::fs::read_to_string(repo_root().join("functions/lambda").join(bin_source)).unwrap();
    if text.contains("lambda::results()") {
        return Some(EventKind::ValidationFinished);
    }
    let call = text.split("lambda::consumer(").nth(1)?;
    let variant = call.split("EventKind::").nth(1)?.split(|c: char| !c.is_alphanumeric()).next()?;
    EventKind::ALL.into_iter().find(|k| format!("{k:?}") == variant)
}

// --- Functions --------------------------------------------------------------------------------

#[test]
fn each_function_runs_its_own_openqq_lambda_bin_as_a_bootstrap_on_provided_al2023() {
    let t = template();
    let bins = lambda_bins();
    let mut used = BTreeSet::new();
    let declared: BTreeSet<&str> = resources(&t)
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Serverless::Function")
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(declared, all_functions().collect(), "the template's functions");
    for (id, bin) in FUNCTIONS {
        let r = &resources(&t)[id];
        let p = &r["Properties"];
        let binary = if p["PackageType"] == "Image" {
            image_binary(id, &r["Metadata"])
        } else {
            assert_eq!(r["Metadata"]["BuildMethod"], "rust-cargolambda", "{id}");
            assert_eq!(p["Runtime"], "provided.al2023", "{id}");
            assert_eq!(p["Handler"], "bootstrap", "{id}: cargo lambda names the executable bootstrap");
            r["Metadata"]["BuildProperties"]["Binary"].as_str().unwrap_or_else(|| panic!("{id}: Binary")).to_owned()
        };
        let binary = binary.as_str();
        assert_eq!(binary, bin, "{id} runs the bin it is named for");
        assert!(bins.contains_key(binary), "{id}: {binary} is not a bin of openqq-lambda ({bins:?})");
        assert!(used.insert(bin), "{id}: {binary} is deployed twice");
        let arch = p["Architectures"].as_array().unwrap_or_else(|| panic!("{id}: Architectures"));
        assert!(arch.len() == 1 && ["arm64", "x86_64"].contains(&arch[0].as_str().unwrap()), "{id}: {arch:?}");
        let memory = p["MemorySize"].as_u64().unwrap_or_else(|| panic!("{id}: MemorySize"));
        assert!((128..=10_240).contains(&memory), "{id}: Lambda takes 128 to 10,240 MB, not {memory}");
        let timeout = p["Timeout"].as_u64().unwrap_or_else(|| panic!("{id}: Timeout"));
        assert!((1..=900).contains(&timeout), "{id}: Lambda takes 1 to 900 s, not {timeout}");
    }
    assert_eq!(used.len(), bins.len(), "every bin of openqq-lambda is deployed");
}

/// What the batch lane's twins must have as their originals have it: how they are built and run,
/// their settings and role, and how their trigger batches and retries.
const TWIN_ALIKE: [&str; 8] =
    ["PackageType", "CodeUri", "Handler", "Runtime", "Architectures", "MemorySize", "Timeout", "Role"];
const TWIN_TRIGGER_ALIKE: [&str; 8] = [
    "Stream",
    "StartingPosition",
    "BatchSize",
    "MaximumBatchingWindowInSeconds",
    "ProvisionedPollerConfig",
    "FunctionResponseTypes",
    "MaximumRetryAttempts",
    "BisectBatchOnFunctionError",
];

#[test]
fn each_batch_lane_twin_is_its_original_reading_the_twin_topic_with_a_pool_and_a_log_group_of_its_own() {
    let t = template();
    for (twin, original) in BATCH_LANE {
        let (r, o) = (&resources(&t)[twin], &resources(&t)[original]);
        let mut metadata = r["Metadata"].clone();
        if let Some(tag) = metadata.get_mut("DockerTag") {
            // Each image function is built under its own tag.
            assert_eq!(tag.as_str().map(|t| t.trim_start_matches("batch-")), o["Metadata"]["DockerTag"].as_str());
            *tag = o["Metadata"]["DockerTag"].clone();
        }
        assert_eq!(metadata, o["Metadata"], "{twin} is built as {original} is");
        let (p, q) = (&r["Properties"], &o["Properties"]);
        for key in TWIN_ALIKE {
            assert_eq!(p[key], q[key], "{twin}'s {key} is {original}'s");
        }
        assert_eq!(variables(&t, twin), variables(&t, original), "{twin}'s environment is {original}'s");
        assert_ne!(p["LoggingConfig"]["LogGroup"], q["LoggingConfig"]["LogGroup"], "{twin} logs to its own group");
        assert_ne!(p["FunctionName"], q["FunctionName"], "{twin} has a name of its own");
        let (mine, theirs) = (msk_triggers(&t, twin), msk_triggers(&t, original));
        assert_eq!(mine.len(), theirs.len(), "{twin}: a trigger per trigger of {original}");
        for ((_, a), (_, b)) in mine.iter().zip(&theirs) {
            for key in TWIN_TRIGGER_ALIKE {
                assert_eq!(a[key], b[key], "{twin}'s trigger's {key} is {original}'s");
            }
            assert_ne!(a["Topics"], b["Topics"], "{twin} reads the batch lane's topic");
        }
    }
}

#[test]
fn each_batch_lane_function_has_a_small_reserved_concurrency_of_its_own_from_a_parameter() {
    let t = template();
    let mut parameters = BTreeSet::new();
    for id in batch_lane_functions() {
        let reserved = &properties(&t, id)["ReservedConcurrentExecutions"]["Ref"];
        let name = reserved.as_str().unwrap_or_else(|| panic!("{id}'s reserved concurrency is a parameter"));
        assert!(name.ends_with("ReservedConcurrency") && name.starts_with("Batch"), "{id}: {name}");
        assert!(parameters.insert(name), "{id}: {name} is another function's too");
        let parameter = &t["Parameters"][name];
        let default = parameter["Default"].as_u64().unwrap_or_else(|| panic!("{name} has a default"));
        // A batch takes at most this much of the account's concurrency, whatever its size.
        assert!((1..=10).contains(&default), "{name}: a small default, not {default}");
        assert!(parameter["MinValue"].as_u64() >= Some(1), "{name}: at least 1, or the lane never runs");
    }
}

/// The bin a container-image function's Dockerfile builds and starts (its `BIN` build argument,
/// the function's own or the Dockerfile's default), checked to install the HDL tools the
/// synthesis and generation functions run (the image is built by `sam build`, not here: no
/// container engine on the test machine).
fn image_binary(id: &str, metadata: &Value) -> String {
    assert_eq!(metadata["DockerContext"], ".", "{id}: built from the repository root");
    let path = metadata["Dockerfile"].as_str().unwrap_or_else(|| panic!("{id}: Dockerfile"));
    let dockerfile = std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{id}: {path}: {e}"));
    let default = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ARG BIN="))
        .unwrap_or_else(|| panic!("{id}: {path} has no default BIN"));
    let bin = metadata["DockerBuildArgs"]["BIN"].as_str().unwrap_or(default);
    for needed in [
        "-p openqq-lambda",
        "--locked",
        "--bin ${BIN}",
        "yosys",
        "iverilog",
        "target/release/${BIN} /var/runtime/bootstrap",
    ] {
        assert!(dockerfile.contains(needed), "{id}: {path} lacks {needed:?}");
    }
    bin.to_owned()
}

#[test]
fn the_api_function_answers_within_the_http_apis_30_second_limit_from_a_bounded_pool() {
    let t = template();
    let p = properties(&t, "ApiFunction");
    assert!(p["Timeout"].as_u64().unwrap() < 30, "API Gateway gives up on an HTTP API integration at 30 s");
    assert_eq!(p["ReservedConcurrentExecutions"], json!({"Ref": "ApiReservedConcurrency"}));
    assert!(t["Parameters"]["ApiReservedConcurrency"].is_object(), "the pool's size is a parameter");
    let events = p["Events"].as_object().unwrap();
    assert!(events.values().all(|e| e["Type"] == "HttpApi"), "the API function is invoked by the HTTP API only");
    let authorizer = &properties(&t, "HttpApi")["Auth"];
    let name = authorizer["DefaultAuthorizer"].as_str().expect("the HTTP API has a default authorizer");
    assert!(authorizer["Authorizers"][name]["JwtConfiguration"].is_object(), "{name} is a JWT authorizer");
    // Only the routes that carry no bearer token bypass it.
    for (id, event) in events {
        if event["Properties"]["Auth"]["Authorizer"] == "NONE" {
            let path = event["Properties"]["Path"].as_str().unwrap();
            assert!(["/v1/uploads/{digest}", "/healthz"].contains(&path), "{id}: {path} skips the authorizer");
        }
    }
}

#[test]
fn every_variable_a_function_sets_is_one_the_settings_read() {
    let t = template();
    let read: BTreeSet<String> = Settings::env_vars().into_iter().collect();
    for id in all_functions() {
        for name in variables(&t, id).keys() {
            let known = read.contains(name)
                || (id == "ApiFunction" && name == openqq_platform::secret::ENV)
                || STANDARD.contains(&name.as_str());
            assert!(known, "{id} sets {name}, which nothing reads (known: {read:?})");
        }
    }
}

#[test]
fn every_function_shares_the_log_the_store_and_the_objects_and_only_the_api_holds_the_token_secret() {
    let t = template();
    for id in all_functions() {
        let vars = variables(&t, id);
        for name in SHARED_BACKENDS.iter().chain(["OPENQQ_S3_BUCKET"].iter()) {
            assert!(vars.contains_key(*name), "{id} does not set {name}");
        }
        let holds_secret = vars.contains_key(openqq_platform::secret::ENV);
        assert_eq!(holds_secret, id == "ApiFunction", "{id}: OPENQQ_JWT_SECRET");
        let reserved = ["AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];
        assert!(vars.keys().all(|k| !reserved.contains(&k.as_str())), "{id} sets a variable Lambda reserves");
    }
    let api = variables(&t, "ApiFunction");
    assert!(api.contains_key("OPENQQ_ELASTICACHE_CACHE"), "the API's limiter is shared through ElastiCache");
    let secret = api[openqq_platform::secret::ENV]["Fn::Sub"].as_str().unwrap_or_default();
    assert!(secret.starts_with("{{resolve:secretsmanager:"), "the JWT secret comes from Secrets Manager: {secret}");
}

#[test]
fn every_functions_settings_start_the_platform_the_way_the_cold_start_reads_them() {
    let t = template();
    let values = sample_values();
    for id in all_functions() {
        let mut args = vec!["--data-dir=/nonexistent".to_owned()];
        for (name, value) in variables(&t, id) {
            if !Settings::env_vars().contains(&name) {
                continue;
            }
            let value = resolve(&value, &values).unwrap_or_else(|| panic!("{id}: cannot resolve {name} = {value}"));
            let flag = name.trim_start_matches("OPENQQ_").to_lowercase().replace('_', "-");
            args.push(format!("--{flag}={value}"));
        }
        if let Err(e) = Settings::from_args(&args) {
            panic!("{id}'s environment does not start the platform: {e:#} ({args:?})");
        }
    }
}

// --- Triggers ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_trigger_reads_a_topic_its_bin_consumes_in_its_lane_under_the_consumer_group_the_platform_names() {
    use openqq_platform::{consumer_group, BATCH_CONSUMED, CONSUMED};
    let t = template();
    let values = sample_values();
    let data = tempfile::tempdir().unwrap();
    let settings =
        Settings::from_args([format!("--data-dir={}", data.path().display()), format!("--topic-prefix={PREFIX}")])
            .unwrap();
    let platform = Platform::build(settings).await.expect("the embedded platform builds");
    // Every trigger of the template: the function reading each topic, and its group.
    let mut read = BTreeMap::new();
    for id in consumer_functions() {
        for (event, trigger) in msk_triggers(&t, id) {
            assert_eq!(trigger["Stream"], json!({"Ref": "MskClusterArn"}), "{id}.{event} reads the cluster parameter");
            let (topic, group) = topic_and_group(trigger, &values);
            let other = read.insert(topic.clone(), (id, group));
            assert!(other.is_none(), "{topic} has two triggers: {id}.{event} and {other:?}");
        }
    }
    // What `openqq up` runs: each consumer function on its topic and, in the batch lane, its twin
    // on the twin topic; the batch function on both batch topics.
    let bins = lambda_bins();
    let mut expected = Vec::new();
    for (id, bin) in FUNCTIONS.into_iter().filter(|(id, _)| !NOT_CONSUMERS.contains(id)) {
        let kind = consumed_by(&bins[bin]).unwrap_or_else(|| panic!("{bin}'s main names the kind it consumes"));
        let name = platform.handler(kind).unwrap().name().to_owned();
        if BATCH_CONSUMED.contains(&kind) {
            for kind in BATCH_CONSUMED {
                let other = platform.handler(kind).unwrap();
                assert_eq!(other.name(), name, "{kind}: the batch function's bin serves every batch topic");
                expected.push((id, kind, false, name.clone()));
            }
            continue;
        }
        assert!(CONSUMED.contains(&kind), "{kind} is consumed");
        expected.push((id, kind, false, name.clone()));
        let twin = BATCH_LANE.iter().find(|(_, original)| *original == id).map(|(twin, _)| *twin);
        expected.push((twin.unwrap_or_else(|| panic!("{id} has a twin in the batch lane")), kind, true, name));
    }
    let runs: BTreeSet<(&str, bool)> = expected.iter().map(|(_, kind, lane, _)| (kind.as_str(), *lane)).collect();
    let all: BTreeSet<(&str, bool)> = CONSUMED
        .iter()
        .flat_map(|k| [(k.as_str(), false), (k.as_str(), true)])
        .chain(BATCH_CONSUMED.iter().map(|k| (k.as_str(), false)))
        .collect();
    assert_eq!(runs, all, "every topic `openqq up` consumes has its function");
    let mut groups = BTreeSet::new();
    for (id, kind, lane, name) in &expected {
        let topic = Topics::new(PREFIX).lane(*kind, *lane);
        let (reader, group) = read.remove(&topic).unwrap_or_else(|| panic!("no trigger reads {topic}"));
        assert_eq!(reader, *id, "{topic}'s function");
        // As `openqq up`'s trigger names it: the topic prefix, then the group of the function
        // (in the batch lane, under `batch.`).
        assert_eq!(group, format!("{PREFIX}{}", consumer_group(name, *kind, *lane)), "{id}'s group on {topic}");
        // Lambda refuses a Kafka trigger whose group another trigger of the cluster uses.
        assert!(groups.insert(group.clone()), "{group} is the group of two triggers");
    }
    assert!(read.is_empty(), "triggers on topics nothing consumes: {read:?}");
}

#[test]
fn every_trigger_starts_at_the_oldest_record_within_awss_documented_limits_for_msk() {
    let t = template();
    for (id, p) in consumer_functions().flat_map(|id| msk_triggers(&t, id).into_iter().map(move |(_, p)| (id, p))) {
        assert_eq!(p["StartingPosition"], "TRIM_HORIZON", "{id}: a new mapping reads what the topic holds");
        let batch = p["BatchSize"].as_u64().unwrap_or_else(|| panic!("{id}: BatchSize"));
        assert!((1..=10_000).contains(&batch), "{id}: MSK batches are 1 to 10,000 records, not {batch}");
        let window = p["MaximumBatchingWindowInSeconds"].as_u64().unwrap_or_else(|| panic!("{id}: window"));
        assert!(window <= 300, "{id}: the batching window is 0 to 300 s, not {window}");
        let group = resolve(&p["ConsumerGroupId"], &BTreeMap::from([("TopicPrefix", PREFIX)])).unwrap();
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-/*:_+=.@".contains(c);
        assert!((1..=200).contains(&group.len()) && group.chars().all(allowed), "{id}: consumer group {group:?}");
        // Partial-batch responses and a retry limit are error-handling controls, which Lambda's
        // Kafka triggers offer in provisioned mode only.
        assert_eq!(p["FunctionResponseTypes"], json!(["ReportBatchItemFailures"]), "{id}");
        let pollers = &p["ProvisionedPollerConfig"];
        assert!(pollers["MinimumPollers"].as_u64().is_some_and(|n| (1..=200).contains(&n)), "{id}: {pollers}");
        let retries = p["MaximumRetryAttempts"].as_i64().unwrap_or_else(|| panic!("{id}: MaximumRetryAttempts"));
        assert!((0..=10_000).contains(&retries), "{id}: a finite retry limit, not {retries}");
        assert_eq!(p["BisectBatchOnFunctionError"], false, "{id}: splitting a batch would reorder a partition");
        assert!(p["DestinationConfig"]["OnFailure"]["Destination"].is_object(), "{id}: an on-failure destination");
        let timeout = properties(&t, id)["Timeout"].as_u64().unwrap();
        assert!(timeout > window, "{id}: the function outlives the batching window");
    }
}

// --- Table and bucket -------------------------------------------------------------------------

#[test]
fn the_table_is_the_store_adapters_on_demand_with_recovery_and_ttl() {
    use openqq_adapters::dynamo::table::DEFINITION;
    let t = template();
    let r = &resources(&t)["Table"];
    assert_eq!(r["Type"], "AWS::DynamoDB::Table");
    assert_eq!(r["DeletionPolicy"], "Retain", "deleting the stack keeps the designs");
    let p = &r["Properties"];
    assert_eq!(p["BillingMode"], DEFINITION.billing_mode);
    let pairs = |list: &Value, a: &str, b: &str| -> Vec<(String, String)> {
        let list = list.as_array().unwrap_or_else(|| panic!("{list}"));
        list.iter().map(|e| (e[a].as_str().unwrap().to_owned(), e[b].as_str().unwrap().to_owned())).collect()
    };
    let want = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    };
    assert_eq!(pairs(&p["KeySchema"], "AttributeName", "KeyType"), want(DEFINITION.key_schema));
    let mut attributes = pairs(&p["AttributeDefinitions"], "AttributeName", "AttributeType");
    let mut expected = want(DEFINITION.attributes);
    attributes.sort();
    expected.sort();
    assert_eq!(attributes, expected, "attribute definitions");
    let indexes: Vec<&str> = p["GlobalSecondaryIndexes"]
        .as_array()
        .map(|l| l.iter().map(|i| i["IndexName"].as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(indexes, DEFINITION.global_secondary_indexes, "global secondary indexes");
    assert!(p["LocalSecondaryIndexes"].is_null(), "no local secondary index (docs/DYNAMODB.md)");
    assert_eq!(p["TimeToLiveSpecification"], json!({"AttributeName": DEFINITION.ttl_attribute, "Enabled": true}));
    assert_eq!(p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], true);
}

#[test]
fn the_object_bucket_is_private_and_expires_unadopted_uploads_after_a_day() {
    let t = template();
    let p = properties(&t, "ObjectBucket");
    let block = &p["PublicAccessBlockConfiguration"];
    for key in ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"] {
        assert_eq!(block[key], true, "{key}");
    }
    let rules = p["LifecycleConfiguration"]["Rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "one lifecycle rule");
    let rule = &rules[0];
    assert_eq!(rule["Id"], "expire-unadopted-uploads");
    assert_eq!(
        (&rule["Status"], &rule["Prefix"], &rule["ExpirationInDays"]),
        (&json!("Enabled"), &json!("uploads/"), &json!(1))
    );
}

// --- References and permissions ---------------------------------------------------------------

/// Every name a `Ref`, `Fn::GetAtt` or `${…}` in a `Fn::Sub` refers to, with where.
fn references(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Array(items) => items.iter().enumerate().for_each(|(i, x)| references(x, &format!("{at}[{i}]"), out)),
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x) {
                    ("Ref", Value::String(name)) => out.push((name.clone(), at.to_owned())),
                    ("Fn::GetAtt", Value::Array(parts)) => {
                        out.push((parts[0].as_str().unwrap().to_owned(), at.to_owned()));
                    }
                    ("Fn::Sub", sub) => {
                        let (text, locals) = match sub {
                            Value::String(s) => (s.as_str(), Map::new()),
                            Value::Array(parts) => {
                                references(&parts[1], at, out);
                                (parts[0].as_str().unwrap(), parts[1].as_object().cloned().unwrap_or_default())
                            }
                            other => panic!("{at}: Fn::Sub of {other}"),
                        };
                        for piece in text.split("${").skip(1) {
                            let name = piece.split('}').next().unwrap();
                            if name.starts_with('!') || locals.contains_key(name) {
                                continue;
                            }
                            out.push((name.split('.').next().unwrap().to_owned(), at.to_owned()));
                        }
                    }
                    _ => references(x, &format!("{at}.{k}"), out),
                }
            }
        }
        _ => {}
    }
}

#[test]
fn every_reference_names_a_parameter_a_resource_or_a_pseudo_parameter() {
    let t = template();
    let mut known: BTreeSet<String> = resources(&t).keys().cloned().collect();
    known.extend(t["Parameters"].as_object().unwrap().keys().cloned());
    let mut found = Vec::new();
    for section in ["Resources", "Outputs", "Globals", "Conditions"] {
        references(&t[section], section, &mut found);
    }
    assert!(found.len() > 50, "the walk finds the references ({})", found.len());
    for (name, at) in found {
        assert!(known.contains(&name) || name.starts_with("AWS::"), "{at} refers to {name}, which is not declared");
    }
}

#[test]
fn no_role_grants_a_wildcard_action_or_a_wildcard_resource_on_data() {
    let t = template();
    let mut statements = 0;
    for (id, r) in resources(&t) {
        let documents: Vec<&Value> = match r["Type"].as_str() {
            Some("AWS::IAM::Role") => {
                r["Properties"]["Policies"].as_array().unwrap().iter().map(|p| &p["PolicyDocument"]).collect()
            }
            Some("AWS::IAM::ManagedPolicy") => vec![&r["Properties"]["PolicyDocument"]],
            _ => continue,
        };
        for statement in documents.into_iter().flat_map(|d| d["Statement"].as_array().unwrap()) {
            statements += 1;
            let one_or_many = |v: &Value| match v {
                Value::Array(a) => a.clone(),
                other => vec![other.clone()],
            };
            let actions = one_or_many(&statement["Action"]);
            for action in &actions {
                let action = action.as_str().unwrap_or_else(|| panic!("{id}: action {action}"));
                assert!(!action.contains('*'), "{id} grants {action}");
            }
            if one_or_many(&statement["Resource"]).contains(&json!("*")) {
                // Only actions that take no resource may be granted on "*".
                for action in actions {
                    let action = action.as_str().unwrap();
                    assert!(action.starts_with("ec2:"), "{id} grants {action} on every resource");
                }
            }
        }
    }
    assert!(statements >= 20, "the roles' statements were read ({statements})");
}

/// The names, after `${TopicPrefix}`, of the Kafka `kind` (`topic` or `group`) resources of
/// `role`'s statements that allow `action`.
fn kafka_resources(t: &Value, role: &str, action: &str, kind: &str) -> BTreeSet<String> {
    let one_or_many = |v: &Value| match v {
        Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    };
    let marker = format!(":{kind}/${{Cluster}}/${{TopicPrefix}}");
    let mut out = BTreeSet::new();
    for policy in properties(t, role)["Policies"].as_array().unwrap() {
        for statement in policy["PolicyDocument"]["Statement"].as_array().unwrap() {
            if !one_or_many(&statement["Action"]).contains(&json!(action)) {
                continue;
            }
            for resource in one_or_many(&statement["Resource"]) {
                let sub = &resource["Fn::Sub"];
                let text = sub[0].as_str().or(sub.as_str()).unwrap_or_default();
                if let Some((_, name)) = text.split_once(&marker) {
                    out.insert(name.to_owned());
                }
            }
        }
    }
    out
}

/// The consumer functions that put records back at the end of the topic they read (past a
/// tenant's share of a batch, or its time slice: `openqq_runtime::share`).
const DEFERRING: [&str; 3] = ["SynthesisFunction", "GenerationFunction", "ValidationFunction"];

#[test]
fn each_role_reads_exactly_its_functions_topics_and_writes_each_topic_in_both_lanes() {
    let t = template();
    let values = BTreeMap::from([("TopicPrefix", "")]);
    let mut by_role: BTreeMap<&str, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for id in consumer_functions() {
        let (topics, groups) = by_role.entry(role_of(&t, id)).or_default();
        for (_, trigger) in msk_triggers(&t, id) {
            let (topic, group) = topic_and_group(trigger, &values);
            topics.insert(topic);
            groups.insert(group);
        }
    }
    let laned: BTreeSet<&str> = EventKind::LANED.iter().map(|k| k.as_str()).collect();
    let ended = EventKind::BatchItemEnded.as_str();
    for (role, (topics, groups)) in &by_role {
        let read = kafka_resources(&t, role, "kafka-cluster:ReadData", "topic");
        assert_eq!(&read, topics, "{role} reads its functions' topics and no other");
        let altered = kafka_resources(&t, role, "kafka-cluster:AlterGroup", "group");
        assert_eq!(&altered, groups, "{role} commits in its functions' groups and no other");
        let writes = kafka_resources(&t, role, "kafka-cluster:WriteData", "topic");
        assert!(writes.contains("dead-letter"), "{role} writes dead letters");
        let both_lanes = topics.iter().any(|t| t.strip_prefix("batch.").is_some_and(|k| laned.contains(k)));
        if !both_lanes {
            continue;
        }
        // A batch item's records stay in the batch lane, and one given up on ends its item.
        assert!(writes.contains(ended), "{role}: a batch item given up on ends in {ended}");
        for kind in &laned {
            let twin = format!("batch.{kind}");
            assert_eq!(writes.contains(*kind), writes.contains(&twin), "{role} writes {kind} in both lanes or neither");
        }
    }
    for id in DEFERRING {
        let writes = kafka_resources(&t, role_of(&t, id), "kafka-cluster:WriteData", "topic");
        for (_, trigger) in msk_triggers(&t, id) {
            let (topic, _) = topic_and_group(trigger, &values);
            assert!(writes.contains(&topic), "{id} puts records back on {topic}");
        }
    }
    let api = kafka_resources(&t, role_of(&t, "ApiFunction"), "kafka-cluster:WriteData", "topic");
    for kind in [EventKind::DesignSubmitted, EventKind::BatchSubmitted, EventKind::BatchItemEnded] {
        assert!(api.contains(kind.as_str()), "the API publishes {kind}");
    }
    let batch = kafka_resources(&t, role_of(&t, "BatchFunction"), "kafka-cluster:WriteData", "topic");
    let lane = Topics::new("").lane(EventKind::DesignSubmitted, true);
    assert!(batch.contains(&lane), "the batch function releases items onto {lane}");
}

// --- The local kit ----------------------------------------------------------------------------

#[test]
fn the_local_init_scripts_create_every_topic_and_the_table_as_the_code_defines_them() {
    use openqq_adapters::dynamo::table::DEFINITION;
    let topics_sh = std::fs::read_to_string(repo_root().join("localstack/init/topics.sh")).unwrap();
    let list = topics_sh.lines().find_map(|l| l.strip_prefix("topics=(")).expect("topics.sh lists its topics");
    let listed: Vec<String> = list.trim_end_matches(')').split_whitespace().map(str::to_owned).collect();
    assert_eq!(listed, Topics::new("").all(), "localstack/init/topics.sh");

    let resources_sh = std::fs::read_to_string(repo_root().join("localstack/init/resources.sh")).unwrap();
    for (name, kind) in DEFINITION.attributes {
        assert!(resources_sh.contains(&format!("AttributeName={name},AttributeType={kind}")), "{name} {kind}");
    }
    for (name, kind) in DEFINITION.key_schema {
        assert!(resources_sh.contains(&format!("AttributeName={name},KeyType={kind}")), "{name} {kind}");
    }
    assert!(resources_sh.contains(&format!("--billing-mode {}", DEFINITION.billing_mode)));
    assert!(resources_sh.contains(&format!("AttributeName={}", DEFINITION.ttl_attribute)));
}

// --- The dashboard and alarms -----------------------------------------------------------------

/// docs/OBSERVABILITY.md's metrics table: each metric and its label keys.
fn documented_metrics() -> BTreeMap<String, BTreeSet<String>> {
    let doc = std::fs::read_to_string(repo_root().join("docs/OBSERVABILITY.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in doc.lines().filter(|l| l.starts_with("| `openqq_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let labels = cells[3]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| !l.is_empty() && l != "—")
            .collect();
        out.insert(cells[1].trim_matches('`').to_owned(), labels);
    }
    assert!(out.len() >= 20, "the metrics table of docs/OBSERVABILITY.md was not found");
    out
}

/// The dashboard's body as JSON, its `${…}` substitutions replaced by a placeholder.
fn dashboard_body(t: &Value) -> Value {
    let text = properties(t, "Dashboard")["DashboardBody"]["Fn::Sub"].as_str().expect("the body is a Fn::Sub string");
    let mut plain = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        plain.push_str(&rest[..at]);
        let end = rest[at..].find('}').unwrap() + at;
        plain.push_str("substituted");
        rest = &rest[end + 1..];
    }
    plain.push_str(rest);
    serde_json::from_str(&plain).unwrap_or_else(|e| panic!("the dashboard body is not JSON: {e}"))
}

/// Every (metric, dimension set, where) in the platform's namespace that an alarm or a dashboard
/// widget reads: alarms' `MetricName`/`Dimensions` and `MetricStat`s, widgets' metric rows
/// (`[namespace, name, dim, value, …]`) and `SEARCH('{namespace,dims…} MetricName="…"')`.
fn metrics_read(t: &Value) -> Vec<(String, BTreeSet<String>, String)> {
    let ns = openqq_platform::lambda::METRICS_NAMESPACE;
    let dims = |d: &Value| -> BTreeSet<String> {
        d.as_array().into_iter().flatten().map(|x| x["Name"].as_str().unwrap().to_owned()).collect()
    };
    let mut out = Vec::new();
    for (id, r) in resources(t).iter().filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm") {
        let p = &r["Properties"];
        if p["Namespace"] == ns {
            out.push((p["MetricName"].as_str().unwrap().to_owned(), dims(&p["Dimensions"]), id.clone()));
        }
        for m in p["Metrics"].as_array().into_iter().flatten().map(|m| &m["MetricStat"]["Metric"]) {
            if m["Namespace"] == ns {
                out.push((m["MetricName"].as_str().unwrap().to_owned(), dims(&m["Dimensions"]), id.clone()));
            }
        }
    }
    for (i, widget) in dashboard_body(t)["widgets"].as_array().unwrap().iter().enumerate() {
        let at = format!("dashboard widget {i}");
        for row in widget["properties"]["metrics"].as_array().into_iter().flatten() {
            let row = row.as_array().unwrap();
            if row[0] == ns {
                let words: Vec<&str> = row.iter().filter_map(Value::as_str).collect();
                let dims = words[2..].chunks(2).map(|pair| pair[0].to_owned()).collect();
                out.push((words[1].to_owned(), dims, at.clone()));
            }
            let expression = row.iter().filter_map(|x| x["expression"].as_str()).next().unwrap_or_default();
            for search in expression.split("SEARCH('{").skip(1) {
                let (schema, rest) = search.split_once('}').unwrap();
                let mut schema = schema.split(',').map(str::trim);
                assert_eq!(schema.next(), Some(ns), "{at}: {expression}");
                let name = rest.split("MetricName=\"").nth(1).and_then(|r| r.split('"').next());
                let name = name.unwrap_or_else(|| panic!("{at}: a SEARCH names its metric: {expression}"));
                out.push((name.to_owned(), schema.map(str::to_owned).collect(), at.clone()));
            }
        }
    }
    out
}

#[test]
fn the_dashboard_and_alarms_read_only_metrics_the_code_publishes_under_dimension_sets_it_publishes() {
    let t = template();
    let documented = documented_metrics();
    let read = metrics_read(&t);
    for (name, dims, at) in &read {
        let labels = documented
            .get(name)
            .unwrap_or_else(|| panic!("{at} reads {name}, which docs/OBSERVABILITY.md does not list"));
        let published = dims == labels
            || openqq_platform::lambda::published_dimension_sets(name).iter().any(|set| {
                set.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>() == *dims && dims.is_subset(labels)
            });
        assert!(
            published,
            "{at} reads {name} by {dims:?}, a dimension set the functions do not publish (labels {labels:?})"
        );
    }
    // Every platform metric name anywhere in the body or the alarms was read above.
    let text = serde_json::to_string(&t["Resources"]).unwrap();
    let named: BTreeSet<&str> = text
        .match_indices("openqq_")
        .map(|(at, _)| text[at..].split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap())
        .collect();
    let seen: BTreeSet<&str> = read.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(named, seen, "a metric name outside a metric row, a SEARCH or an alarm");
    for signal in [
        "openqq_http_requests_total",
        "openqq_http_request_duration_seconds",
        "openqq_events_total",
        "openqq_dead_letters_total",
        "openqq_limiter_decisions_total",
        "openqq_webhook_deliveries_total",
    ] {
        assert!(seen.contains(signal), "the dashboard or alarms read {signal}");
    }
}

#[test]
fn alarms_watch_the_5xx_ratio_p99_latency_dead_letters_webhook_failures_and_each_triggers_offset_lag() {
    let t = template();
    let read = metrics_read(&t);
    let alarm_reads = |id: &str, metric: &str| read.iter().any(|(n, _, at)| at == id && n == metric);
    assert!(alarm_reads("HighServerErrorRatioAlarm", "openqq_http_requests_total"));
    assert!(alarm_reads("HighP99LatencyAlarm", "openqq_http_request_duration_seconds"));
    assert_eq!(properties(&t, "HighP99LatencyAlarm")["ExtendedStatistic"], "p99");
    assert!(alarm_reads("DeadLettersAlarm", "openqq_dead_letters_total"));
    assert!(alarm_reads("WebhookFailuresAlarm", "openqq_webhook_deliveries_total"));
    let body = properties(&t, "Dashboard")["DashboardBody"]["Fn::Sub"].as_str().unwrap();
    for id in consumer_functions() {
        assert!(!lambda_alarms_on(&t, "OffsetLag", id).is_empty(), "an alarm watches {id}'s trigger offset lag");
        let row = format!(r#"["AWS/Lambda", "OffsetLag", "FunctionName", "${{{id}}}""#);
        assert!(body.contains(&row), "the dashboard shows {id}'s trigger offset lag");
    }
    for id in all_functions() {
        assert!(!lambda_alarms_on(&t, "Errors", id).is_empty(), "an alarm watches {id}'s failed invocations");
    }
}

/// The alarms that read Lambda's `metric` of `function`: as their one metric, or in the
/// expression of their metric math.
fn lambda_alarms_on(t: &Value, metric: &str, function: &str) -> Vec<String> {
    let reads = |m: &Value| {
        m["Namespace"] == "AWS/Lambda"
            && m["MetricName"] == metric
            && m["Dimensions"] == json!([{"Name": "FunctionName", "Value": {"Ref": function}}])
    };
    let mut found = Vec::new();
    for (id, r) in resources(t).iter().filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm") {
        let p = &r["Properties"];
        let math = p["Metrics"].as_array().cloned().unwrap_or_default();
        let expression = math.iter().filter_map(|m| m["Expression"].as_str()).collect::<Vec<_>>().join(" ");
        // A metric in the math counts only if the expression uses its id.
        let in_math = math.iter().any(|m| {
            let used = m["Id"].as_str().is_some_and(|i| {
                expression.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|word| word == i)
            });
            used && reads(&m["MetricStat"]["Metric"])
        });
        if reads(p) || in_math {
            found.push(id.clone());
        }
    }
    found
}

#[test]
fn the_results_function_sends_webhooks_on_a_schedule_and_its_claims_outlast_its_timeout() {
    let t = template();
    let p = properties(&t, "ResultsFunction");
    let schedules: Vec<_> = p["Events"].as_object().unwrap().values().filter(|e| e["Type"] == "Schedule").collect();
    assert_eq!(schedules.len(), 1, "one schedule runs the delivery round without a batch");
    assert_eq!(schedules[0]["Properties"]["Schedule"], "rate(1 minute)");
    let timeout = std::time::Duration::from_secs(p["Timeout"].as_u64().unwrap());
    assert!(
        openqq_platform::lambda::LAMBDA_DELIVERY_LEASE > timeout,
        "a delivery claimed by an invocation that times out is not claimed again while it runs"
    );
    assert!(openqq_platform::lambda::DELIVERY_ROUND < timeout, "the round fits in the invocation");
}

// --- The scheduler ----------------------------------------------------------------------------

fn one_or_many(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    }
}

/// The queue an ARN names (`!GetAtt Queue.Arn`), checked to be a queue of the template.
fn queue_named_by<'a>(t: &'a Value, arn: &'a Value, at: &str) -> &'a str {
    assert_eq!(arn["Fn::GetAtt"][1], "Arn", "{at} names a queue of the template by its ARN: {arn}");
    let queue = arn["Fn::GetAtt"][0].as_str().unwrap();
    assert_eq!(resources(t)[queue]["Type"], "AWS::SQS::Queue", "{at}: {queue}");
    queue
}

#[test]
fn the_scheduler_runs_alone_once_a_minute_retries_a_minute_briefly_and_keeps_the_minutes_that_did_not_run() {
    use openqq_platform::lambda::{SCHEDULER_EVERY, SCHEDULER_MARGIN, SCHEDULER_WINDOW};
    use std::time::Duration;
    let t = template();
    let p = properties(&t, "SchedulerFunction");
    let events = p["Events"].as_object().unwrap();
    assert_eq!(events.len(), 1, "the scheduler is invoked by its rule and nothing else: {events:?}");
    let rule = events.values().next().unwrap();
    assert_eq!(rule["Type"], "Schedule", "an EventBridge rule");
    let rule = &rule["Properties"];
    assert_eq!(rule["Schedule"], "rate(1 minute)");
    // An invocation starts its last pass early enough to end it within its minute, before the
    // next minute's invocation, and its timeout does not cut the window short.
    let (minute, timeout) = (Duration::from_secs(60), Duration::from_secs(p["Timeout"].as_u64().unwrap()));
    assert!(SCHEDULER_WINDOW + SCHEDULER_MARGIN <= minute, "the last pass has time to end within the minute");
    assert!(SCHEDULER_WINDOW + SCHEDULER_MARGIN <= timeout, "the timeout leaves the whole window");
    assert!(SCHEDULER_EVERY < SCHEDULER_WINDOW, "several passes a minute");

    // EventBridge's side: delivering a minute's event is retried briefly (an older one is the
    // next minute's work), then the event goes to a queue of the template.
    let retry = &rule["RetryPolicy"];
    let age = retry["MaximumEventAgeInSeconds"].as_u64().expect("the rule's retry policy bounds an event's age");
    assert!((60..=120).contains(&age), "EventBridge takes 60 s or more; over two minutes is stale: {age}");
    let retries = retry["MaximumRetryAttempts"].as_u64().expect("the rule's retry policy bounds its attempts");
    assert!(retries <= 185, "EventBridge takes 0 to 185 retries, not {retries}");
    let queue = queue_named_by(&t, &rule["DeadLetterConfig"]["Arn"], "the rule's dead-letter config");
    // The queue's policy lets EventBridge send to it, from this rule only (named, so it can be).
    let mut values = sample_values();
    values.extend([("AWS::Partition", "aws"), ("AWS::Region", "eu-west-1"), ("AWS::AccountId", "123456789012")]);
    let name = resolve(&rule["Name"], &values).expect("the rule has a fixed name");
    let policy = resources(&t)
        .values()
        .find(|r| r["Type"] == "AWS::SQS::QueuePolicy" && r["Properties"]["Queues"] == json!([{"Ref": queue}]))
        .unwrap_or_else(|| panic!("a policy on {queue}"));
    let statements = policy["Properties"]["PolicyDocument"]["Statement"].as_array().unwrap();
    let from_rule =
        statements.iter().find(|s| s["Principal"]["Service"] == "events.amazonaws.com").expect("EventBridge");
    assert_eq!(from_rule["Action"], "sqs:SendMessage");
    let source = resolve(&from_rule["Condition"]["ArnEquals"]["aws:SourceArn"], &values).expect("a source condition");
    assert_eq!(source, format!("arn:aws:events:eu-west-1:123456789012:rule/{name}"), "only the scheduler's rule");

    // Lambda's side: a failed invocation is not run again and a throttled one not after the
    // same age; both go to the same queue, through the function's role.
    let invoke = &p["EventInvokeConfig"];
    assert_eq!(invoke["MaximumRetryAttempts"], 0, "a failed minute is not run again: the next minute's runs");
    let age = invoke["MaximumEventAgeInSeconds"].as_u64().expect("Lambda's retries bound an event's age");
    assert!((60..=120).contains(&age), "{age}");
    let failed = &invoke["DestinationConfig"]["OnFailure"];
    assert_eq!(failed["Type"], "SQS");
    assert_eq!(queue_named_by(&t, &failed["Destination"], "the invocations' on-failure destination"), queue);
    let alarmed = resources(&t).values().any(|r| {
        r["Type"] == "AWS::CloudWatch::Alarm"
            && r["Properties"]["Namespace"] == "AWS/SQS"
            && r["Properties"]["Dimensions"]
                == json!([{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}])
    });
    assert!(alarmed, "an alarm watches {queue} (its errors are watched as every function's)");

    // One runner at a time, from a parameter.
    assert_eq!(p["ReservedConcurrentExecutions"], json!({"Ref": "SchedulerReservedConcurrency"}));
    let parameter = &t["Parameters"]["SchedulerReservedConcurrency"];
    assert_eq!(parameter["Default"], 1, "one runner at a time");
    assert!(parameter["MinValue"].as_u64() >= Some(1), "at least 1, or no schedule fires");

    // What a fire does, and no more: it reads the due index, publishes its batch, and Lambda
    // sends what it gave up on as the function's role.
    let role = role_of(&t, "SchedulerFunction");
    let statements: Vec<&Value> = properties(&t, role)["Policies"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["PolicyDocument"]["Statement"].as_array().unwrap())
        .collect();
    let grants = |action: &str, resource: &Value| {
        statements.iter().any(|s| {
            one_or_many(&s["Action"]).contains(&json!(action)) && one_or_many(&s["Resource"]).contains(resource)
        })
    };
    assert!(grants("dynamodb:Query", &json!({"Fn::Sub": "${Table.Arn}/index/due"})), "the due schedules");
    assert!(grants("sqs:SendMessage", &json!({"Fn::GetAtt": [queue, "Arn"]})), "the invocations given up on");
    let writes = kafka_resources(&t, role, "kafka-cluster:WriteData", "topic");
    assert_eq!(writes, BTreeSet::from([EventKind::BatchSubmitted.as_str().to_owned()]), "a fire publishes its batch");
    assert!(kafka_resources(&t, role, "kafka-cluster:ReadData", "topic").is_empty(), "the scheduler reads no topic");
}
