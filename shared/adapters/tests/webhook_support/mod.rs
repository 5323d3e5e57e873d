//! Webhook receivers for the webhook tests: HTTP/1.1 servers on 127.0.0.1 that report every
//! request they get and answer as the test says, and the Standard Webhooks check a receiver
//! makes.

#![allow(dead_code)]

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Requests a receiver reads at most (a delivery is a few hundred bytes).
const MAX_REQUEST: usize = 64 * 1024;

/// One request as a receiver got it.
#[derive(Debug, Clone)]
pub struct Received {
    /// Header names lower-cased.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or_default()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a delivery's body is JSON")
    }
}

/// How a receiver answers its `n`th request (from 0).
#[derive(Debug, Clone)]
pub enum Answer {
    Status(u16),
    /// `302 Found` to `location`.
    Redirect(String),
    /// Never answers (the connection stays open).
    Hang,
    /// Answers `status` after `after`.
    Late {
        after: Duration,
        status: u16,
    },
    /// `200 OK` with a chunked body that never ends.
    Endless,
}

pub struct Receiver {
    pub url: String,
    pub received: mpsc::UnboundedReceiver<Received>,
    /// Requests taken so far.
    pub count: Arc<AtomicUsize>,
}

impl Receiver {
    /// The next request, waiting at most `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Received> {
        tokio::time::timeout(within, self.received.recv()).await.ok().flatten()
    }

    pub fn taken(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// A receiver at `http://127.0.0.1:<port>/hooks` answering its `n`th request with `answer(n)`.
pub async fn receiver(answer: impl Fn(usize) -> Answer + Send + Sync + 'static) -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    let (report, received) = mpsc::unbounded_channel();
    let count = Arc::new(AtomicUsize::new(0));
    let (answer, counter) = (Arc::new(answer), count.clone());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (answer, counter, report) = (answer.clone(), counter.clone(), report.clone());
            tokio::spawn(async move {
                while let Some((headers, body)) = read_request(&mut stream).await {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    let _ = report.send(Received { headers, body, at: Instant::now() });
                    if !respond(&mut stream, answer(n)).await {
                        return;
                    }
                }
            });
        }
    });
    Receiver { url, received, count }
}

/// Answers one request; whether the connection can take another.
async fn respond(stream: &mut TcpStream, answer: Answer) -> bool {
    let head = match answer {
        Answer::Status(code) => format!("HTTP/1.1 {code} Whatever\r\ncontent-length: 0\r\n\r\n"),
        Answer::Redirect(to) => format!("HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n"),
        Answer::Late { after, status } => {
            tokio::time::sleep(after).await;
            format!("HTTP/1.1 {status} Whatever\r\ncontent-length: 0\r\n\r\n")
        }
        Answer::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return false;
        }
        Answer::Endless => {
            let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            let chunk = format!("{:x}\r\n{}\r\n", 4096, "x".repeat(4096));
            while stream.write_all(chunk.as_bytes()).await.is_ok() {}
            return false;
        }
    };
    stream.write_all(head.as_bytes()).await.is_ok()
}

/// One HTTP/1.1 request off `stream`: its headers (names lower-cased) and its body.
async fn read_request(stream: &mut TcpStream) -> Option<(HashMap<String, String>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() > MAX_REQUEST {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let headers: HashMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length")?.parse().ok()?;
    if length > MAX_REQUEST {
        return None;
    }
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((headers, buf[head_end..head_end + length].to_vec()))
}

/// What a receiver holding `key` makes of `got`, as Standard Webhooks says: one of the
/// space-separated `v1,` signatures is HMAC-SHA256(key, "{id}.{timestamp}.{body}"), and the
/// timestamp is within five minutes of now.
pub fn verify(key: &[u8], got: &Received) -> Result<(), String> {
    let (id, timestamp, signature) =
        (got.header("webhook-id"), got.header("webhook-timestamp"), got.header("webhook-signature"));
    if id.is_empty() {
        return Err("no webhook-id".into());
    }
    let ts: i64 = timestamp.parse().map_err(|_| format!("the timestamp {timestamp:?} is not a number"))?;
    if (chrono::Utc::now().timestamp() - ts).abs() > 300 {
        return Err(format!("the timestamp {ts} is not within five minutes of now"));
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(&got.body);
    let want = format!("v1,{}", B64.encode(mac.finalize().into_bytes()));
    if !signature.split(' ').any(|s| s == want) {
        return Err(format!("no signature in {signature:?} is {want:?}"));
    }
    Ok(())
}
