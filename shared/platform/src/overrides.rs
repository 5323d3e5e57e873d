//! Per-tenant rate-limit overrides from a file (`--rate-limits`), reloaded while running.
//!
//! The overrides file has one `TENANT COUNT/WINDOW` per line; `#` starts a comment:
//!
//! ```text
//! # tenant    quota
//! acme        500/1s
//! batch-co    50/1s
//! ```

use anyhow::{bail, Context, Result};
use openqq_api::limit::QuotaSpec;
use openqq_api::LimitPolicy;
use openqq_core::{Quota, TenantId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Parses an overrides file's text.
pub fn parse_overrides(text: &str) -> Result<HashMap<TenantId, Quota>> {
    let mut out = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(tenant), Some(quota), None) = (words.next(), words.next(), words.next()) else {
            bail!("line {}: expected `TENANT COUNT/WINDOW`, got {line:?}", n + 1);
        };
        let tenant = TenantId::parse(tenant).with_context(|| format!("line {}", n + 1))?;
        let quota: QuotaSpec = quota.parse().with_context(|| format!("line {}", n + 1))?;
        out.insert(tenant, quota.0);
    }
    Ok(out)
}

fn load(path: &Path) -> Result<HashMap<TenantId, Quota>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_overrides(&text).with_context(|| format!("in {}", path.display()))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Loads the overrides now (a bad file fails start-up) and reloads them whenever the file
/// changes. A bad edit while running is logged and the previous overrides stay.
pub fn watch_overrides(policy: Arc<LimitPolicy>, path: PathBuf) -> Result<()> {
    policy.set_overrides(load(&path)?);
    let mut seen = modified(&path);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        loop {
            tick.tick().await;
            let now = modified(&path);
            if now == seen {
                continue;
            }
            seen = now;
            match load(&path) {
                Ok(o) => {
                    tracing::info!(tenants = o.len(), file = %path.display(), "Per-tenant rate limits were reloaded.");
                    policy.set_overrides(o);
                }
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "The rate-limits file is invalid; the previous limits stay.")
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overrides_file_parses_and_a_bad_line_is_named() {
        let o = parse_overrides("# comment\nacme 500/1s\n\nbatch-co 50/250ms # slow\n").unwrap();
        assert_eq!(o[&TenantId::parse("acme").unwrap()].limit, 500);
        assert_eq!(o[&TenantId::parse("batch-co").unwrap()].window, Duration::from_millis(250));
        let err = parse_overrides("acme 5/1s\nbroken\n").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        let err = parse_overrides("acme lots").unwrap_err();
        assert_eq!(format!("{err:#}"), r#"line 1: "lots" is not COUNT/WINDOW (for example 100/1s, 6000/1m, 50/250ms)"#);
    }
}
