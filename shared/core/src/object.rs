//! Where a stored object is: its digest and length.

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
}
