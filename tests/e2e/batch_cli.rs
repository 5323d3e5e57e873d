//! `openqq batch` through the real binary against `openqq up`: a JSON-lines file submitted and
//! followed to its end (`--wait`: progress, then a summary naming each rejected item), read back
//! with `status`, `items` and `cancel`; a refused batch's items listed with their lines; and a
//! file over the API's body limit sent as an upload.

use openqq_e2e::{compact_blink_design, openqq_bin, stdout_of, Client, Server};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `n` compact blink designs as JSON lines, the custom id `{prefix}-{i}` each; item 1's pin
/// constraints name a pin the package lacks, so it ends `ready` with verdict `fail`.
pub(crate) fn lines(prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let mut item = compact_blink_design(&format!("{prefix}-{i}"));
            item["custom_id"] = json!(format!("{prefix}-{i}"));
            if i == 1 {
                item["constraints"]["text"] = json!("set_io clk Z99\n");
            }
            item.to_string()
        })
        .collect()
}

pub(crate) fn write(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// `openqq batch ARGS` against `server` with `token`.
fn batch(server: &Server, token: &str, args: &[&str]) -> Output {
    Command::new(openqq_bin())
        .arg("batch")
        .args(args)
        .args(["--url", &server.url])
        .env("OPENQQ_TOKEN", token)
        .env_remove("OPENQQ_MAX_BODY_BYTES")
        .output()
        .expect("openqq batch runs")
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The batch id a `submit` printed: `Batch ID accepted: …`.
fn accepted_id(stdout: &str) -> String {
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("Batch ") && first.contains(" accepted: "), "{stdout}");
    first.split_whitespace().nth(1).unwrap().to_owned()
}

#[test]
fn submit_wait_follows_a_batch_to_its_end_and_summarises_it_naming_each_rejected_item() {
    let files = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--batch-in-flight", "4"]).unwrap();
    let token = server.token("acme");
    let mut items = lines("nightly", 12);
    items.insert(5, String::new()); // a blank line is not an item
    items.push(json!({"custom_id": "no-target", "name": "x"}).to_string());
    items.push("not json".to_owned());
    let file = write(files.path(), "nightly.jsonl", &items);
    let file = file.to_str().unwrap();

    let out = batch(&server, &token, &["submit", file, "--on-invalid", "skip", "--max-failed", "50%", "--wait"]);
    let text = stdout_of(&out);
    let id = accepted_id(&text);
    assert!(text.starts_with(&format!("Batch {id} accepted: 14 items, 2 rejected as invalid.\n")), "{text}");
    let progress = stderr_of(&out);
    assert!(progress.lines().last().unwrap_or_default().starts_with("nightly: 14/14 items (100%) · "), "{progress}");
    assert!(text.contains(&format!("Batch nightly ({id}): completed in ")), "{text}");
    for line in [
        "  ready       12\n",
        "  rejected    2\n",
        "  total       14\n",
        "Verdicts: 11 pass, 1 fail\n",
        "Failed or rejected items (2):\n",
        "  12     no-target  rejected  missing field `target`\n",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    assert!(text.contains("  13     —          rejected  is not a JSON object"), "{text}");

    // What the CLI says is what the API says.
    let api = Client::new(&server.url, &token);
    let json: Value = serde_json::from_str(&stdout_of(&batch(&server, &token, &["status", &id, "--json"]))).unwrap();
    let read = tokio::runtime::Runtime::new().unwrap().block_on(api.get(&format!("/v1/batches/{id}"))).unwrap();
    assert_eq!((read.0, &json), (200, &read.1));
    assert_eq!(json["counts"]["ready"], 12);
    let table = stdout_of(&batch(&server, &token, &["status", &id]));
    assert!(table.starts_with(&format!("Batch nightly ({id}): completed\nCreated ")), "{table}");

    let all = stdout_of(&batch(&server, &token, &["items", &id]));
    let rows: Vec<&str> = all.lines().collect();
    assert_eq!(
        rows[0].split_whitespace().collect::<Vec<_>>(),
        ["INDEX", "CUSTOM_ID", "DESIGN_ID", "STATUS", "VERDICT", "REASON"]
    );
    assert_eq!(rows.len(), 15, "a row per item:\n{all}");
    let second: Vec<&str> = rows[2].split_whitespace().collect();
    assert_eq!((second[0], second[1], second[3], second[4]), ("1", "nightly-1", "ready", "fail"), "{all}");
    let rejected = stdout_of(&batch(&server, &token, &["items", &id, "--status", "rejected"]));
    assert_eq!(rejected.lines().count(), 3, "{rejected}");
    let lines_out = stdout_of(&batch(&server, &token, &["items", &id, "--status", "ready", "--json"]));
    let ready: Vec<Value> = lines_out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(ready.len(), 12);
    assert!(ready.iter().all(|i| i["status"] == "ready" && i["design_id"].is_string()));

    // An ended batch has nothing to cancel and stays as it ended.
    let cancelled = stdout_of(&batch(&server, &token, &["cancel", &id]));
    assert!(cancelled.contains(&format!("Batch {id} has ended (completed): nothing to cancel.")), "{cancelled}");
    // Another tenant's batch is as unknown as one that never was.
    let other = batch(&server, &server.token("globex"), &["status", &id]);
    assert!(!other.status.success());
    assert!(
        stderr_of(&other).contains(&format!("batch {id} was not found for this token's tenant")),
        "{}",
        stderr_of(&other)
    );
}

#[test]
fn a_refused_batch_lists_each_refused_item_with_its_line_and_a_file_over_the_body_limit_goes_as_an_upload() {
    let files = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--max-body-bytes", "65536"]).unwrap();
    let token = server.token("acme");

    let mut items = lines("refused", 2);
    items.insert(1, "{\"custom_id\": \"broken\", \"name\": \"x\", \"target\": 42}".to_owned());
    items.push(String::new());
    items.push("[1, 2]".to_owned());
    let file = write(files.path(), "refused.jsonl", &items);
    let out = batch(&server, &token, &["submit", file.to_str().unwrap(), "--wait"]);
    assert_eq!(out.status.code(), Some(1), "a refused batch exits 1");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "nothing is said to be accepted");
    let said = stderr_of(&out);
    assert!(said.starts_with("The batch was refused: 2 of 4 items are invalid"), "{said}");
    assert!(said.contains("  INDEX  LINE  CUSTOM_ID  REASON\n"), "{said}");
    assert!(said.contains("  1      2     broken     invalid type: integer `42`"), "{said}");
    assert!(said.contains("  3      5     —          is not a JSON object"), "{said}");
    assert!(said.contains("error: the batch in ") && said.contains("refused.jsonl was refused"), "{said}");

    // 16 items of about 6 KB: over the 64 KiB this API takes in a body, so they go as an upload.
    let big = lines("big", 16);
    assert!(big.iter().map(|l| l.len() + 1).sum::<usize>() > 65536);
    let file = write(files.path(), "big.jsonl", &big);
    let out = batch(&server, &token, &["submit", file.to_str().unwrap(), "--name", "large", "--wait"]);
    let text = stdout_of(&out);
    let id = accepted_id(&text);
    assert!(text.contains(&format!("Batch large ({id}): completed in ")), "{text}");
    assert!(text.contains("  ready       16\n") && text.contains("No item failed or was rejected.\n"), "{text}");
    // Only the uploaded batch exists: the refused one left nothing.
    let api = Client::new(&server.url, &token);
    let (status, listed) = tokio::runtime::Runtime::new().unwrap().block_on(api.get("/v1/batches")).unwrap();
    assert_eq!(status, 200);
    let names: Vec<&str> = listed["batches"].as_array().unwrap().iter().filter_map(|b| b["name"].as_str()).collect();
    assert_eq!(names, ["large"]);
}
