//! Signed webhooks: a tenant's endpoint (a small HTTP receiver in the test) gets its result,
//! signed with its own secret; another tenant's endpoint gets nothing of it.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use openqq_e2e::{blink_design, Client, Server};
use sha2::Sha256;
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const KEY_B64: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One received request: lower-cased headers and the body.
type Received = (HashMap<String, String>, Vec<u8>);

/// Accepts HTTP/1.1 POSTs, answers 204, and forwards each request.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head_end, length) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map(|v| v.trim().parse().unwrap())
                            .unwrap_or(0);
                        break (i + 4, len);
                    }
                };
                while buf.len() < head_end + length {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let headers = head
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
                    .collect();
                let _ = sock.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n").await;
                let _ = tx.send((headers, buf[head_end..head_end + length].to_vec()));
            });
        }
    });
    (url, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_endpoint_receives_its_signed_result_and_only_its_own() {
    let (acme_url, mut acme_hooks) = receiver().await;
    let (globex_url, mut globex_hooks) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("webhooks.txt");
    std::fs::write(&file, format!("acme {acme_url} whsec_{KEY_B64}\nglobex {globex_url} whsec_{KEY_B64}\n")).unwrap();
    let server = Server::start(dir.path(), "127.0.0.1:0", &["--webhooks", file.to_str().unwrap()]).unwrap();
    let acme = Client::new(&server.url, &server.token("acme"));
    let (_, accepted) = acme.post("/v1/designs", &blink_design("hooked")).await.unwrap();
    let id = accepted["design_id"].as_str().unwrap();

    let (headers, body) =
        tokio::time::timeout(Duration::from_secs(20), acme_hooks.recv()).await.expect("the webhook arrives").unwrap();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((json["type"].as_str(), json["data"]["design_id"].as_str()), (Some("results.ready"), Some(id)));
    assert_eq!(json["data"]["verdict"], "pass");
    let msg_id = &headers["webhook-id"];
    assert_eq!(msg_id, json["data"]["event_id"].as_str().unwrap(), "the id is the event id, stable across retries");
    let mut mac = Hmac::<Sha256>::new_from_slice(&B64.decode(KEY_B64).unwrap()).unwrap();
    mac.update(format!("{msg_id}.{}.", headers["webhook-timestamp"]).as_bytes());
    mac.update(&body);
    let expected = format!("v1,{}", B64.encode(mac.finalize().into_bytes()));
    assert_eq!(headers["webhook-signature"], expected, "signed with the tenant's secret over id.timestamp.body");

    assert!(
        tokio::time::timeout(Duration::from_millis(800), globex_hooks.recv()).await.is_err(),
        "globex's endpoint hears nothing of acme"
    );
}
