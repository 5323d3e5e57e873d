//! What a service endpoint setting (`--dynamodb-endpoint`, `--s3-endpoint`) must look like: an
//! http or https URL with a host, an optional port and an optional path.

use anyhow::{bail, Result};

/// Checks `endpoint`, naming the setting (`setting`, e.g. `--s3-endpoint (OPENQQ_S3_ENDPOINT)`).
pub fn check(setting: &str, endpoint: &str) -> Result<()> {
    let authority = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
    if !(endpoint.len() <= 2048 && authority.is_some_and(host_and_port)) {
        bail!("{setting} must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:5000, not {endpoint:?}");
    }
    Ok(())
}

/// `HOST[:PORT]` or `[IPV6][:PORT]`.
fn host_and_port(authority: &str) -> bool {
    let port_ok = |p: Option<&str>| p.is_none_or(|p| p.parse::<u16>().is_ok());
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((v6, after)) if !v6.is_empty() && v6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') => {
                after.is_empty() || after.strip_prefix(':').is_some_and(|p| p.parse::<u16>().is_ok())
            }
            _ => false,
        };
    }
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    !host.is_empty()
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        && port_ok(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_an_http_url_with_a_host_and_a_bad_one_is_named() {
        for good in
            ["http://127.0.0.1:5000", "https://dynamodb.eu-west-1.amazonaws.com", "http://[::1]:9000/x", "http://moto"]
        {
            check("--x", good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad in ["127.0.0.1:5000", "ftp://host", "http://", "http://host:port", "http://[zz]:1", "http://a b"] {
            let err = check("--x (OPENQQ_X)", bad).unwrap_err().to_string();
            assert!(err.starts_with("--x (OPENQQ_X) must be an http:// or https:// URL"), "{bad}: {err}");
        }
    }
}
