//! The four Lambda functions are built by the platform builder from their environment: every
//! setting of `openqq up` is a variable of the same name, a bad one stops the cold start with a
//! sentence naming it (before the data dir is touched), and good ones reach the Lambda runtime
//! (which then stops for want of the Runtime API outside Lambda).

use std::path::Path;
use std::process::{Command, Output};

/// A secret long enough for the API's keys (32 bytes at least).
const SECRET: &str = "s3cret-for-tests-s3cret-for-tests";

const FUNCTIONS: [&str; 4] = ["api", "design-job", "validation", "results"];

fn cold_start(function: &str, data_dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(openqq_e2e::function_bin(function));
    // Only what the test gives: no OPENQQ_* of the caller's shell leaks in.
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("OPENQQ_") || k.starts_with("AWS_LAMBDA")) {
        cmd.env_remove(name);
    }
    cmd.env("OPENQQ_DATA_DIR", data_dir).env("RUST_BACKTRACE", "0").envs(env.iter().copied()).output().unwrap()
}

#[test]
fn a_bad_setting_stops_every_functions_cold_start_naming_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for function in FUNCTIONS {
        for (name, value) in [
            ("OPENQQ_BYTE_LIMIT", "lots"),
            ("OPENQQ_RATE_LIMIT", "fast"),
            ("OPENQQ_VALIDATION_BUDGET", "0s"),
            ("OPENQQ_TENANT_CONCURRENCY", "0"),
            ("OPENQQ_PARTITIONS", "0"),
        ] {
            let out = cold_start(function, &data, &[(name, value), ("OPENQQ_JWT_SECRET", SECRET)]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{function} with {name}={value} started");
            assert!(stderr.contains(name), "{function} with {name}={value}: {stderr}");
            assert!(!data.exists(), "{function} with {name}={value} touched the data dir");
        }
    }
}

#[test]
fn good_settings_bring_every_function_to_the_lambda_runtime_and_the_api_needs_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let settings = [("OPENQQ_RATE_LIMIT", "7/1s"), ("OPENQQ_BYTE_LIMIT", "16MiB/10s"), ("OPENQQ_PARTITIONS", "3")];
    for function in FUNCTIONS {
        let mut env = settings.to_vec();
        env.push(("OPENQQ_JWT_SECRET", SECRET));
        let out = cold_start(function, &data, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("AWS_LAMBDA"), "{function} reached the Lambda runtime: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(r#""Name":"openqq_build_info""#) && l.contains(r#""openqq_build_info":1"#)),
            "{function} wrote its deploy marker (a CloudWatch embedded metric) at cold start: {stdout}"
        );
        assert!(!stderr.contains(SECRET), "{function} never shows the secret: {stderr}");
    }
    let out = cold_start("api", &data, &[("OPENQQ_JWT_SECRET", "short")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("OPENQQ_JWT_SECRET: the JWT secret must be"), "{stderr}");
    let out = cold_start("api", &data, &settings);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("OPENQQ_JWT_SECRET must be set"), "{stderr}");
}
