//! Cold start of each Lambda binary: the time from spawning the process to its first Runtime API
//! `invocation/next` request, which is when Lambda considers a function initialised.
//!
//!   cargo build --release -p openqq-lambda --bins
//!   cargo run --release -p openqq-e2e --example cold_start -- [RUNS]
//!
//! Each binary is started RUNS times (default 20) with `AWS_LAMBDA_RUNTIME_API` pointing at a
//! listener of this program's own on 127.0.0.1 that notes when the `next` request arrives and
//! then stops the process. The functions run on the embedded backends in a fresh data dir, so no
//! network round trip is part of the time (on AWS, the MSK bootstrap-broker lookup, the
//! ElastiCache endpoint lookup and the first connections add theirs). The floor, measured the
//! same way in the same run, is a process that connects and sends the same request as soon as it
//! starts (`bash`'s `/dev/tcp`).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Spawns `cmd` and returns the time until the first `GET …/invocation/next` reaches `listener`.
fn time_to_next(listener: &TcpListener, mut cmd: Command) -> Duration {
    let started = Instant::now();
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("the binary starts");
    listener.set_nonblocking(false).unwrap();
    let (stream, _) = listener.accept().unwrap();
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    let took = started.elapsed();
    assert!(line.contains("/runtime/invocation/next"), "the first request was {line:?}");
    let _ = child.kill();
    let _ = child.wait();
    took
}

fn release_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(Path::parent).unwrap().join(name);
    assert!(bin.exists(), "{} is missing: cargo build --release -p openqq-lambda --bins", bin.display());
    bin
}

fn summary(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(times[times.len() / 2]), ms(*times.last().unwrap()))
}

fn main() {
    let runs: usize = std::env::args().nth(1).map(|a| a.parse().expect("a number of runs")).unwrap_or(20);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let api = listener.local_addr().unwrap().to_string();
    println!("{runs} cold starts each; milliseconds from spawn to the first invocation/next");
    println!("{:<12} {:>8} {:>8}", "binary", "p50", "max");
    let floor = (0..runs)
        .map(|_| {
            let mut cmd = Command::new("bash");
            let request = "GET /2018-06-01/runtime/invocation/next HTTP/1.1\\r\\n\\r\\n";
            let port = api.rsplit(':').next().unwrap();
            cmd.args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}; printf '{request}' >&3; sleep 5")]);
            time_to_next(&listener, cmd)
        })
        .collect();
    let (floor_p50, floor_max) = summary(floor);
    println!("{:<12} {floor_p50:>8.1} {floor_max:>8.1}", "floor (bash)");
    for name in ["api", "design-job", "validation", "results"] {
        let bin = release_bin(name);
        let times = (0..runs)
            .map(|_| {
                let dir = tempfile::tempdir().unwrap();
                let mut cmd = Command::new(&bin);
                for (var, _) in std::env::vars().filter(|(k, _)| k.starts_with("OPENQQ_")) {
                    cmd.env_remove(var);
                }
                cmd.env("AWS_LAMBDA_RUNTIME_API", &api)
                    .env("AWS_LAMBDA_FUNCTION_NAME", name)
                    .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
                    .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                    .env("OPENQQ_DATA_DIR", dir.path())
                    .env("OPENQQ_JWT_SECRET", "a-secret-for-the-cold-start-benchmark");
                let took = time_to_next(&listener, cmd);
                drop(dir);
                took
            })
            .collect();
        let (p50, max) = summary(times);
        println!("{name:<12} {p50:>8.1} {max:>8.1}   ({:.1}x the floor)", p50 / floor_p50);
    }
}
