//! A proxy in front of a DynamoDB endpoint that answers some requests itself with DynamoDB's
//! `ThrottlingException`, as a table over its capacity does, and forwards the rest. It throttles
//! in bursts (`burst` requests of every `every`), long enough to exhaust the SDK's own retries so
//! the platform's retries are exercised too.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Throttler {
    pub url: String,
    on: Arc<std::sync::atomic::AtomicBool>,
    throttled: Arc<AtomicU64>,
    forwarded: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Throttler {
    /// Listens on a free port and forwards to `upstream` (`http://HOST:PORT`).
    pub async fn start(upstream: &str, every: u64, burst: u64) -> Self {
        let upstream: SocketAddr = upstream.trim_start_matches("http://").trim_end_matches('/').parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (throttled, forwarded) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let seen = Arc::new(AtomicU64::new(0));
        let on = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (t, f, o) = (throttled.clone(), forwarded.clone(), on.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (t, f, o, seen) = (t.clone(), f.clone(), o.clone(), seen.clone());
                tokio::spawn(async move {
                    let pattern = Pattern { every, burst, on: &o, seen: &seen };
                    let _ = serve(client, upstream, pattern, &t, &f).await;
                });
            }
        });
        Self { url, on, throttled, forwarded, task }
    }

    /// Starts throttling (until then every request is forwarded, so start-up is not disturbed).
    pub fn throttle(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Stops throttling: every request is forwarded again.
    pub fn release(&self) {
        self.on.store(false, Ordering::Relaxed);
    }

    /// Requests answered with a throttling error so far.
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }

    /// Requests passed on to the endpoint so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }
}

impl Drop for Throttler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const THROTTLED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}"#;

/// One client connection: each request (HTTP/1.1, `Content-Length` bodies, as the SDK sends them)
/// is throttled or forwarded on a fresh upstream connection.
/// Which requests are throttled: `burst` of every `every`, once `on`.
struct Pattern<'a> {
    every: u64,
    burst: u64,
    on: &'a std::sync::atomic::AtomicBool,
    seen: &'a AtomicU64,
}

async fn serve(
    mut client: TcpStream,
    upstream: SocketAddr,
    pattern: Pattern<'_>,
    throttled: &AtomicU64,
    forwarded: &AtomicU64,
) -> std::io::Result<()> {
    loop {
        let Some(request) = read_message(&mut client).await? else { return Ok(()) };
        let n = pattern.seen.fetch_add(1, Ordering::Relaxed);
        if pattern.on.load(Ordering::Relaxed) && n % pattern.every < pattern.burst {
            throttled.fetch_add(1, Ordering::Relaxed);
            let head = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\nx-amzn-requestid: throttled-{n}\r\ncontent-length: {}\r\n\r\n",
                THROTTLED.len()
            );
            client.write_all(head.as_bytes()).await?;
            client.write_all(THROTTLED.as_bytes()).await?;
            continue;
        }
        forwarded.fetch_add(1, Ordering::Relaxed);
        let mut up = TcpStream::connect(upstream).await?;
        up.write_all(&request).await?;
        let Some(response) = read_message(&mut up).await? else { return Ok(()) };
        client.write_all(&response).await?;
    }
}

/// Reads one HTTP/1.1 message (head and a `Content-Length` body) whole; `None` at a clean end.
async fn read_message(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if head.lines().any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked")) {
        // The last chunk is empty: `0\r\n\r\n`, alone or after the others.
        let ended = |buf: &[u8]| buf[head_end..] == *b"0\r\n\r\n" || buf.ends_with(b"\r\n0\r\n\r\n");
        while !ended(&buf) {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        return Ok(Some(buf));
    }
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(buf))
}
