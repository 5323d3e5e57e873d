//! Where a stored object is: its digest and length, and the checks every object store makes
//! before it touches one.

use crate::error::{PortError, PortResult};

/// Largest object an object-store adapter accepts, in bytes (a full validation report of the
/// largest netlist the API accepts fits several times over).
pub const MAX_OBJECT_BYTES: usize = 64 * 1024 * 1024;

/// Where an object is: its SHA-256 (lower-case hex) and its length. Serialised as
/// `{"digest": "…", "bytes": n}` wherever a record or a report points at one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectRef {
    pub digest: String,
    pub bytes: u64,
}

impl ObjectRef {
    /// Whether `digest` has the form of a SHA-256 in lower-case hex (64 characters).
    pub fn well_formed(digest: &str) -> bool {
        digest.len() == 64 && digest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }

    /// Refuses a digest that is not [well formed](Self::well_formed), before it becomes part of
    /// a path or a key.
    pub fn check_digest(digest: &str) -> PortResult<()> {
        match Self::well_formed(digest) {
            true => Ok(()),
            false => Err(PortError::invalid("object digest", "it must be 64 lower-case hex characters")),
        }
    }

    /// Refuses an object of `bytes` over [`MAX_OBJECT_BYTES`].
    pub fn check_size(bytes: u64) -> PortResult<()> {
        match bytes <= MAX_OBJECT_BYTES as u64 {
            true => Ok(()),
            false => {
                Err(PortError::invalid("object", format!("its {bytes} bytes exceed the {MAX_OBJECT_BYTES}-byte limit")))
            }
        }
    }

    /// Refuses an upload whose length is `found`, not this object's.
    pub fn check_length(&self, found: u64) -> PortResult<()> {
        match found == self.bytes {
            true => Ok(()),
            false => Err(PortError::invalid("upload", format!("it is {found} bytes, not {}", self.bytes))),
        }
    }
}
