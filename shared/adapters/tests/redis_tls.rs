//! The Redis limiter over TLS (`rediss://`, as ElastiCache serves it) against a real
//! `redis-server` listening only on a TLS port, with a self-signed certificate made for the test
//! by the `openssl` command. Without `redis-server` (built with TLS, as Debian's is) or `openssl`
//! these tests fail; they never skip.

use openqq_adapters::redis_limiter::RedisRateLimiter;
use openqq_core::{Quota, RateLimiter, TenantId};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(2);

/// A `redis-server` on a free loopback TLS port (plain TCP off), killed on drop.
struct TlsRedis {
    port: u16,
    child: Child,
    certificate: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        self_signed(&cert, &key);
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .args(["--tls-auth-clients", "no", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "redis-server did not listen on its TLS port");
            std::thread::sleep(Duration::from_millis(20));
        }
        TlsRedis { port, child, certificate: std::fs::read(&cert).unwrap(), _dir: dir }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A certificate for `localhost` and 127.0.0.1, valid for a day, signed by its own key.
fn self_signed(cert: &Path, key: &Path) {
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout"])
        .arg(key)
        .arg("-out")
        .arg(cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl is installed");
    assert!(status.success(), "openssl made the certificate");
}

#[tokio::test]
async fn the_limiter_decides_over_tls_with_a_certificate_it_trusts() {
    let server = TlsRedis::start();
    let url = format!("rediss://localhost:{}", server.port);
    let limiter = RedisRateLimiter::connect_trusting(&url, TIMEOUT, &server.certificate).await.unwrap();
    let tenant = TenantId::parse("tls-tenant").unwrap();
    let quota = Quota { limit: 3, window: Duration::from_secs(60) };
    let mut allowed = 0;
    for _ in 0..5 {
        if limiter.check(&tenant, quota).await.unwrap().allowed {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 3, "the script ran on the TLS server, exactly as over plain TCP");
    assert!(limiter.check_weighted(&tenant, quota, 2).await.unwrap().allowed);
}

#[tokio::test]
async fn a_certificate_nobody_vouches_for_is_refused_and_plain_tcp_does_not_reach_a_tls_port() {
    let server = TlsRedis::start();
    // The system's roots do not include the test's self-signed certificate.
    let untrusted = RedisRateLimiter::connect(&format!("rediss://localhost:{}", server.port), TIMEOUT).await;
    assert!(untrusted.is_err(), "a certificate no trusted CA signed is refused");
    // Speaking plain Redis to a TLS port gets no answer the limiter can use.
    let plain = RedisRateLimiter::connect(&format!("redis://localhost:{}", server.port), TIMEOUT).await;
    assert!(plain.is_err(), "plain TCP does not reach the TLS listener");
}

#[tokio::test]
async fn a_server_whose_certificate_another_root_signed_is_refused() {
    let server = TlsRedis::start();
    let other = TlsRedis::start();
    let wrong_root =
        RedisRateLimiter::connect_trusting(&format!("rediss://localhost:{}", server.port), TIMEOUT, &other.certificate)
            .await;
    assert!(wrong_root.is_err(), "a server whose certificate another root signed is refused");
}
