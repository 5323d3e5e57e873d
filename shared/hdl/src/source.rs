//! What a job carries: HDL files with a top module, testbenches, and the target family; and the
//! checks on their shape (names, counts, sizes) made before anything is written to disk.

use crate::error::Refusal;
use crate::limits::Limits;
use serde::{Deserialize, Serialize};

/// One submitted file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    /// File name, no directories: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 64 bytes, no `..`.
    /// Names ending in `.v` or `.sv` are compiled; others (`.vh`, `.svh`, `.mem`, `.hex`, …)
    /// are only written beside them, for `` `include `` and `$readmemh`.
    pub name: String,
    /// The file's text.
    pub text: String,
}

impl SourceFile {
    /// A file from its name and text.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        SourceFile { name: name.into(), text: text.into() }
    }

    /// Whether the tools are given this file to compile (`.v`, `.sv`), rather than only finding
    /// it through an include or a memory load.
    pub fn is_compiled(&self) -> bool {
        self.name.ends_with(".v") || self.name.ends_with(".sv")
    }
}

/// A design as HDL source: its files and the name of its top module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The files, compiled in this order.
    pub files: Vec<SourceFile>,
    /// The top module, a plain Verilog identifier.
    pub top: String,
}

/// A testbench: files compiled after the design's, with its own top module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Testbench {
    /// A name for the report (the tenant's label for this testbench).
    pub name: String,
    /// The testbench's files; their names must not repeat the design's.
    pub files: Vec<SourceFile>,
    /// The testbench's top module, which instantiates the design.
    pub top: String,
}

/// The FPGA family a design is synthesised for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Lattice iCE40 (`synth_ice40`).
    Ice40,
    /// Lattice ECP5 (`synth_ecp5`).
    Ecp5,
}

impl Family {
    /// The Yosys synthesis command for the family.
    pub fn synth_command(self) -> &'static str {
        match self {
            Family::Ice40 => "synth_ice40",
            Family::Ecp5 => "synth_ecp5",
        }
    }

    /// The family's name (`iCE40`, `ECP5`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Ice40 => "iCE40",
            Family::Ecp5 => "ECP5",
        }
    }
}

/// The longest file name accepted.
const MAX_NAME_BYTES: usize = 64;
/// The longest top-module name accepted.
const MAX_TOP_BYTES: usize = 128;

/// Whether `name` may be a file name in the work directory: it cannot leave the directory, name a
/// hidden or generated file (those start with `_`), or carry anything a shell or a Yosys script
/// would read as syntax.
pub fn is_safe_file_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAME_BYTES
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && !name.contains("..")
}

/// Whether `top` is a plain Verilog identifier, which is all that may reach a tool's command line
/// or script.
pub fn is_identifier(top: &str) -> bool {
    let bytes = top.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_TOP_BYTES
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

/// Checks the shape of the file sets one request writes together (names, counts, sizes, the
/// tops), so that nothing oversized or misnamed is written and no tool starts on it.
pub(crate) fn check_shape(sets: &[(&[SourceFile], &str)], limits: &Limits) -> Result<(), Refusal> {
    let mut total = 0usize;
    for &(files, top) in sets {
        if !is_identifier(top) {
            return Err(Refusal::BadTopName { top: clip_name(top) });
        }
        if files.len() > limits.max_files {
            return Err(Refusal::TooManyFiles { count: files.len(), max: limits.max_files });
        }
        if !files.iter().any(SourceFile::is_compiled) {
            return Err(Refusal::NoSourceFiles);
        }
        for file in files {
            if !is_safe_file_name(&file.name) {
                return Err(Refusal::BadFileName { name: clip_name(&file.name) });
            }
            if file.text.len() > limits.max_file_bytes {
                return Err(Refusal::FileTooLarge {
                    name: file.name.clone(),
                    bytes: file.text.len(),
                    max: limits.max_file_bytes,
                });
            }
            if file.text.as_bytes().contains(&0) {
                return Err(Refusal::BinaryFile { name: file.name.clone() });
            }
            total += file.text.len();
        }
        for (i, file) in files.iter().enumerate() {
            if files[..i].iter().any(|f| f.name == file.name) {
                return Err(Refusal::DuplicateFileName { name: file.name.clone() });
            }
        }
    }
    if total > limits.max_total_bytes {
        return Err(Refusal::TooMuchSource { bytes: total, max: limits.max_total_bytes });
    }
    Ok(())
}

/// A name from the input, shortened for an error message.
pub(crate) fn clip_name(name: &str) -> String {
    crate::findings::clip(name, MAX_NAME_BYTES * 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_that_could_leave_the_directory_are_not_safe() {
        for bad in
            ["", "../x.v", "a/b.v", "/etc/passwd", "..", "a..v", ".hidden.v", "_gen.v", "a b.v", "a;b.v", "x\n.v"]
        {
            assert!(!is_safe_file_name(bad), "{bad:?}");
        }
        for good in ["design.v", "tb.sv", "defs.vh", "rom-0.hex", "A_1.v"] {
            assert!(is_safe_file_name(good), "{good:?}");
        }
        assert!(!is_safe_file_name(&"a".repeat(65)));
    }

    #[test]
    fn tops_must_be_plain_identifiers() {
        assert!(is_identifier("counter"));
        assert!(is_identifier("_tb$1"));
        for bad in ["", "1abc", "a b", "top; shell rm", "\\esc", "a-b"] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_file_over_the_size_limit_is_refused_by_name() {
        let limits = Limits { max_file_bytes: 10, ..Limits::default() };
        let files = vec![SourceFile::new("big.v", "x".repeat(11))];
        let err = check_shape(&[(&files, "top")], &limits).unwrap_err();
        assert!(matches!(err, Refusal::FileTooLarge { ref name, bytes: 11, max: 10 } if name == "big.v"));
    }

    #[test]
    fn repeated_names_and_too_many_files_are_refused() {
        let limits = Limits { max_files: 2, ..Limits::default() };
        let twice = vec![SourceFile::new("a.v", ""), SourceFile::new("a.v", "")];
        assert!(matches!(check_shape(&[(&twice, "t")], &limits), Err(Refusal::DuplicateFileName { .. })));
        let three = vec![SourceFile::new("a.v", ""), SourceFile::new("b.v", ""), SourceFile::new("c.v", "")];
        assert!(matches!(check_shape(&[(&three, "t")], &limits), Err(Refusal::TooManyFiles { count: 3, max: 2 })));
        let none = vec![SourceFile::new("a.vh", "")];
        assert!(matches!(check_shape(&[(&none, "t")], &limits), Err(Refusal::NoSourceFiles)));
    }
}
