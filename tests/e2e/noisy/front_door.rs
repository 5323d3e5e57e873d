//! Attacks on the front door itself, measured as the rest of the suite measures: victims first
//! without the attack, then beside it, on the same server in the same run, each within
//! [`allowed_under_attack`] of its own baseline.

use super::{victims_keep_their_latency, ROUNDS, WITHIN};
use openqq_e2e::noisy::{allowed_under_attack, worst_latency, worst_upload, Arena};
use openqq_e2e::slow_client::{answer, open_chunked_put, response};
use openqq_e2e::Client;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const VICTIMS: usize = 3;

/// Grants of `n` uploads of 64 MiB, the largest, each of another object; their upload URLs.
async fn largest_grants(c: &Client, n: usize) -> Vec<String> {
    let mut urls = Vec::new();
    for i in 0..n {
        let digest = format!("{:064x}", 0xa77ac4_u64 * 1000 + i as u64);
        let (status, grant) = c.post("/v1/uploads", &json!({"sha256": digest, "bytes": 64 << 20})).await.unwrap();
        assert_eq!(status, 200, "{grant}");
        urls.push(grant["upload"]["url"].as_str().unwrap().to_owned());
    }
    urls
}

/// Issue 29's second attack: eight upload `PUT`s of 64 MiB (the tenant's whole concurrency)
/// that never send a byte once held the whole upload memory for minutes, and every other
/// tenant's upload got 503. Now memory is taken only as bytes arrive, a tenant's uploads may
/// declare a quarter of it, and a `PUT` is cut off when its first byte does not come or when it
/// falls behind the minimum rate. Half the attacker's `PUT`s send nothing, half one byte a
/// second; it opens them again as soon as they are refused or cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_puts_that_send_nothing_or_a_byte_a_second_leave_another_tenants_1_kib_upload_unharmed() {
    let arena = Arena::start(VICTIMS, &["--upload-first-byte-timeout", "2s"]);
    let pause = Duration::from_millis(500);
    let baseline = worst_upload(&arena.victims, 1024, 3, pause).await.expect("victims upload without the attack");

    let urls = largest_grants(&arena.attacker, 8).await;
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(Mutex::new(Vec::new()));
    let attack: Vec<_> = urls
        .into_iter()
        .enumerate()
        .map(|(i, url)| {
            let (stop, answers) = (stop.clone(), answers.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let mut put = open_chunked_put(&url).await;
                    let mut answered = None;
                    while answered.is_none() && !stop.load(Ordering::SeqCst) {
                        if i % 2 == 1 {
                            // One byte as a chunk of its own.
                            let _ = put.write_all(b"1\r\nx\r\n").await;
                        }
                        answered = answer(&mut put, Duration::from_secs(1)).await;
                    }
                    answers.lock().unwrap().extend(answered.map(|(status, body)| {
                        let problem: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                        (status, problem["type"].as_str().unwrap_or_default().to_owned())
                    }));
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Long enough for the silent PUTs (2 s) and the slow ones (5 s of start, then behind) to be
    // cut off and opened again.
    let under_attack = worst_upload(&arena.victims, 1024, 12, pause).await;
    stop.store(true, Ordering::SeqCst);
    for a in attack {
        let _ = a.await;
    }
    let under_attack = under_attack.expect("victims upload beside the attack");
    eprintln!("victims' 1 KiB uploads: {baseline:?} without the attack, {under_attack:?} with it");
    assert!(
        under_attack <= allowed_under_attack(baseline),
        "victims' uploads took {under_attack:?} beside the attack against {baseline:?} without"
    );
    let answers = answers.lock().unwrap().clone();
    let seen = |status: u16, kind: &str| answers.iter().any(|(s, t)| *s == status && t.ends_with(kind));
    assert!(seen(429, ":upload-share-exceeded"), "PUTs past the tenant's share are refused: {answers:?}");
    assert!(seen(408, ":upload-too-slow"), "PUTs too slow to send are cut off: {answers:?}");
    assert!(answers.iter().all(|(s, _)| [408, 429].contains(s)), "nothing else answered the attacker: {answers:?}");
}

/// `c` connecting from `local` (another loopback address than the attacker's 127.0.0.1).
fn from_address(c: &Client, local: &str) -> Client {
    let http = reqwest::Client::builder().local_address(local.parse::<std::net::IpAddr>().unwrap()).build().unwrap();
    Client { http, ..c.clone() }
}

/// What the attacker's connections came to.
#[derive(Debug, Default)]
struct Held {
    /// Connections refused at once because the address held its most (429 `too-many-connections`).
    refused: usize,
    /// Connections the server ended past their lifetime (an answer with `Connection: close`).
    ended: usize,
}

/// Issue 29's third attack: keep-alive connections without a token re-sending `GET /healthz`
/// (each restarting the header timeout) once held all 1,024 connections, and authenticated
/// tenants got 503. Now one address holds at most its share of the ceiling, and a connection
/// past its lifetime is closed. The attacker opens twice its address's maximum from 127.0.0.1
/// and opens each again as soon as it is refused or closed; the victims, on the attacker's
/// partition, connect from 127.0.0.2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holding_its_most_connections_with_healthz_loops_slows_no_tenant_at_another_address() {
    let max = 32;
    // A ceiling the attacker alone would fill, were its address not held to its share of it.
    let args = ["--max-connections", "48", "--max-connections-per-address", "32", "--connection-lifetime", "1s"];
    let arena = Arena::start(VICTIMS, &args);
    let victims: Vec<Client> = arena.victims.iter().map(|c| from_address(c, "127.0.0.2")).collect();
    let baseline = worst_latency(&victims, ROUNDS, WITHIN).await.expect("victims reach ready without the attack");

    let addr = openqq_e2e::slow_client::addr(&arena.server.url);
    let stop = Arc::new(AtomicBool::new(false));
    let held = Arc::new(Mutex::new(Held::default()));
    let attack: Vec<_> = (0..2 * max)
        .map(|_| {
            let (addr, stop, held) = (addr.clone(), stop.clone(), held.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(mut conn) = tokio::net::TcpStream::connect(&addr).await else { continue };
                    while !stop.load(Ordering::SeqCst) {
                        let _ = conn.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
                        match response(&mut conn, Duration::from_secs(2)).await {
                            Some((429, _, body)) if body.contains("too-many-connections") => {
                                held.lock().unwrap().refused += 1;
                                tokio::time::sleep(Duration::from_millis(200)).await;
                                break;
                            }
                            Some((200, head, _)) if head.contains("connection: close") => {
                                held.lock().unwrap().ended += 1;
                                break;
                            }
                            Some((200, _, _)) => tokio::time::sleep(Duration::from_millis(500)).await,
                            _ => break,
                        }
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let under_attack = worst_latency(&victims, ROUNDS, WITHIN).await;
    // While the attack runs, its address gets no more than its maximum.
    let mut extra = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let extra = response(&mut extra, Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    for a in attack {
        let _ = a.await;
    }
    let under_attack = under_attack.expect("victims reach ready beside the attack");
    eprintln!(
        "victims: {baseline:?} without the attack, {under_attack:?} with it; attacker: {:?}",
        held.lock().unwrap()
    );
    assert!(
        under_attack <= allowed_under_attack(baseline),
        "victims took {under_attack:?} beside the attack against {baseline:?} without"
    );
    assert!(matches!(extra, Some((429, _, _))), "the attacker's address is at its maximum: {extra:?}");
    let held = held.lock().unwrap();
    assert!(held.refused > 0, "connections past the address's maximum were refused: {held:?}");
    assert!(held.ended > 0, "connections past their lifetime were closed: {held:?}");
}

/// Issue 29's fifth finding: `/metrics` needed no token and listed tenant ids with their request
/// counts. A caller without a token reads it from the API's address over and over while the
/// victims submit: it learns no tenant id (the API's listener answers 404; metrics are on their
/// own listener), and the victims keep their latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_metrics_from_the_api_without_a_token_learns_no_tenant_id_and_slows_no_victim() {
    let arena = Arena::start(VICTIMS, &[]);
    let url = format!("{}/metrics", arena.server.url);
    let seen = Arc::new(Mutex::new(Vec::<(u16, String)>::new()));
    let recorded = seen.clone();
    victims_keep_their_latency(&arena, move |_, stop| async move {
        let http = reqwest::Client::new();
        while !stop.load(Ordering::SeqCst) {
            if let Ok(resp) = http.get(&url).send().await {
                let status = resp.status().as_u16();
                let body = resp.text().await.unwrap_or_default();
                recorded.lock().unwrap().push((status, body));
            }
        }
        Vec::new()
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "the attacker read the API's /metrics");
    for (status, body) in seen.iter() {
        assert_eq!(*status, 404, "{body}");
        assert!(!body.contains("victim-") && !body.contains("tenant="), "a tenant id reached the caller: {body}");
    }
    let scraped = arena.server.scrape().await;
    assert!(scraped.contains("tenant=\"victim-"), "the metrics listener still counts the victims by tenant");
}
