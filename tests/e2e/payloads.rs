//! Large payloads by reference (issue 10): a netlist of a quarter of an HX8K (2.9 MB, as Yosys
//! writes it) goes through the whole pipeline inline, a 20 MB one through the upload flow, and
//! no record on any topic carries either: every record stays under 64 KB. Uploads refuse what
//! does not match their grant and store nothing then.

use openqq_adapters::{Durability, EmbeddedEventLog};
use openqq_core::{LogSource, Topics};
use openqq_e2e::{blink_design, sha256_hex, Client, Server};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Every record of every topic stays under this (the design's bound in `openqq_core::design`).
const RECORD_BOUND: usize = 64 * 1024;
/// Logic cells of a design filling a quarter of an HX8K (7,680 logic cells).
const QUARTER_HX8K_CELLS: usize = 1_938;
const PARTITIONS: &str = "4";

/// The real `blink` design (yosys for hx8k/ct256, its cell library included) grown by `cells`
/// logic cells to about `bytes` bytes of netlist: each logic cell a LUT feeding a flip-flop on
/// the design's clock, both copied from blink's own cells as yosys wrote them, with a net name
/// per net; the `src` attributes are lengthened to reach the size, as yosys writes long source
/// chains for a deep hierarchy.
fn grown_design(name: &str, cells: usize, bytes: usize) -> Value {
    let build = |pad: usize| {
        let mut design = blink_design(name);
        let top = design["netlist"]["modules"]["top"].as_object_mut().expect("blink's top module");
        let template = |kind: &str| -> Value {
            top["cells"].as_object().unwrap().values().find(|c| c["type"] == kind).expect("blink has the cell").clone()
        };
        let (lut, dff) = (template("SB_LUT4"), template("SB_DFF"));
        let clock = top["netnames"]["clk"]["bits"][0].clone();
        let src = |i: usize| format!("rtl/core/lane{}.v:{}.5-{}.9|{}", i % 64, i, i + 3, "h".repeat(pad));
        let mut new_cells = Map::new();
        let mut netnames = Map::new();
        let mut previous = top["netnames"]["btn"]["bits"][0].clone();
        for i in 0..cells {
            let (o, q) = (1_000_000 + 2 * i, 1_000_001 + 2 * i);
            let mut l = lut.clone();
            l["connections"] = json!({"I0": [previous], "I1": ["0"], "I2": ["0"], "I3": ["0"], "O": [o]});
            l["parameters"] = json!({"LUT_INIT": "0101010101010101"});
            l["attributes"] = json!({"src": src(i)});
            let mut f = dff.clone();
            f["connections"] = json!({"C": [clock], "D": [o], "Q": [q]});
            f["attributes"]["src"] = json!(src(i));
            new_cells.insert(format!("lane_lut_{i}"), l);
            new_cells.insert(format!("lane_q_SB_DFF_Q_{i}"), f);
            let net = |bit: usize| json!({"hide_name": 0, "bits": [bit], "attributes": {"src": src(i)}});
            netnames.insert(format!("lane_d[{i}]"), net(o));
            netnames.insert(format!("lane_q[{i}]"), net(q));
            previous = json!(q);
        }
        top["cells"].as_object_mut().unwrap().extend(new_cells);
        top["netnames"].as_object_mut().unwrap().extend(netnames);
        design
    };
    let size = |d: &Value| d["netlist"].to_string().len();
    let plain = size(&build(0));
    let design = build(bytes.saturating_sub(plain) / (4 * cells));
    let got = size(&design);
    assert!(got.abs_diff(bytes) < bytes / 50, "the netlist is {got} bytes, {bytes} wanted");
    design
}

/// The logic cells the report counts as used.
fn logic_cells_used(report: &Value) -> u64 {
    let rows = report["utilization"].as_array().unwrap_or_else(|| panic!("a utilisation table: {report}"));
    let row = rows.iter().find(|r| r["resource"] == "ICESTORM_LC").unwrap_or_else(|| panic!("an LC row: {report}"));
    row["used"].as_u64().unwrap()
}

/// Checks every record on every topic of the server's embedded log (after it stopped) against
/// [`RECORD_BOUND`]; returns how many records each topic has.
async fn every_record_is_small(dir: &std::path::Path) -> Vec<(String, usize)> {
    let log = EmbeddedEventLog::open(dir, PARTITIONS.parse().unwrap(), Durability::Process).unwrap();
    let mut counts = Vec::new();
    for topic in Topics::default().all() {
        let mut n = 0;
        for (partition, end) in log.end_offsets(&topic).await.unwrap().into_iter().enumerate() {
            let mut from = 0;
            while from < end {
                let batch = log.read(&topic, partition as u32, from, 100).await.unwrap();
                assert!(!batch.is_empty(), "{topic}-{partition} has records up to {end}");
                for record in &batch {
                    let size = record.value.len() + record.key.len();
                    assert!(size < RECORD_BOUND, "{topic}-{partition}@{}: {size} bytes", record.offset);
                    from = record.offset + 1;
                }
                n += batch.len();
            }
        }
        counts.push((topic, n));
    }
    counts
}

fn count(counts: &[(String, usize)], topic: &str) -> usize {
    counts.iter().find(|(t, _)| t == topic).map(|(_, n)| *n).unwrap_or_else(|| panic!("no topic {topic}"))
}

/// An HTTP client with time for tens of megabytes.
fn patient() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap()
}

/// Asks for an upload of `bytes`; answers the grant (200).
async fn grant(c: &Client, bytes: &[u8]) -> Value {
    let (status, grant) =
        c.post("/v1/uploads", &json!({"sha256": sha256_hex(bytes), "bytes": bytes.len()})).await.unwrap();
    assert_eq!(status, 200, "{grant}");
    grant
}

/// The token of a grant's upload URL.
fn token_of(grant: &Value) -> String {
    grant["upload"]["url"].as_str().unwrap().split_once("?token=").expect("a token in the URL").1.to_owned()
}

async fn put(url: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = patient().put(url).header("content-type", "application/octet-stream").body(body).send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

/// Uploads `body` exactly as `grant` says: its method, URL and headers.
async fn put_as_granted(grant: &Value, body: Vec<u8>) -> (u16, Value) {
    let upload = &grant["upload"];
    assert_eq!(upload["method"], "PUT", "{grant}");
    let mut req = patient().put(upload["url"].as_str().unwrap()).body(body);
    for (name, value) in upload["headers"].as_object().into_iter().flatten() {
        req = req.header(name.as_str(), value.as_str().unwrap());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarter_hx8k_netlist_inline_and_a_20_mb_one_uploaded_are_validated_with_every_record_under_64_kb() {
    big_netlists_inline_and_uploaded(&[], Uploads::ToTheApi).await;
}

/// The same on AWS's shape: the store on DynamoDB, the objects in S3, and the 20 MB netlist
/// uploaded straight to S3 through a presigned URL (moto, `OPENQQ_TEST_DYNAMODB_ENDPOINT`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_objects_in_s3_the_20_mb_netlist_goes_to_a_presigned_url_and_both_are_validated() {
    let Some(endpoint) = openqq_e2e::aws::endpoint("the S3 payloads test") else { return };
    let args = openqq_e2e::aws::on_aws(&endpoint, "payloads", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    big_netlists_inline_and_uploaded(&args, Uploads::To(endpoint.clone())).await;
}

/// Where a grant sends the upload.
enum Uploads {
    /// To the API itself (`PUT /v1/uploads/{digest}?token=…`).
    ToTheApi,
    /// To this S3 endpoint (a presigned URL).
    To(String),
}

/// A 2.9 MB netlist inline and a 20 MB one through the upload flow reach `ready` with the right
/// report, and no record on any topic is 64 KB or more.
async fn big_netlists_inline_and_uploaded(extra: &[&str], uploads: Uploads) {
    let dir = tempfile::tempdir().unwrap();
    // The byte limit leaves room for the inline body and the upload's weight when it is named.
    let mut args = vec!["--partitions", PARTITIONS, "--validation-budget", "120s", "--byte-limit", "32MiB/10s"];
    args.extend_from_slice(extra);
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let acme_patient = Client { http: patient(), ..acme.clone() };

    // Inline: 2.9 MB in the request body.
    let inline = grown_design("quarter", QUARTER_HX8K_CELLS, 2_900_000);
    let (status, accepted) = acme_patient.post("/v1/designs", &inline).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let inline_id = accepted["design_id"].as_str().unwrap().to_owned();

    // Uploaded: 20 MB of netlist, then a submission naming it.
    let big = grown_design("big", 7_000, 20_000_000);
    let netlist = big["netlist"].to_string().into_bytes();
    let granted = grant(&acme, &netlist).await;
    assert_eq!((&granted["present"], &granted["upload"]["method"]), (&json!(false), &json!("PUT")), "{granted}");
    let url = granted["upload"]["url"].as_str().unwrap();
    let to = match &uploads {
        Uploads::ToTheApi => &server.url,
        Uploads::To(endpoint) => endpoint,
    };
    assert!(url.starts_with(to.as_str()), "an absolute URL on {to}: {url}");
    let (status, stored) = put_as_granted(&granted, netlist).await;
    match uploads {
        Uploads::ToTheApi => assert_eq!((status, &stored), (201, &granted["object"])),
        Uploads::To(_) => assert_eq!(status, 200, "S3 took the upload: {stored}"),
    }
    let mut by_ref = big;
    by_ref.as_object_mut().unwrap().remove("netlist");
    by_ref["netlist_ref"] = granted["object"].clone();
    let (status, accepted) = acme.post("/v1/designs", &by_ref).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let uploaded_id = accepted["design_id"].as_str().unwrap().to_owned();

    for (id, cells) in [(&inline_id, QUARTER_HX8K_CELLS as u64), (&uploaded_id, 7_000)] {
        let done = |d: &Value| d["status"] == "ready" || d["status"] == "failed";
        let design = acme.wait_for(id, Duration::from_secs(240), done).await.unwrap();
        assert_eq!((design["status"].as_str(), design["verdict"].as_str()), (Some("ready"), Some("pass")), "{design}");
        let (status, report) = acme_patient.get(&format!("/v1/designs/{id}/report")).await.unwrap();
        assert_eq!(status, 200, "{report}");
        let used = logic_cells_used(&report);
        assert!(used >= cells && used < cells + 20, "{used} logic cells used for {cells} added to blink");
    }

    server.terminate().unwrap();
    let counts = every_record_is_small(dir.path()).await;
    assert_eq!(count(&counts, "design.submitted"), 2, "{counts:?}");
    assert_eq!(count(&counts, "results.ready"), 2, "{counts:?}");
    assert_eq!(count(&counts, "dead-letter"), 0, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_does_not_match_its_grant_is_refused_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let globex = Client::new(&server.url, &server.token("globex"));
    let netlist = blink_design("n")["netlist"].to_string().into_bytes();
    let granted = grant(&acme, &netlist).await;
    let url = granted["upload"]["url"].as_str().unwrap().to_owned();

    // The same length with other bytes, more bytes, fewer bytes.
    let mut other = netlist.clone();
    other[10] ^= 1;
    let (status, problem) = put(&url, other).await;
    assert_eq!((status, problem["type"].as_str()), (400, Some("urn:openqq:problem:upload-mismatch")), "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("SHA-256"), "{problem}");
    let mut longer = netlist.clone();
    longer.push(b' ');
    assert_eq!(put(&url, longer).await.0, 413);
    assert_eq!(put(&url, netlist[..netlist.len() - 1].to_vec()).await.0, 400);

    // A token tampered with, none, one for another object, one from another server, one expired.
    let (head, token) = url.split_once("?token=").unwrap();
    let mut forged = token.as_bytes().to_vec();
    let at = token.find('.').unwrap() + 5;
    forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    let elsewhere = {
        let dir = tempfile::tempdir().unwrap();
        let other = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
        token_of(&grant(&Client::new(&other.url, &other.token("acme")), &netlist).await)
    };
    let another_object = token_of(&grant(&acme, b"{}").await);
    for (what, url) in [
        ("forged", format!("{head}?token={forged}")),
        ("missing", head.to_owned()),
        ("for another object", format!("{head}?token={another_object}")),
        ("from another server", format!("{head}?token={elsewhere}")),
        ("a bearer token", format!("{head}?token={}", server.token("acme"))),
    ] {
        let (status, problem) = put(&url, netlist.clone()).await;
        assert_eq!(status, 403, "{what}: {problem}");
        assert_eq!(problem["type"], "urn:openqq:problem:upload-not-authorized", "{what}");
    }

    // Nothing was stored: a submission naming the object is refused.
    let mut design = blink_design("refs");
    design.as_object_mut().unwrap().remove("netlist");
    design["netlist_ref"] = granted["object"].clone();
    let (status, problem) = acme.post("/v1/designs", &design).await.unwrap();
    assert_eq!((status, problem["field"].as_str()), (404, Some("netlist_ref")), "{problem}");
    assert_eq!(problem["type"], "urn:openqq:problem:upload-not-found");

    // Stored for acme, it is acme's only: globex can neither name it nor see it as present.
    assert_eq!(put(&url, netlist.clone()).await.0, 201);
    let (status, accepted) = acme.post("/v1/designs", &design).await.unwrap();
    assert_eq!(status, 202, "{accepted}");
    let (status, problem) = globex.post("/v1/designs", &design).await.unwrap();
    assert_eq!((status, problem["field"].as_str()), (404, Some("netlist_ref")), "{problem}");
    assert_eq!(problem["type"], "urn:openqq:problem:upload-not-found");
    assert_eq!(grant(&globex, &netlist).await["present"], false);
    assert_eq!(grant(&acme, &netlist).await["present"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_request_over_64_mib_or_with_a_malformed_digest_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let digest = sha256_hex(b"x");
    let (status, problem) =
        acme.post("/v1/uploads", &json!({"sha256": digest, "bytes": (64 << 20) + 1})).await.unwrap();
    assert_eq!(status, 413, "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("67108864"), "{problem}");
    let (status, problem) = acme.post("/v1/uploads", &json!({"sha256": "not-hex", "bytes": 10})).await.unwrap();
    assert_eq!((status, problem["field"].as_str()), (422, Some("sha256")), "{problem}");
    let (status, problem) = acme.post("/v1/uploads", &json!({"sha256": digest, "bytes": -1})).await.unwrap();
    assert_eq!((status, problem["field"].as_str()), (422, Some("bytes")), "{problem}");
    let anonymous = Client::new(&server.url, "not-a-token");
    assert_eq!(anonymous.post("/v1/uploads", &json!({"sha256": digest, "bytes": 1})).await.unwrap().0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_netlist_object_that_is_missing_or_does_not_match_fails_its_revision_at_once_with_the_reason() {
    use openqq_core::event::Origin;
    use openqq_core::{CorrelationId, DesignId, Envelope, EventKind, EventLog, TenantId};

    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "127.0.0.1:0", &["--partitions", PARTITIONS]).unwrap();
    server.terminate().unwrap();
    // Two submissions naming netlist objects, written to the log while the server is down (the
    // embedded log has one writer at a time): one nobody stored, one whose stored bytes were
    // changed afterwards (the file's name is its digest in the embedded object store).
    let netlist = blink_design("n")["netlist"].to_string().into_bytes();
    let stored = sha256_hex(&netlist);
    let tenant_dir = dir.path().join("objects").join("acme");
    std::fs::create_dir_all(&tenant_dir).unwrap();
    let mut changed = netlist.clone();
    changed[20] ^= 1;
    std::fs::write(tenant_dir.join(&stored), &changed).unwrap();
    let missing = sha256_hex(b"never uploaded");
    let mut designs = Vec::new();
    let log = EmbeddedEventLog::open(dir.path(), PARTITIONS.parse().unwrap(), Durability::Process).unwrap();
    for digest in [&missing, &stored] {
        let design = DesignId::generate();
        let cause = Origin {
            tenant_id: TenantId::parse("acme").unwrap(),
            design_id: design.clone(),
            revision: 1,
            correlation_id: CorrelationId::parse(format!("corr-{}", &digest[..8])).unwrap(),
            batch: None,
        };
        let mut spec = blink_design("by-ref");
        spec.as_object_mut().unwrap().remove("netlist");
        spec["netlist_ref"] = json!({"digest": digest, "bytes": netlist.len()});
        let env = Envelope::new(EventKind::DesignSubmitted, &cause, "api", json!({ "spec": spec }));
        log.publish(&Topics::default().of(EventKind::DesignSubmitted), vec![env.to_record()]).await.unwrap();
        designs.push(design);
    }
    drop(log);
    server.restart().unwrap();

    let acme = Client::new(&server.url, &server.token("acme"));
    for (design, why) in designs.iter().zip(["is not in the object store", "could not be read"]) {
        let view = acme.wait_for(design.as_str(), Duration::from_secs(30), |d| d["status"] == "failed").await.unwrap();
        let reason = view["failure_reason"].as_str().expect("the reason is shown");
        assert!(reason.contains("netlist") && reason.contains(why), "{reason}");
    }
    let metrics = reqwest::get(server.metrics()).await.unwrap().text().await.unwrap();
    let dead = openqq_e2e::counter_sum(&metrics, "openqq_dead_letters_total", &["function=\"validation\""]);
    assert_eq!(dead, 2.0, "each dead-lettered once, never retried in a loop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_counts_among_the_tenants_requests_in_progress_and_against_its_storage_quota() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--tenant-concurrency", "1", "--tenant-storage", "300KiB"];
    let server = Server::start(dir.path(), "127.0.0.1:0", &args).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let netlist = blink_design("n")["netlist"].to_string().into_bytes();
    let url = grant(&acme, &netlist).await["upload"]["url"].as_str().unwrap().to_owned();

    // An upload whose body is still arriving holds the tenant's one request in progress.
    let addr = openqq_e2e::slow_client::addr(&server.url);
    let path = url.trim_start_matches(&server.url).to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!("PUT {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\n\r\n", netlist.len());
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&netlist[..100]).await.unwrap();
    let refused = async {
        for _ in 0..100 {
            let (status, problem) = put(&url, netlist.clone()).await;
            if status == 429 {
                return problem;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("a second request in progress was never refused");
    };
    let problem = refused.await;
    assert_eq!(problem["type"], "urn:openqq:problem:too-many-in-flight", "{problem}");
    slow.write_all(&netlist[100..]).await.unwrap();
    let mut answer = vec![0; 12];
    tokio::io::AsyncReadExt::read_exact(&mut slow, &mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 201", "the slow upload itself completes");

    // 300 KiB of storage: the 200 KB netlist fits once, another as large does not.
    let mut other = netlist.clone();
    other.extend_from_slice(b"  ");
    let (status, problem) =
        acme.post("/v1/uploads", &json!({"sha256": sha256_hex(&other), "bytes": other.len()})).await.unwrap();
    assert_eq!(
        (status, problem["type"].as_str()),
        (403, Some("urn:openqq:problem:storage-quota-exceeded")),
        "{problem}"
    );
}
