//! Disk full as a fault of its own: the data dir on a small tmpfs that the test fills. While no
//! space is left, submissions are refused with 503 `storage-unavailable` (nothing acknowledged
//! that was not kept), the platform keeps answering, and once space returns it accepts again by
//! itself; every acknowledged design reaches `ready` and every SQLite file passes its integrity
//! check. Mounting a tmpfs needs root (as in CI); elsewhere the test says it was skipped.

use openqq_e2e::disk::{fill, Tmpfs};
use openqq_e2e::{blink_design, compact_blink_design, Client, Server};
use std::time::{Duration, Instant};

/// Posts `design` and says what the client was told: the design id on 202, the problem's type
/// on 503 (with its `Retry-After`, which must be there).
async fn submit(c: &Client, design: &serde_json::Value) -> Result<String, String> {
    let resp = c.http.post(format!("{}/v1/designs", c.base)).bearer_auth(&c.token).json(design).send().await.unwrap();
    let status = resp.status().as_u16();
    let retry_after = resp.headers().get("retry-after").is_some();
    let body: serde_json::Value = resp.json().await.unwrap_or_default();
    match status {
        202 => Ok(body["design_id"].as_str().unwrap().to_owned()),
        503 => {
            assert!(retry_after, "a 503 says when to retry: {body}");
            Err(body["type"].as_str().unwrap_or_default().to_owned())
        }
        s => panic!("a submission on a full disk was answered {s}: {body}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_data_dirs_file_system_full_submissions_get_503_and_all_recovers_when_space_returns() {
    let Some(tmpfs) = Tmpfs::mount("48m") else {
        eprintln!("skipped: mounting a tmpfs for the data dir needs root");
        return;
    };
    let mut server = Server::start(&tmpfs.path, "127.0.0.1:0", &[]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    // Designs still on their way when the disk fills: their functions' writes fail and are
    // retried until space returns.
    let mut acknowledged = Vec::new();
    for i in 0..8 {
        acknowledged
            .push(submit(&acme, &compact_blink_design(&format!("before-{i}"))).await.expect("accepted with room"));
    }

    // A design whose report (a finding per bit of a 20,000-bit port) is kept as an object once
    // validated: the disk fills while it is being validated, so keeping its report fails.
    let wide = openqq_e2e::noisy::wide_port_design("wide", 20_000);
    let wide = submit(&acme, &wide).await.expect("accepted with room");
    let filler = tmpfs.path.join("filler");
    let filled = fill(&filler).expect("the filler stops at a full file system");
    // Large designs put their netlist in the object store, small ones only write SQLite: both
    // must be refused cleanly, and whatever was acknowledged must have been kept.
    let (large, small) = (blink_design("large"), compact_blink_design("small"));
    let mut refused = std::collections::BTreeMap::<String, usize>::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut small_refused = false;
    while !small_refused {
        assert!(Instant::now() < deadline, "no small submission was refused on a full disk: {refused:?}");
        for (design, is_small) in [(&large, false), (&small, true)] {
            match submit(&acme, design).await {
                Ok(id) => acknowledged.push(id),
                Err(kind) => {
                    small_refused |= is_small;
                    *refused.entry(kind).or_default() += 1;
                }
            }
        }
    }
    assert_eq!(
        refused.keys().collect::<Vec<_>>(),
        ["urn:openqq:problem:storage-unavailable"],
        "a full disk is said as such: {refused:?}"
    );
    let (status, _) = acme.get("/v1/designs").await.unwrap();
    assert_eq!(status, 200, "reads go on while the disk is full");

    // The functions work on what was acknowledged while the disk stays full; what cannot be
    // written is retried.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let metrics = reqwest::get(server.metrics()).await.unwrap().text().await.unwrap();
    let failed_batches = openqq_e2e::counter_sum(&metrics, "openqq_batches_total", &["outcome=\"failed\""]);

    std::fs::remove_file(&filler).unwrap();
    let back = Instant::now();
    let after = loop {
        match submit(&acme, &compact_blink_design("after")).await {
            Ok(id) => break id,
            Err(_) => {
                assert!(back.elapsed() < Duration::from_secs(60), "submissions are accepted once space returns");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    acknowledged.push(after);
    acme.wait_for(&wide, Duration::from_secs(120), |d| d["status"] == "ready")
        .await
        .expect("the design whose report could not be kept while the disk was full is ready once it could");
    assert!(failed_batches >= 1.0, "keeping the wide design's report failed on the full disk and was retried");
    for id in &acknowledged {
        acme.wait_for(id, Duration::from_secs(120), |d| d["status"] == "ready")
            .await
            .unwrap_or_else(|e| panic!("acknowledged design {id} reaches ready after the disk was full: {e:#}"));
    }
    eprintln!(
        "filled {} MiB; {} designs acknowledged; refused while full: {refused:?}; {} consumer batches \
         failed and were retried while full; accepting again {:?} after space returned",
        filled >> 20,
        acknowledged.len(),
        failed_batches as u64,
        back.elapsed()
    );

    assert!(server.terminate().unwrap().success(), "a clean stop after the disk was full");
    for entry in std::fs::read_dir(&tmpfs.path).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "db") {
            let conn = rusqlite::Connection::open(&path).unwrap();
            let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
            assert_eq!(check, "ok", "{} is whole", path.display());
        }
    }
}
