//! Errors: what the tenant must change ([`Refusal`]) apart from what went wrong on the platform.
//!
//! A tool that runs and rejects the source (a syntax error, a failing testbench, a timeout) is not
//! an error here: it is a verdict in the report. An [`HdlError`] means no verdict could be given.

use thiserror::Error;

/// A request refused before any tool ran. Permanent: the same input is refused again, and the
/// message is meant for the tenant.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refusal {
    #[error("{count} files, more than the {max} allowed")]
    TooManyFiles { count: usize, max: usize },
    #[error("file {name} is {bytes} bytes, more than the {max} allowed")]
    FileTooLarge { name: String, bytes: usize, max: usize },
    #[error("the files together are {bytes} bytes, more than the {max} allowed")]
    TooMuchSource { bytes: usize, max: usize },
    #[error(
        "file name {name:?} is not allowed: use letters, digits, '_', '.' and '-', starting with a letter or \
         digit, without '..' and at most 64 bytes"
    )]
    BadFileName { name: String },
    #[error("file name {name} appears twice")]
    DuplicateFileName { name: String },
    #[error("file {name} contains a NUL byte; HDL source is text")]
    BinaryFile { name: String },
    #[error("top module {top:?} is not a plain Verilog identifier")]
    BadTopName { top: String },
    #[error("no file to compile: source file names end in .v or .sv")]
    NoSourceFiles,
    #[error("{file}:{line}: {construct} is not allowed: {reason}")]
    Forbidden { file: String, line: u32, construct: String, reason: String },
}

/// Why a check gave no verdict.
#[derive(Debug, Error)]
pub enum HdlError {
    /// The input was refused; nothing ran. The tenant's to fix, never retried.
    #[error("input refused: {0}")]
    Refused(#[from] Refusal),
    /// A tool is not installed (or not on `PATH`): a platform fault that a retry will not fix
    /// until the deployment is.
    #[error("{tool} is not installed or not on PATH")]
    ToolMissing { tool: &'static str },
    /// Starting a tool, or the work directory around it, failed: a platform fault, worth a retry.
    #[error("could not run {tool}")]
    Io {
        tool: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl HdlError {
    /// Whether the same request may succeed later (platform trouble) rather than never (the input).
    pub fn is_retriable(&self) -> bool {
        matches!(self, HdlError::Io { .. })
    }

    /// Whether the tenant caused the error (and should be told what to change).
    pub fn is_tenant_error(&self) -> bool {
        matches!(self, HdlError::Refused(_))
    }
}
