//! Identifiers, validated once where they enter the system so the rest of the code can trust them.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdError {
    #[error("{what} must be 1 to {max} characters of letters, digits, '-', '_', '.' or ':'")]
    Malformed { what: &'static str, max: usize },
}

fn well_formed(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Longest accepted value, in bytes.
            pub const MAX_LEN: usize = $max;

            pub fn parse(s: impl Into<String>) -> Result<Self, IdError> {
                let s = s.into();
                if well_formed(&s, $max) { Ok(Self(s)) } else { Err(IdError::Malformed { what: $what, max: $max }) }
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
    TenantId, "tenant id", 64
);
id_type!(
    /// A design, created by the API on first submission (a UUIDv7, so ids sort by creation).
    DesignId, "design id", 64
);
id_type!(
    /// Ties together every log line, record and response caused by one request.
    CorrelationId, "correlation id", 128
);

impl DesignId {
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}

impl CorrelationId {
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
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
    fn ids_refuse_malformed_values_when_deserialised() {
        assert!(serde_json::from_str::<TenantId>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<TenantId>("\"not ok\"").is_err());
    }
}
