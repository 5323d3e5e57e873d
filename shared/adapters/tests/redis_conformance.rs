//! The Redis limiter against a real `redis-server`: the limiter conformance suite, exactness
//! across separate connections, and Redis's own failure modes (a flushed script cache, a stopped
//! server, a stalled one) with the Redis-down policy on top.
//!
//! Tests that only read and write their own tenants use `OPENQQ_TEST_REDIS_URL` when it is set
//! (the project's test command starts one server for everything). Tests that flush, pause or
//! stop Redis always start a private server, so they never disturb the others. Without
//! `redis-server` installed these tests fail; they never skip.

use openqq_adapters::conformance::{
    self,
    limiter::{hammer, hammer_weighted, max_in_any_window, max_weight_in_any_window, Answers, Capabilities},
    unique,
};
use openqq_adapters::fallback_limiter::{FallbackRateLimiter, RedisDownPolicy, FALLBACKS_METRIC};
use openqq_adapters::redis_limiter::{RedisRateLimiter, SCRIPT};
use openqq_core::ports::PortError;
use openqq_core::{Decision, Meter, Quota, RateLimiter, TenantId};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::num::NonZeroU32;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Decisions must come back well within this, even on a loaded 2-core machine.
const TIMEOUT: Duration = Duration::from_millis(250);

/// Timing-sensitive tests run one at a time: on two cores, parallel hammers starve each other
/// and the "not starved" checks would judge the machine, not the limiter.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------
// A redis-server owned by one test

/// A `redis-server` child process on a free loopback port, without persistence; killed on drop.
struct RedisServer {
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    fn start() -> Self {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let mut server = RedisServer { port, child: None };
            if server.restart() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server on its port again; false if it did not come up (the port was taken).
    fn restart(&mut self) -> bool {
        let spawned = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(std::env::temp_dir())
            .stdout(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                panic!("redis-server is not installed (apt-get install redis-server); the Redis limiter tests need it")
            }
            Err(e) => panic!("cannot start redis-server: {e}"),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return false;
            }
            if ping(self.port) {
                self.child = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        false
    }

    /// Kills the server as a crash would.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// The shared server's URL, or a private server (kept alive by the returned guard).
fn shared_redis() -> (Option<RedisServer>, String) {
    match std::env::var("OPENQQ_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => (None, url),
        _ => {
            let server = RedisServer::start();
            let url = server.url();
            (Some(server), url)
        }
    }
}

async fn limiter(url: &str) -> Arc<RedisRateLimiter> {
    Arc::new(RedisRateLimiter::connect(url, TIMEOUT).await.expect("redis is reachable"))
}

async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap()
}

fn tenant(prefix: &str) -> TenantId {
    TenantId::parse(unique(prefix)).unwrap()
}

/// Each limiter (one connection each) hammers `tenant` with three tasks at once; all decisions.
async fn hammer_from(
    limiters: &[Arc<RedisRateLimiter>],
    tenant: &TenantId,
    quota: Quota,
    run_for: Duration,
    bursty: bool,
) -> Vec<Decision> {
    let runs: Vec<_> = limiters
        .iter()
        .map(|l| {
            let (l, tenant) = (l.clone() as Arc<dyn RateLimiter>, tenant.clone());
            tokio::spawn(async move { hammer(l, &tenant, quota, 3, run_for, bursty).await })
        })
        .collect();
    let mut all = Vec::new();
    for run in runs {
        all.extend(run.await.unwrap());
    }
    all
}

/// The suite's judgement: never more than the limit in any window of the limiter's own clock,
/// and not starved either.
fn assert_exact(decisions: &[Decision], quota: Quota, what: &str) {
    let max = max_in_any_window(decisions, quota.window);
    assert!(max <= quota.limit as usize, "{what}: at most {} admissions in any window, saw {max}", quota.limit);
    let admitted = decisions.iter().filter(|d| d.allowed).count();
    let span =
        decisions.iter().map(|d| d.now_micros).max().unwrap() - decisions.iter().map(|d| d.now_micros).min().unwrap();
    let windows = span as f64 / quota.window.as_micros() as f64;
    assert!(
        admitted as f64 >= 0.7 * quota.limit as f64 * windows,
        "{what}: not starved, {admitted} admitted over {windows:.1} windows"
    );
    assert!(decisions.iter().any(|d| !d.allowed), "{what}: the load exceeded the limit");
}

// ---------------------------------------------------------------------------------------------
// Conformance and exactness

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_limiter_passes_the_limiter_suite() {
    let _serial = SERIAL.lock().await;
    let (_server, url) = shared_redis();
    conformance::limiter::run(limiter(&url).await, &Capabilities::EXACT).await;
}

/// While Redis answers, the fallback limiter is the Redis limiter: exact, whatever its policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_limiter_over_an_answering_redis_passes_the_limiter_suite() {
    let _serial = SERIAL.lock().await;
    let (_server, url) = shared_redis();
    let fallback = FallbackRateLimiter::new(limiter(&url).await, RedisDownPolicy::default());
    conformance::limiter::run(Arc::new(fallback), &Capabilities::EXACT).await;
}

/// A fallback limiter whose Redis has stopped, skipping it for longer than the suite runs.
async fn fallback_over_a_stopped_redis(policy: RedisDownPolicy) -> (RedisServer, Arc<FallbackRateLimiter>) {
    let mut server = RedisServer::start();
    let primary = limiter(&server.url()).await;
    server.stop();
    let fallback = FallbackRateLimiter::new(primary, policy).with_retry_after(Duration::from_secs(600));
    (server, Arc::new(fallback))
}

/// With Redis down, fail open decides in process at limit ÷ instances, exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_the_fail_open_fallback_passes_the_limiter_suite_at_its_share() {
    let _serial = SERIAL.lock().await;
    let instances = NonZeroU32::new(2).unwrap();
    let (_server, fallback) = fallback_over_a_stopped_redis(RedisDownPolicy::FailOpen { instances }).await;
    conformance::limiter::run(fallback.clone(), &Capabilities { answers: Answers::Share { instances } }).await;
    assert!(fallback.fallbacks() > 0, "the decisions were the fallback's");
}

/// With Redis down, fail closed refuses every check as unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_the_fail_closed_fallback_passes_the_limiter_suite_as_unavailable() {
    let (_server, fallback) = fallback_over_a_stopped_redis(RedisDownPolicy::FailClosed).await;
    conformance::limiter::run(fallback, &Capabilities { answers: Answers::Unavailable }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_separate_connections_never_admit_more_than_the_limit_in_any_window() {
    let _serial = SERIAL.lock().await;
    let (_server, url) = shared_redis();
    let instances = [limiter(&url).await, limiter(&url).await];
    for (limit, bursty) in [(20, false), (20, true), (100, false), (100, true)] {
        let quota = Quota { limit, window: Duration::from_millis(100) };
        let decisions = hammer_from(&instances, &tenant("shared"), quota, Duration::from_millis(1000), bursty).await;
        assert_exact(&decisions, quota, &format!("limit {limit}, bursty={bursty}"));
    }
}

/// The script with the classic bug: the member is `tostring(now)`, which Lua prints with
/// %.14g, so every admission within the same 100 µs overwrites one member instead of adding one.
fn script_with_tostring_members() -> &'static str {
    let start = SCRIPT.find("  local stamp = ").expect("the member block starts here");
    let end = SCRIPT.find("  redis.call('PEXPIRE'").expect("and ends before the expiry");
    let bad = format!("{}  redis.call('ZADD', key, now, tostring(now))\n{}", &SCRIPT[..start], &SCRIPT[end..]);
    Box::leak(bad.into_boxed_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exactness_check_catches_members_formatted_with_lua_tostring() {
    let _serial = SERIAL.lock().await;
    let (_server, url) = shared_redis();
    let bad = script_with_tostring_members();
    let mut instances = Vec::new();
    for _ in 0..2 {
        instances.push(Arc::new(RedisRateLimiter::connect_with_script(&url, TIMEOUT, bad).await.unwrap()));
    }
    let quota = Quota { limit: 100, window: Duration::from_millis(100) };
    let decisions = hammer_from(&instances, &tenant("tostring"), quota, Duration::from_millis(1000), false).await;
    let max = max_in_any_window(&decisions, quota.window);
    eprintln!("tostring members: at most {max} admissions in a 100 ms window, limit 100");
    assert!(max > 100, "colliding members let more than the limit through (saw at most {max} in a window)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tenant_vanishes_one_window_after_its_last_admission() {
    let (_server, url) = shared_redis();
    let limiter = limiter(&url).await;
    let t = tenant("idle");
    let quota = Quota { limit: 5, window: Duration::from_millis(200) };
    limiter.check(&t, quota).await.unwrap();
    let mut conn = raw(&url).await;
    let key = RedisRateLimiter::key(&t);
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut conn).await.unwrap();
    assert!((1..=200).contains(&ttl), "the log expires one window after the admission, PTTL was {ttl}");
    assert!(!limiter.check(&t, Quota { limit: 1, ..quota }).await.unwrap().allowed);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let exists: i64 = redis::cmd("EXISTS").arg(&key).query_async(&mut conn).await.unwrap();
    assert_eq!(exists, 0, "nothing is left of an idle tenant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_never_admit_more_than_the_byte_limit_in_any_window() {
    let _serial = SERIAL.lock().await;
    let (_server, url) = shared_redis();
    let (a, b) = (limiter(&url).await, limiter(&url).await);
    let t = tenant("bytes");
    let quota = Quota { limit: 50_000, window: Duration::from_millis(100) };
    let run = |l: Arc<RedisRateLimiter>, t: TenantId| {
        tokio::spawn(async move { hammer_weighted(l, &t, quota, 10_000, 3, Duration::from_millis(1000)).await })
    };
    let (ra, rb) = (run(a, t.clone()), run(b, t.clone()));
    let mut decisions = ra.await.unwrap();
    decisions.extend(rb.await.unwrap());
    let max = max_weight_in_any_window(&decisions, quota.window);
    assert!(max <= 50_000, "at most 50 000 bytes admitted in any 100 ms window, saw {max}");
    assert!(decisions.iter().any(|(d, _)| !d.allowed), "the load exceeded the limit");
    let admitted: u64 = decisions.iter().filter(|(d, _)| d.allowed).map(|(_, c)| u64::from(*c)).sum();
    assert!(admitted >= 5 * 50_000, "not starved: {admitted} bytes admitted over about 10 windows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tenants_byte_log_and_total_vanish_one_window_after_its_last_admission() {
    let (_server, url) = shared_redis();
    let limiter = limiter(&url).await;
    let t = tenant("idle-bytes");
    let quota = Quota { limit: 1000, window: Duration::from_millis(200) };
    assert!(limiter.check_weighted(&t, Meter::Bytes, quota, 600).await.unwrap().allowed);
    let mut conn = raw(&url).await;
    let [log, sum] = RedisRateLimiter::weighted_keys(&t, Meter::Bytes);
    for key in [&log, &sum] {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut conn).await.unwrap();
        assert!((1..=200).contains(&ttl), "{key} expires one window after the admission, PTTL was {ttl}");
    }
    let total: u64 = redis::cmd("GET").arg(&sum).query_async(&mut conn).await.unwrap();
    assert_eq!(total, 600);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let exists: i64 = redis::cmd("EXISTS").arg(&log).arg(&sum).query_async(&mut conn).await.unwrap();
    assert_eq!(exists, 0, "nothing is left of an idle tenant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_byte_total_is_rebuilt_from_the_log() {
    let (_server, url) = shared_redis();
    let limiter = limiter(&url).await;
    let t = tenant("evicted");
    let quota = Quota { limit: 1000, window: Duration::from_secs(60) };
    assert!(limiter.check_weighted(&t, Meter::Bytes, quota, 300).await.unwrap().allowed);
    assert!(limiter.check_weighted(&t, Meter::Bytes, quota, 400).await.unwrap().allowed);
    // An eviction (maxmemory) or a careless DEL takes the total but leaves the log.
    let [_, sum] = RedisRateLimiter::weighted_keys(&t, Meter::Bytes);
    let _: () = redis::cmd("DEL").arg(&sum).query_async(&mut raw(&url).await).await.unwrap();
    let d = limiter.check_weighted(&t, Meter::Bytes, quota, 400).await.unwrap();
    assert!(!d.allowed && d.remaining == 300, "700 are still counted: {d:?}");
    assert!(limiter.check_weighted(&t, Meter::Bytes, quota, 300).await.unwrap().allowed);
}

// ---------------------------------------------------------------------------------------------
// Redis's failure modes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushing_the_script_cache_mid_run_neither_fails_nor_double_counts() {
    let _serial = SERIAL.lock().await;
    let server = RedisServer::start();
    let instances = [limiter(&server.url()).await, limiter(&server.url()).await];
    let flusher = {
        let mut conn = raw(&server.url()).await;
        tokio::spawn(async move {
            loop {
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut conn).await.unwrap();
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        })
    };
    // Exactness while the cache keeps vanishing (`hammer` panics on any error).
    let quota = Quota { limit: 20, window: Duration::from_millis(100) };
    let decisions = hammer_from(&instances, &tenant("flushed"), quota, Duration::from_millis(800), false).await;
    assert_exact(&decisions, quota, "script cache flushed every 15 ms");
    // Accounting: with a limit never reached, the log must hold exactly one entry per decision.
    // A script run twice for one decision would leave more.
    let t = tenant("audited");
    let unlimited = Quota { limit: 1_000_000, window: Duration::from_secs(60) };
    let decisions = hammer_from(&instances, &t, unlimited, Duration::from_millis(500), false).await;
    flusher.abort();
    let logged: usize =
        redis::cmd("ZCARD").arg(RedisRateLimiter::key(&t)).query_async(&mut raw(&server.url()).await).await.unwrap();
    assert!(decisions.iter().all(|d| d.allowed));
    assert_eq!(logged, decisions.len(), "one log entry per decision, none counted twice");
    let reloads: u64 = instances.iter().map(|l| l.script_reloads()).sum();
    eprintln!("script cache flushed mid-run: {} decisions audited, {reloads} reloads", decisions.len());
    assert!(reloads >= 10, "the NOSCRIPT path ran ({reloads} reloads)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_that_timed_out_is_never_sent_again() {
    let server = RedisServer::start();
    let limiter = limiter(&server.url()).await;
    let t = tenant("stalled");
    let quota = Quota { limit: 100, window: Duration::from_secs(60) };
    limiter.check(&tenant("warm-up"), quota).await.expect("the script is cached from here on");
    // Redis stalls (one thread, busy); what reaches it meanwhile runs once it wakes up, even
    // if the client has given up by then.
    let stalled_at = Instant::now();
    let stall = {
        let mut conn = raw(&server.url()).await;
        tokio::spawn(async move { redis::cmd("DEBUG").arg("SLEEP").arg("0.8").query_async::<()>(&mut conn).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let err = limiter.check(&t, quota).await.unwrap_err();
    assert!(matches!(err, PortError::Unavailable(_)), "a stalled Redis is unavailable, got {err}");
    assert!(started.elapsed() < TIMEOUT * 2, "the timeout bounds the wait ({:?})", started.elapsed());
    // The client that sent DEBUG SLEEP gives up waiting too; only the stall's end matters.
    let _ = stall.await;
    tokio::time::sleep(Duration::from_millis(1000).saturating_sub(stalled_at.elapsed())).await;
    let logged: usize =
        redis::cmd("ZCARD").arg(RedisRateLimiter::key(&t)).query_async(&mut raw(&server.url()).await).await.unwrap();
    assert_eq!(logged, 1, "the timed-out request ran once, late, and was not sent again");
    assert!(limiter.check(&t, quota).await.unwrap().allowed, "the limiter answers again once Redis does");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_a_server_that_never_answers_is_unavailable_within_the_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let err = RedisRateLimiter::connect(&url, Duration::from_millis(100)).await.err().expect("no answer, no limiter");
    assert!(matches!(err, PortError::Unavailable(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(1));
    let err = RedisRateLimiter::connect("not a url", TIMEOUT).await.err().unwrap();
    assert!(matches!(err, PortError::Settings(_)), "a malformed URL is a settings error: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_redis_stops_the_fail_open_policy_decides_and_no_error_surfaces() {
    let _serial = SERIAL.lock().await;
    let counted = recorder::install();
    let mut server = RedisServer::start();
    let primary = limiter(&server.url()).await;
    let two = NonZeroU32::new(2).unwrap();
    let limiter = Arc::new(
        FallbackRateLimiter::new(primary, RedisDownPolicy::FailOpen { instances: two })
            .with_retry_after(Duration::from_millis(200)),
    );
    let quota = Quota { limit: 20, window: Duration::from_millis(100) };
    let t = tenant("outage");
    // One caller, so the decisions stay in time order across the two clocks.
    let run = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let (started, mut decisions) = (Instant::now(), Vec::new());
            while started.elapsed() < Duration::from_millis(2500) {
                decisions.push(limiter.check(&t, quota).await.expect("no error surfaces"));
                tokio::time::sleep(Duration::from_micros(300)).await;
            }
            decisions
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    server.stop();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(server.restart(), "redis-server restarts on its port");
    let decisions = run.await.expect("no error surfaced and nothing panicked");
    // Redis's clock reads about 1.7e15 µs since 1970; the in-process one counts from its start.
    let from_redis = |d: &&Decision| d.now_micros > 1_000_000_000_000_000;
    let before: Vec<Decision> = decisions.iter().take_while(from_redis).copied().collect();
    let during: Vec<Decision> = decisions.iter().filter(|d| !from_redis(d)).copied().collect();
    let after = decisions.iter().skip(before.len()).filter(from_redis).count();
    assert!(!before.is_empty() && !during.is_empty(), "decisions came from Redis, then from the fallback");
    assert!(after > 0, "Redis decided again once it was back");
    assert!(max_in_any_window(&during, quota.window) <= 10, "the fallback admits limit ÷ 2 instances");
    assert_eq!(limiter.fallbacks(), during.len() as u64);
    assert_eq!(
        counted.get(&format!("{FALLBACKS_METRIC}{{policy=fail_open}}")),
        during.len() as u64,
        "each fallback is counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_redis_stops_the_fail_closed_policy_rejects_as_unavailable() {
    let mut server = RedisServer::start();
    let primary = limiter(&server.url()).await;
    let limiter = FallbackRateLimiter::new(primary, RedisDownPolicy::FailClosed);
    let quota = Quota { limit: 20, window: Duration::from_millis(100) };
    let t = tenant("closed");
    assert!(limiter.check(&t, quota).await.unwrap().allowed);
    server.stop();
    for _ in 0..3 {
        let err = limiter.check(&t, quota).await.unwrap_err();
        assert!(matches!(err, PortError::Unavailable(_)) && err.is_retriable(), "{err}");
        assert!(err.to_string().contains("retry after 1 s"), "the rejection says when to retry: {err}");
    }
}

/// A minimal metrics recorder that keeps counters, so a test can read what was counted.
mod recorder {
    use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};

    #[derive(Default)]
    pub struct Counters(Mutex<HashMap<String, Arc<AtomicU64>>>);

    impl Counters {
        /// `name{label=value,…}`
        pub fn get(&self, key: &str) -> u64 {
            self.0.lock().unwrap().get(key).map_or(0, |c| c.load(Ordering::Relaxed))
        }
    }

    struct Shared(&'static Counters);

    impl Recorder for Shared {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            Counter::from_arc(self.0 .0.lock().unwrap().entry(name).or_default().clone())
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    /// Installs the recorder for this test binary (once) and returns its counters.
    pub fn install() -> &'static Counters {
        static COUNTERS: OnceLock<&'static Counters> = OnceLock::new();
        COUNTERS.get_or_init(|| {
            let counters: &'static Counters = Box::leak(Box::default());
            metrics::set_global_recorder(Shared(counters)).expect("no other recorder in this test binary");
            counters
        })
    }
}
