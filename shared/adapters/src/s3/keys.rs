//! Where things are in the bucket, and the bucket-name check. (A digest is checked before it
//! becomes part of a key by `ObjectRef::check_digest`, which every object store calls.)
//!
//! | what                         | key                           |
//! |------------------------------|-------------------------------|
//! | a tenant's object            | `objects/{tenant}/{sha256}`   |
//! | an upload not yet adopted    | `uploads/{tenant}/{sha256}`   |
//!
//! Tenant ids are lower-case letters, digits, `-`, `_`, `.` and `:`, beginning with a letter or
//! digit (`openqq_core::TENANT_ID_GRAMMAR`): never a `/`, so `objects/{tenant}/` is a prefix of
//! that tenant's keys and of no other tenant's, and never `.` or `..`. Leading dots are escaped
//! as `%2E` all the same, as the embedded store names its directories, so not even an id from
//! before the grammar makes a key a proxy or an HTTP library might read as a path step; `%`
//! never occurs in an id, so the mapping stays one to one.

use base64::Engine;
use openqq_core::TenantId;

/// The prefix of stored objects.
pub const OBJECTS: &str = "objects/";
/// The prefix of direct uploads not yet adopted; the bucket's lifecycle rule expires them.
pub const UPLOADS: &str = "uploads/";

/// The tenant's part of a key: its id with leading dots escaped.
pub(crate) fn tenant_segment(tenant: &TenantId) -> String {
    escaped(tenant.as_str())
}

/// `id` with its leading dots escaped as `%2E`.
fn escaped(id: &str) -> String {
    let dots = id.len() - id.trim_start_matches('.').len();
    format!("{}{}", "%2E".repeat(dots), &id[dots..])
}

/// `{area}{tenant}/`: every key of `tenant` in `area` ([`OBJECTS`] or [`UPLOADS`]).
pub(crate) fn tenant_prefix(area: &str, tenant: &TenantId) -> String {
    format!("{area}{}/", tenant_segment(tenant))
}

/// The key of `tenant`'s object `digest` in `area`.
pub(crate) fn key(area: &str, tenant: &TenantId, digest: &str) -> String {
    format!("{}{digest}", tenant_prefix(area, tenant))
}

/// The digest as S3 writes SHA-256 checksums (`x-amz-checksum-sha256`): base64 of the 32 bytes.
/// `digest` must be well formed.
pub(crate) fn checksum_of(digest: &str) -> String {
    let bytes: Vec<u8> = (0..digest.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digest[i..i + 2], 16).expect("a well-formed digest is hex"))
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Whether `name` is a bucket name S3 accepts for new buckets: 3 to 63 lower-case letters,
/// digits, `.` and `-`, beginning and ending with a letter or digit, no `..`.
pub fn valid_bucket_name(name: &str) -> bool {
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (3..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
        && edge(name.as_bytes().first())
        && edge(name.as_bytes().last())
        && !name.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str) -> TenantId {
        TenantId::parse(id).unwrap()
    }

    #[test]
    fn keys_follow_the_documented_layout() {
        let d = "ab".repeat(32);
        assert_eq!(key(OBJECTS, &t("acme"), &d), format!("objects/acme/{d}"));
        assert_eq!(key(UPLOADS, &t("acme:eu"), &d), format!("uploads/acme:eu/{d}"));
    }

    #[test]
    fn no_tenant_id_reaches_another_prefix_or_a_path_step() {
        let ids = ["a", "ab", "a.", "a..b", "a:b", "a-b", "a_b"];
        let mut prefixes = std::collections::BTreeSet::new();
        for id in ids.iter().map(|id| t(id)) {
            let prefix = tenant_prefix(OBJECTS, &id);
            let segment = &prefix[OBJECTS.len()..prefix.len() - 1];
            assert!(!segment.is_empty() && !segment.contains('/'), "{id}: {prefix}");
            assert!(prefixes.insert(prefix.clone()), "{id} shares its prefix with another id");
        }
        // A prefix is never the beginning of another tenant's prefix: `a/` is not in `ab/`.
        for a in &prefixes {
            for b in &prefixes {
                assert!(a == b || !b.starts_with(a.as_str()), "{a} is a prefix of {b}");
            }
        }
        for refused in [".", "..", "%2E", "A", "a/b"] {
            assert!(TenantId::parse(refused).is_err(), "{refused} is no tenant id");
        }
    }

    #[test]
    fn leading_dots_are_escaped_so_no_name_is_a_path_step() {
        // The grammar refuses these as tenant ids; the escaping holds for them all the same.
        for (id, segment) in
            [(".", "%2E"), ("..", "%2E%2E"), ("...", "%2E%2E%2E"), ("..a", "%2E%2Ea"), ("a..b", "a..b")]
        {
            assert_eq!(escaped(id), segment, "{id}");
        }
    }

    #[test]
    fn the_checksum_is_the_base64_of_the_digest_bytes() {
        // SHA-256 of no bytes, as S3 gives it.
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(checksum_of(empty), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }

    #[test]
    fn bucket_names_are_checked_as_s3_checks_them() {
        for ok in ["abc", "openqq-objects", "a.b-c.1", &"a".repeat(63)] {
            assert!(valid_bucket_name(ok), "{ok}");
        }
        for bad in ["", "ab", "Upper", "has_underscore", "-lead", "trail-", "a..b", &"a".repeat(64), "a b"] {
            assert!(!valid_bucket_name(bad), "{bad}");
        }
    }
}
