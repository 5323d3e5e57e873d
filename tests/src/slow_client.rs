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
