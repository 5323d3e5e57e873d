//! Spawning a test server over two tiny designs, and a backend pointed at it.

use std::path::Path;
use std::time::Duration;

use openqq_core::generation::GenerationRequest;
use openqq_generation::test_server::{TestServer, TestServerOptions};
use openqq_generation::{BreakerSettings, OpenAiBackend, OpenAiSettings};

pub const COUNTER: &str = "// 4-bit counter\nmodule counter(input clk, output reg [3:0] q);\n  always @(posedge clk) q <= q + 4'd1;\nendmodule\n";
pub const COUNTER_BROKEN: &str =
    "module counter(input clk, output reg [3:0] q);\n  always @(posedge clk) q <= q + ;\nendmodule\n";
pub const COUNTER_NOT_EQUIVALENT: &str =
    "module counter(input clk, output reg [3:0] q);\n  always @(posedge clk) q <= q - 4'd1;\nendmodule\n";
pub const BLINKY: &str = "module divider(input clk, output reg tick);\n  reg [23:0] n;\n  always @(posedge clk) {tick, n} <= n + 1;\nendmodule\n\nmodule blinky(input clk, output reg led);\n  wire tick;\n  divider d(.clk(clk), .tick(tick));\n  always @(posedge clk) if (tick) led <= ~led;\nendmodule\n";
pub const BLINKY_PCF: &str = "set_io clk 35\nset_io led 11\n";

/// A running server over a temporary designs directory.
pub struct TestApp {
    pub server: TestServer,
    _designs: tempfile::TempDir,
}

impl TestApp {
    /// A backend with quick test settings, changed by `adjust`.
    pub fn backend(&self, adjust: impl FnOnce(&mut OpenAiSettings)) -> OpenAiBackend {
        let mut settings = settings(&self.server);
        adjust(&mut settings);
        OpenAiBackend::new(settings).expect("test settings are valid")
    }
}

/// Settings pointed at `server`: 5 s timeout, 2 retries backing off from 10 ms, breaker at 5.
pub fn settings(server: &TestServer) -> OpenAiSettings {
    OpenAiSettings {
        timeout: Duration::from_secs(5),
        max_retries: 2,
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
        breaker: BreakerSettings { failure_threshold: 5, cool_down: Duration::from_secs(60) },
        ..OpenAiSettings::new(server.base_url(), "stub-model")
    }
}

/// Two designs: `counter` (every variant) and `blinky` (two modules and a pcf, correct only).
pub fn write_designs(dir: &Path) {
    let write = |design: &str, file: &str, text: &str| {
        std::fs::create_dir_all(dir.join(design)).unwrap();
        std::fs::write(dir.join(design).join(file), text).unwrap();
    };
    write("counter", "design.v", COUNTER);
    write("counter", "broken_synth.v", COUNTER_BROKEN);
    write("counter", "not_equivalent.v", COUNTER_NOT_EQUIVALENT);
    write("counter", "spec.md", "# A 4-bit free-running counter\n");
    write("blinky", "design.v", BLINKY);
    write("blinky", "design.pcf", BLINKY_PCF);
}

pub async fn spawn(adjust: impl FnOnce(&mut TestServerOptions)) -> TestApp {
    let designs = tempfile::tempdir().unwrap();
    write_designs(designs.path());
    let mut options = TestServerOptions::new(designs.path());
    adjust(&mut options);
    let server = TestServer::start(options).await.expect("the test server starts");
    TestApp { server, _designs: designs }
}

/// A first attempt at the counter.
pub fn counter() -> GenerationRequest {
    GenerationRequest { top: Some("counter".into()), ..GenerationRequest::new("A 4-bit counter.", "ice40") }
}
