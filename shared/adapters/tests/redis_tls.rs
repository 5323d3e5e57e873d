//! The Redis limiter over TLS (`rediss://`, as ElastiCache serves it) against a real
//! `redis-server` listening only on a TLS port, with a certificate signed by a CA made for the test
//! by the `openssl` command. Without `redis-server` (built with TLS, as Debian's is) or `openssl`
//! these tests fail; they never skip.

use openqq_adapters::redis_limiter::RedisRateLimiter;
use openqq_core::{Quota, RateLimiter, TenantId};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(2);

/// A `redis-server` on a free loopback TLS port (plain TCP off), killed on drop.
struct TlsRedis {
    port: u16,
    child: Child,
    /// The CA certificate (PEM) that signed the server's.
    certificate: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let ca = certificates(dir.path(), &cert, &key);
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
        TlsRedis { port, child, certificate: std::fs::read(ca).unwrap(), _dir: dir }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA of the test's own and, signed by it, a server certificate for `localhost` and 127.0.0.1
/// (`cert`, `key`), valid for a day, as ElastiCache's are signed by Amazon's CA. Returns the CA
/// certificate's path. (A self-signed server certificate is a CA certificate too, and TLS clients
/// such as rustls refuse a CA certificate presented as a server's own.)
fn certificates(dir: &Path, cert: &Path, key: &Path) -> PathBuf {
    let (ca, ca_key, request, ext) =
        (dir.join("ca.pem"), dir.join("ca-key.pem"), dir.join("request.pem"), dir.join("ext.cnf"));
    std::fs::write(&ext, "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    let new_key = ["-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj"];
    openssl(&["req", "-x509"], &new_key, "/CN=openqq test CA", &[("-keyout", &ca_key), ("-out", &ca)]);
    openssl(&["req"], &new_key, "/CN=localhost", &[("-keyout", key), ("-out", &request)]);
    let signed = [("-in", &*request), ("-CA", &ca), ("-CAkey", &ca_key), ("-extfile", &ext), ("-out", cert)];
    openssl(&["x509", "-req", "-CAcreateserial"], &["-days"], "1", &signed);
    ca
}

/// Runs `openssl` with `args`, `more`, `last` and then each (option, path) pair.
fn openssl(args: &[&str], more: &[&str], last: &str, files: &[(&str, &Path)]) {
    let mut cmd = Command::new("openssl");
    cmd.args(args).args(more).arg(last);
    for (option, path) in files {
        cmd.arg(option).arg(path);
    }
    let status = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status().expect("openssl is installed");
    assert!(status.success(), "{cmd:?}");
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
    assert!(limiter.check_weighted(&tenant, openqq_core::Meter::Bytes, quota, 2).await.unwrap().allowed);
}

#[tokio::test]
async fn a_certificate_nobody_vouches_for_is_refused_and_plain_tcp_does_not_reach_a_tls_port() {
    let server = TlsRedis::start();
    // The system's roots do not include the test's CA.
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
