//! Identifiers, validated once where they enter the system so the rest of the code can trust them.
//!
//! A tenant id follows one grammar, [`TENANT_ID_GRAMMAR`]: 1 to 64 characters of lower-case
//! letters, digits, `-`, `_`, `.` and `:`, beginning with a letter or a digit. It names a
//! directory of the embedded object store and a segment of S3 keys, Redis keys and DynamoDB
//! keys, so it can never be a path step (`.`, `..`), hide a file (a leading dot), hold a
//! separator those keys use (`/`, `#`, `{`, `}`) or differ from another tenant's only by case
//! (which a case-insensitive file system would merge).

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdError {
    #[error("{what} must be 1 to {max} characters of letters, digits, '-', '_', '.' or ':'")]
    Malformed { what: &'static str, max: usize },
    #[error(
        "a tenant id is 1 to 64 lower-case letters, digits, '-', '_', '.' or ':', beginning with a letter or digit"
    )]
    BadTenant,
    #[error("a design id is a UUID (RFC 4122 text form)")]
    NotUuid,
    #[error("an idempotency key must be 1 to {max} visible ASCII characters")]
    BadIdempotencyKey { max: usize },
}

fn well_formed(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// The grammar of tenant ids, as a regular expression (the API contract's pattern says the same).
pub const TENANT_ID_GRAMMAR: &str = "^[a-z0-9][a-z0-9._:-]{0,63}$";

/// Whether `s` follows [`TENANT_ID_GRAMMAR`].
fn tenant_well_formed(s: &str) -> Result<(), IdError> {
    let mut bytes = s.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if first_ok && rest_ok && s.len() <= TenantId::MAX_LEN {
        Ok(())
    } else {
        Err(IdError::BadTenant)
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:literal) => {
        id_type!($(#[$doc])* $name, $max, |s: &str| if well_formed(s, $max) {
            Ok(())
        } else {
            Err(IdError::Malformed { what: $what, max: $max })
        });
    };
    ($(#[$doc:meta])* $name:ident, $max:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Longest accepted value, in bytes.
            pub const MAX_LEN: usize = $max;

            pub fn parse(s: impl Into<String>) -> Result<Self, IdError> {
                let s = Self::canonical(s.into());
                let check: fn(&str) -> Result<(), IdError> = $check;
                check(&s).map(|()| Self(s))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// A tenant, taken from the `tenant_id` claim of a verified token. It is also the record key.
    /// Its grammar is [`TENANT_ID_GRAMMAR`] (see the module documentation).
    TenantId, 64, tenant_well_formed
);
id_type!(
    /// A design, created by the API on first submission (a UUIDv7, so ids sort by creation).
    DesignId, "design id", 64
);
id_type!(
    /// Ties together every log line, record and response caused by one request.
    CorrelationId, "correlation id", 128
);

impl TenantId {
    fn canonical(s: String) -> String {
        s
    }
}

impl CorrelationId {
    fn canonical(s: String) -> String {
        s
    }

    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}

impl DesignId {
    /// A UUID in any RFC 4122 text form (hyphenated, simple, `urn:uuid:`, braced, any case) names
    /// one design: it is kept in one canonical form, lower-case and hyphenated, so every way of
    /// writing it reaches the same design. Other ids (fixtures, internal tools) are kept as given.
    fn canonical(s: String) -> String {
        match uuid::Uuid::try_parse(&s) {
            Ok(u) => u.hyphenated().to_string(),
            Err(_) => s,
        }
    }

    pub fn generate() -> Self {
        Self::from_uuid(uuid::Uuid::now_v7())
    }

    pub fn from_uuid(id: uuid::Uuid) -> Self {
        Self(id.hyphenated().to_string())
    }

    /// A design id as a client writes it: a UUID in any RFC 4122 text form, canonicalised.
    /// Anything else cannot name a design the API handed out.
    pub fn parse_uuid(s: &str) -> Result<Self, IdError> {
        uuid::Uuid::try_parse(s).map(Self::from_uuid).map_err(|_| IdError::NotUuid)
    }
}

/// The `Idempotency-Key` a client sends with a POST: 1 to [`IdempotencyKey::MAX_LEN`] visible
/// ASCII characters (`!` to `~`), compared exactly. Scoped to the tenant that sent it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Longest accepted key, in bytes.
    pub const MAX_LEN: usize = 255;

    pub fn parse(s: &str) -> Result<Self, IdError> {
        if !s.is_empty() && s.len() <= Self::MAX_LEN && s.bytes().all(|b| b.is_ascii_graphic()) {
            Ok(Self(s.to_owned()))
        } else {
            Err(IdError::BadIdempotencyKey { max: Self::MAX_LEN })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_id_is_accepted_and_a_malformed_one_is_refused() {
        assert!(TenantId::parse("acme-1").is_ok());
        assert!(TenantId::parse("").is_err());
        assert!(TenantId::parse("a b").is_err());
        assert!(TenantId::parse("x".repeat(65)).is_err());
        assert!(CorrelationId::parse("req:42.a_b-c").is_ok());
        assert!(CorrelationId::parse("drop table;").is_err());
    }

    #[test]
    fn a_tenant_id_follows_its_grammar_and_nothing_else() {
        for ok in ["acme", "a", "0", "acme-1", "acme_eu", "acme.eu", "org:42", "a..b", "a.", &"x".repeat(64)] {
            assert!(TenantId::parse(ok).is_ok(), "{ok}");
        }
        let refused = [
            "",
            ".",
            "..",
            "...",
            ".hidden",
            "..a",
            "-lead",
            "_lead",
            ":lead",
            "Acme",
            "ACME",
            "a/b",
            "a\\b",
            "a#b",
            "{a}",
            "a b",
            "a%2E",
            "caf\u{e9}",
            "a\n",
        ];
        for bad in refused.iter().map(|s| s.to_string()).chain(["x".repeat(65)]) {
            assert_eq!(TenantId::parse(bad.clone()), Err(IdError::BadTenant), "{bad:?}");
        }
        assert!(IdError::BadTenant.to_string().contains("lower-case"), "the refusal states the grammar");
    }

    #[test]
    fn every_text_form_of_one_uuid_names_the_same_design() {
        let canonical = "01a227d4-fb0d-7377-abd1-e342a03ff5cd";
        for form in [
            canonical,
            "01A227D4-FB0D-7377-ABD1-E342A03FF5CD",
            "01a227d4fb0d7377abd1e342a03ff5cd",
            "urn:uuid:01a227d4-fb0d-7377-abd1-e342a03ff5cd",
            "URN:UUID:01A227D4-FB0D-7377-ABD1-E342A03FF5CD",
            "{01a227d4-fb0d-7377-abd1-e342a03ff5cd}",
        ] {
            assert_eq!(DesignId::parse(form).unwrap().as_str(), canonical, "{form}");
            assert_eq!(DesignId::parse_uuid(form).unwrap().as_str(), canonical, "{form}");
            assert_eq!(serde_json::from_str::<DesignId>(&format!("{form:?}")).unwrap().as_str(), canonical);
        }
        assert_eq!(DesignId::parse_uuid("nope"), Err(IdError::NotUuid));
        assert_eq!(DesignId::parse("d-fixture").unwrap().as_str(), "d-fixture", "non-UUID ids are kept as given");
    }

    #[test]
    fn idempotency_keys_are_one_to_255_visible_ascii_characters() {
        assert!(IdempotencyKey::parse("8e03978e-40d5-43e8-bc93-6894a57f9324").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse("has space").is_err());
        assert!(IdempotencyKey::parse("caf\u{e9}").is_err());
    }

    #[test]
    fn ids_refuse_malformed_values_when_deserialised() {
        assert!(serde_json::from_str::<TenantId>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<TenantId>("\"not ok\"").is_err());
    }
}
