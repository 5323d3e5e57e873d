//! The chaos run's webhook receiver: one listener on 127.0.0.1 for every tenant's webhooks
//! (`/hook/<tenant>`), whose behaviour the run switches while deliveries arrive: answering 204,
//! down (each connection reset as soon as its request is read), hanging (never answering), or
//! answering 500. It logs every request with its `webhook-id` and what it answered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the receiver treats the requests arriving now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Behaviour {
    Ok = 0,
    Down = 1,
    Hang = 2,
    Error = 3,
}

impl Behaviour {
    fn from_u8(b: u8) -> Self {
        [Self::Ok, Self::Down, Self::Hang, Self::Error][usize::from(b).min(3)]
    }
}

/// One request as the receiver saw it: its `webhook-id` and the status it answered (`None`:
/// reset or never answered).
#[derive(Debug, Clone)]
pub struct Got {
    pub webhook_id: String,
    pub answered: Option<u16>,
}

pub struct Receiver {
    pub base: String,
    behaviour: Arc<AtomicU8>,
    log: Arc<Mutex<Vec<Got>>>,
}

impl Receiver {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let behaviour = Arc::new(AtomicU8::new(Behaviour::Ok as u8));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (b, l) = (behaviour.clone(), log.clone());
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(answer(sock, b.clone(), l.clone()));
            }
        });
        Self { base, behaviour, log }
    }

    /// The URL `tenant`'s webhooks are registered with.
    pub fn url(&self, tenant: &str) -> String {
        format!("{}/hook/{tenant}", self.base)
    }

    pub fn set(&self, b: Behaviour) {
        self.behaviour.store(b as u8, Ordering::SeqCst);
    }

    pub fn log(&self) -> Vec<Got> {
        self.log.lock().unwrap().clone()
    }
}

async fn answer(mut sock: TcpStream, behaviour: Arc<AtomicU8>, log: Arc<Mutex<Vec<Got>>>) {
    let Some((headers, _body)) = read_request(&mut sock).await else { return };
    let webhook_id = headers.get("webhook-id").cloned().unwrap_or_default();
    let status = match Behaviour::from_u8(behaviour.load(Ordering::SeqCst)) {
        Behaviour::Ok => 204,
        Behaviour::Error => 500,
        Behaviour::Down => {
            log.lock().unwrap().push(Got { webhook_id, answered: None });
            return;
        }
        Behaviour::Hang => {
            log.lock().unwrap().push(Got { webhook_id, answered: None });
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return;
        }
    };
    let head = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    // Logged before the answer is written: a sender that reads a 2xx finds it logged.
    log.lock().unwrap().push(Got { webhook_id, answered: Some(status) });
    let _ = sock.write_all(head.as_bytes()).await;
}

/// Reads one HTTP/1.1 request with a `content-length` body: its lower-cased headers and body.
pub async fn read_request(sock: &mut TcpStream) -> Option<(HashMap<String, String>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let n = sock.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
            let len = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok());
            break (i + 4, len.unwrap_or(0));
        }
    };
    while buf.len() < head_end + length {
        let n = sock.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    Some((headers, buf[head_end..head_end + length].to_vec()))
}
