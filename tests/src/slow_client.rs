//! Clients that send as slowly as a hostile tenant would: raw TCP connections holding a POST
//! whose body never seems to end.

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The `host:port` of a server URL `http://host:port`.
pub fn addr(url: &str) -> String {
    url.trim_start_matches("http://").to_owned()
}

/// The head of `POST /v1/designs` announcing a `length`-byte JSON body, and its first byte.
pub fn slow_post_head(addr: &str, token: &str, length: usize) -> String {
    format!(
        "POST /v1/designs HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n{{"
    )
}

/// Opens `n` connections to the server at `url`, each sending a POST's head and the first byte
/// of a 100 KB body, and nothing more until the caller writes.
pub async fn open_slow_posts(url: &str, token: &str, n: usize) -> Vec<TcpStream> {
    let addr = addr(url);
    let mut conns = Vec::new();
    for _ in 0..n {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(slow_post_head(&addr, token, 100_000).as_bytes()).await.unwrap();
        conns.push(s);
    }
    conns
}

/// Opens the upload `PUT` of a grant's `url` (this API's `/v1/uploads/{digest}?token=…`)
/// announcing a chunked body, and sends nothing of it until the caller writes chunks.
pub async fn open_chunked_put(url: &str) -> TcpStream {
    let (addr, path) = url.trim_start_matches("http://").split_once('/').expect("an http://host/path URL");
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT /{path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/octet-stream\r\n\
         transfer-encoding: chunked\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

/// The status code and body the server answered on `s`, if it answered within `within`.
pub async fn answer(s: &mut TcpStream, within: std::time::Duration) -> Option<(u16, String)> {
    let (status, _, body) = response(s, within).await?;
    Some((status, body))
}

/// The status code, head (lower-cased) and body of one response on `s`, if it came within
/// `within`.
pub async fn response(s: &mut TcpStream, within: std::time::Duration) -> Option<(u16, String, String)> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let whole = |got: &[u8]| {
        let text = String::from_utf8_lossy(got);
        let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
        let length = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        body.len() >= length
    };
    let _ = tokio::time::timeout(within, async {
        let mut buf = [0u8; 1024];
        while !whole(&got) {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Some((status, head.to_ascii_lowercase(), body.to_owned()))
}
