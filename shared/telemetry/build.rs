//! Embeds the build's git revision and time (`OPENQQ_BUILD_COMMIT`, `OPENQQ_BUILD_TIME`) for
//! `openqq_build_info`, whose changes are the dashboards' deploy markers.
//!
//! The revision is `OPENQQ_BUILD_COMMIT` when set (a build outside a checkout, such as an image
//! build, passes it), else `git rev-parse --short=12 HEAD`, else `unknown`. The script reruns only
//! when that variable, `HEAD` or the branch `HEAD` points to changes, so a commit rebuilds this
//! crate and its dependents once, and nothing else makes it rerun. The time is
//! `SOURCE_DATE_EPOCH` when set (reproducible builds), else the moment the script ran.

use std::path::PathBuf;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Asks cargo to rerun when `path` (relative to the crate, as git prints it) changes, if it exists:
/// a missing path would make cargo rerun the script on every build.
fn watch(path: &str) {
    let path = PathBuf::from(path);
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=OPENQQ_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = match std::env::var("OPENQQ_BUILD_COMMIT").ok().filter(|c| !c.trim().is_empty()) {
        Some(commit) => commit.trim().to_owned(),
        None => {
            if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
                watch(&head);
                if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    watch(&git(&["rev-parse", "--git-path", &branch]).unwrap_or_default());
                    // A branch whose loose ref was packed lives in packed-refs.
                    watch(&git(&["rev-parse", "--git-path", "packed-refs"]).unwrap_or_default());
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    let built = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0));
    println!("cargo:rustc-env=OPENQQ_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=OPENQQ_BUILD_TIME={built}");
}
