//! Where a webhook may point, checked where it is registered and again before each attempt:
//! only at public addresses, so a tenant cannot make the platform call its own network (the
//! cloud metadata service at 169.254.169.254, a database on 10.0.0.5, an admin port on
//! 127.0.0.1). [`check_target_url`] refuses what is wrong on its face: a scheme other than
//! http(s), a literal address outside the public ranges, a name that is local by definition
//! (`localhost`, `*.internal`, a single label). Names are checked again when they are resolved,
//! by the delivery client's resolver (`openqq_adapters::webhook::GuardedResolver`), against
//! [`is_public`].
//!
//! `allow_private` (development only: a receiver on the same machine) turns the address checks
//! off, not the scheme's.

use super::MAX_URL_BYTES;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::Url;

/// Names that never leave the machine or the site, whatever a resolver says.
const LOCAL_SUFFIXES: [&str; 5] = [".localhost", ".local", ".internal", ".home.arpa", ".localdomain"];

/// Whether `ip` is a public unicast address: not loopback, private, link-local, shared (CGNAT),
/// multicast, broadcast, unspecified, reserved or set aside for documentation and benchmarks;
/// IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by it.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0 // "this network", 0.0.0.0 among it
        || a == 10 // private
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || a == 127 // loopback
        || (a == 169 && b == 254) // link-local, the metadata service among it
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation (TEST-NET-1)
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 192 && b == 168) // private
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // documentation (TEST-NET-2)
        || (a == 203 && b == 0 && c == 113) // documentation (TEST-NET-3)
        || a >= 224; // multicast, reserved, and the broadcast address
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if s[..6] == [0; 6] {
        // `::`, `::1` and the deprecated IPv4-compatible form.
        return s[6] != 0 && is_public_v4(embedded(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 (RFC 6052): an IPv4 host seen from an IPv6-only network.
        return is_public_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        // 6to4: the IPv4 address follows the prefix.
        return is_public_v4(embedded(s[1], s[2]));
    }
    // Global unicast is 2000::/3; the rest (ULA fc00::/7, link-local fe80::/10, site-local,
    // multicast ff00::/8, discard 100::/64, local NAT64 64:ff9b:1::/48) is never public.
    let global = (s[0] & 0xe000) == 0x2000;
    // In 2001::/16: the IETF assignments 2001::/23 (Teredo, benchmarking, ORCHID) and the
    // documentation prefix 2001:db8::/32; and the documentation prefix 3fff::/20 (RFC 9637).
    let refused = (s[0] == 0x2001 && (s[1] < 0x0200 || s[1] == 0x0db8)) || (s[0] == 0x3fff && s[1] < 0x1000);
    global && !refused
}

/// Why a URL may not be a webhook's target. Each is a sentence for the tenant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookUrlError {
    #[error("a webhook URL is at most {max} bytes", max = MAX_URL_BYTES)]
    TooLong { bytes: usize },
    #[error("is not a URL")]
    NotAUrl(#[source] url::ParseError),
    #[error("a webhook URL is http or https")]
    Scheme { scheme: String },
    #[error("a webhook URL names a host")]
    NoHost,
    /// A literal address outside the public ranges, or a name that is local by definition.
    #[error("{host} is not a public address; webhooks reach public hosts only")]
    NotPublic { host: String },
}

/// Whether `url` may be a webhook's target: http or https, at most [`MAX_URL_BYTES`], with a
/// host; unless `allow_private`, a literal address must be public ([`is_public`]) and a name must
/// not be local by definition.
pub fn check_target_url(url: &str, allow_private: bool) -> Result<(), WebhookUrlError> {
    if url.len() > MAX_URL_BYTES {
        return Err(WebhookUrlError::TooLong { bytes: url.len() });
    }
    let parsed = Url::parse(url).map_err(WebhookUrlError::NotAUrl)?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(WebhookUrlError::Scheme { scheme: parsed.scheme().to_owned() });
    }
    check_url_host(&parsed, allow_private)
}

/// The host part of [`check_target_url`], for a URL parsed already.
pub fn check_url_host(url: &Url, allow_private: bool) -> Result<(), WebhookUrlError> {
    let refused = |host: String| Err(WebhookUrlError::NotPublic { host });
    match url.host() {
        None => Err(WebhookUrlError::NoHost),
        Some(_) if allow_private => Ok(()),
        Some(url::Host::Ipv4(ip)) if !is_public_v4(ip) => refused(ip.to_string()),
        Some(url::Host::Ipv6(ip)) if !is_public_v6(ip) => refused(ip.to_string()),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let local = name == "localhost" || LOCAL_SUFFIXES.iter().any(|s| name.ends_with(s));
            if local || !name.contains('.') {
                return refused(name);
            }
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn internal_and_reserved_ipv4_ranges_are_not_public() {
        for s in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.5",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.8.9.10",
            "169.254.169.254",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!is_public(ip(s)), "{s} is refused");
        }
    }

    #[test]
    fn public_ipv4_addresses_next_to_the_refused_ranges_are_public() {
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "126.255.255.255",
            "128.0.0.1",
            "169.253.1.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.0.1",
            "198.20.0.1",
            "203.0.114.1",
            "223.255.255.254",
        ] {
            assert!(is_public(ip(s)), "{s} is public");
        }
    }

    #[test]
    fn internal_ipv6_ranges_and_ipv6_forms_of_internal_ipv4_are_not_public() {
        for s in [
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::ffff:0:0",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
        ] {
            assert!(!is_public(ip(s)), "{s} is refused");
        }
    }

    #[test]
    fn public_ipv6_addresses_and_ipv6_forms_of_public_ipv4_are_public() {
        for s in [
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_public(ip(s)), "{s} is public");
        }
    }

    #[test]
    fn a_target_must_be_http_or_https_with_a_host() {
        assert!(check_target_url("https://hooks.example.com/in?x=1", false).is_ok());
        assert!(check_target_url("http://hooks.example.com:8080/in", false).is_ok());
        assert!(check_target_url("https://user:pass@hooks.example.com/in", false).is_ok());
        for bad in ["ftp://hooks.example.com/", "file:///etc/passwd", "hooks.example.com/in", "", "https://"] {
            assert!(check_target_url(bad, false).is_err(), "{bad}");
            assert!(check_target_url(bad, true).is_err(), "{bad} even when private targets are allowed");
        }
        let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_URL_BYTES));
        assert!(check_target_url(&long, true).unwrap_err().to_string().contains("at most"));
        let not_a_url = check_target_url("hooks.example.com/in", false).unwrap_err();
        assert!(matches!(not_a_url, WebhookUrlError::NotAUrl(_)), "{not_a_url:?}");
        assert!(std::error::Error::source(&not_a_url).is_some(), "the parse error is kept underneath");
    }

    #[test]
    fn a_target_at_an_internal_literal_address_is_refused_in_every_spelling() {
        for bad in [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.0.0.1./",
            "http://0x7f.1/",
            "http://[0:0:0:0:0:ffff:7f00:1]/",
            "http://0.0.0.0:8080/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.1.2.3/",
            "http://100.64.1.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
        ] {
            let refused = check_target_url(bad, false);
            assert!(
                refused.as_ref().is_err_and(|e| e.to_string().contains("not a public address")),
                "{bad}: {refused:?}"
            );
            assert!(check_target_url(bad, true).is_ok(), "{bad} is allowed when private targets are");
        }
        assert!(check_target_url("http://8.8.8.8/", false).is_ok());
        assert!(check_target_url("http://[2606:4700:4700::1111]/", false).is_ok());
    }

    #[test]
    fn a_target_named_as_local_is_refused() {
        for bad in [
            "http://localhost/",
            "http://LOCALHOST:8080/",
            "http://localhost./",
            "http://api.localhost/",
            "http://printer.local/",
            "http://metadata.google.internal/",
            "http://router.home.arpa/",
            "http://intranet/",
        ] {
            assert!(check_target_url(bad, false).is_err(), "{bad}");
            assert!(check_target_url(bad, true).is_ok(), "{bad} is allowed when private targets are");
        }
        assert!(check_target_url("https://localhost.example.com/", false).is_ok(), "only the suffix counts");
    }
}
