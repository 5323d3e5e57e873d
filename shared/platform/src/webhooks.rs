//! Webhook endpoints for `openqq up --webhooks FILE`: one `TENANT URL SECRET` per line, `#`
//! starts a comment; SECRET is `whsec_<base64>` (Standard Webhooks). Keep the file private: it
//! holds the signing secrets.
//!
//! ```text
//! acme     https://hooks.acme.example/openqq     whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
//! ```

use anyhow::{bail, Context, Result};
use openqq_adapters::{Endpoint, WebhookSecret};
use openqq_core::TenantId;
use std::collections::HashMap;
use std::path::Path;

pub fn parse(text: &str) -> Result<HashMap<TenantId, Endpoint>> {
    let mut out = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [tenant, url, secret] = words[..] else {
            bail!("line {}: expected `TENANT URL SECRET`", n + 1);
        };
        let tenant = TenantId::parse(tenant).with_context(|| format!("line {}", n + 1))?;
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 2048 {
            bail!("line {}: the URL must be http(s):// and at most 2048 characters", n + 1);
        }
        let secret = WebhookSecret::parse(secret).map_err(|e| anyhow::anyhow!("line {}: {e}", n + 1))?;
        if out.insert(tenant.clone(), Endpoint { url: url.to_owned(), secret }).is_some() {
            bail!("line {}: tenant {tenant} has two endpoints", n + 1);
        }
    }
    Ok(out)
}

pub fn load(path: &Path) -> Result<HashMap<TenantId, Endpoint>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("in {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhooks_file_parses_and_bad_lines_are_named_without_the_secret() {
        let ok = parse("# t url secret\nacme https://h.example/x whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n").unwrap();
        assert_eq!(ok[&TenantId::parse("acme").unwrap()].url, "https://h.example/x");
        for bad in
            ["acme https://h.example/x", "acme ftp://h whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "acme https://h nope"]
        {
            let err = format!("{:#}", parse(bad).unwrap_err());
            assert!(err.contains("line 1"), "{err}");
        }
        let dup =
            "a http://h whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\na http://i whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        assert!(format!("{:#}", parse(dup).unwrap_err()).contains("two endpoints"));
    }
}
