//! Designs as HDL source: the files a job carries instead of a netlist (`source`), its
//! testbenches (`tests`) and the reference it must equal (`reference`), with the checks on their
//! shape that need no tool (names, counts, sizes). What the tools then find is `openqq-hdl`'s.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// One submitted file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The files, compiled in this order.
    pub files: Vec<SourceFile>,
    /// The top module, a plain Verilog identifier.
    pub top: String,
}

/// A testbench: files compiled after the design's, with its own top module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Testbench {
    /// A name for the report (the tenant's label for this testbench).
    pub name: String,
    /// The testbench's files; their names must not repeat the design's.
    pub files: Vec<SourceFile>,
    /// The testbench's top module, which instantiates the design.
    pub top: String,
}

/// The longest file name accepted.
pub const MAX_FILE_NAME_BYTES: usize = 64;
/// The longest top-module name accepted.
pub const MAX_TOP_BYTES: usize = 128;
/// Files in one source, testbench or reference.
pub const MAX_FILES: usize = 32;
/// Testbenches in one job.
pub const MAX_TESTS: usize = 16;
/// Bytes of all the HDL files of one job together (source, testbenches, reference), as text.
/// They travel inline in the job's records, which stay under
/// [`crate::design::MAX_DESIGN_RECORD_BYTES`] beside a constraints file of at most
/// [`crate::design::INLINE_PAYLOAD_MAX_BYTES`].
pub const MAX_HDL_BYTES: usize = 40 * 1024;

/// Whether `name` may be a file name in a tool's work directory: it cannot leave the directory,
/// name a hidden or generated file (those start with `_`), or carry anything a shell or a Yosys
/// script would read as syntax.
pub fn is_safe_file_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_FILE_NAME_BYTES
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

/// Checks one set of files with its top module (`field` names it in the error: `source`,
/// `tests[0]`, `reference`); answers the set's bytes.
pub fn check_set(field: &str, files: &[SourceFile], top: &str) -> Result<usize, (String, String)> {
    let err = |sub: &str, message: String| Err((format!("{field}{sub}"), message));
    if !is_identifier(top) {
        return err(".top", format!("must be a Verilog identifier of at most {MAX_TOP_BYTES} bytes"));
    }
    if files.is_empty() || files.len() > MAX_FILES {
        return err(".files", format!("must hold 1 to {MAX_FILES} files"));
    }
    if !files.iter().any(SourceFile::is_compiled) {
        return err(".files", "must hold at least one .v or .sv file".into());
    }
    let mut bytes = 0;
    for (i, file) in files.iter().enumerate() {
        if !is_safe_file_name(&file.name) {
            return err(
                &format!(".files[{i}].name"),
                format!(
                    "must be 1 to {MAX_FILE_NAME_BYTES} letters, digits, '_', '.' or '-', starting with a letter \
                     or digit, without '..'"
                ),
            );
        }
        if files[..i].iter().any(|f| f.name == file.name) {
            return err(&format!(".files[{i}].name"), format!("{} is given twice", file.name));
        }
        if file.text.contains('\0') {
            return err(&format!(".files[{i}].text"), "must be text (it holds a NUL byte)".into());
        }
        bytes += file.text.len();
    }
    Ok(bytes)
}

/// A design to be written by a model: the tenant's prompt, the top module's name when the tenant
/// fixes it, and how many attempts the repair loop may make (each later attempt is told why the
/// last failed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generate {
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
}

/// The longest prompt accepted, in bytes.
pub const MAX_PROMPT_BYTES: usize = 8 * 1024;
/// The most attempts a job may ask for (a deployment may cap it lower).
pub const MAX_ATTEMPTS: u32 = 10;
/// Attempts when the job does not say.
pub const DEFAULT_ATTEMPTS: u32 = 3;

impl Generate {
    /// The prompt's, top's and attempts' bounds; the error is the field and why.
    pub fn check(&self) -> Result<(), (String, String)> {
        let err = |field: &str, message: String| Err((format!("generate.{field}"), message));
        if self.prompt.trim().is_empty() || self.prompt.len() > MAX_PROMPT_BYTES {
            return err("prompt", format!("must be 1 to {MAX_PROMPT_BYTES} bytes"));
        }
        if self.top.as_deref().is_some_and(|t| !is_identifier(t)) {
            return err("top", format!("must be a Verilog identifier of at most {MAX_TOP_BYTES} bytes"));
        }
        if self.max_attempts.is_some_and(|n| n == 0 || n > MAX_ATTEMPTS) {
            return err("max_attempts", format!("must be 1 to {MAX_ATTEMPTS}"));
        }
        Ok(())
    }
}

/// What the HDL checks of a revision found, as the synthesis function hands it to validation:
/// whether every check passed, and the checks' report (`synthesis`, `simulation`, `equivalence`),
/// which becomes the `checks` section of the design's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HdlChecks {
    pub passed: bool,
    pub report: Box<RawValue>,
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
    fn a_set_is_refused_with_the_field_that_is_wrong() {
        let ok = [SourceFile::new("a.v", "module a; endmodule")];
        assert_eq!(check_set("source", &ok, "a"), Ok(19));
        let field = |files: &[SourceFile], top: &str| check_set("tests[1]", files, top).unwrap_err().0;
        assert_eq!(field(&ok, "1a"), "tests[1].top");
        assert_eq!(field(&[], "a"), "tests[1].files");
        assert_eq!(field(&[SourceFile::new("a.vh", "")], "a"), "tests[1].files");
        assert_eq!(field(&[ok[0].clone(), SourceFile::new("../b.v", "")], "a"), "tests[1].files[1].name");
        assert_eq!(field(&[ok[0].clone(), ok[0].clone()], "a"), "tests[1].files[1].name");
        assert_eq!(field(&[SourceFile::new("a.v", "\0")], "a"), "tests[1].files[0].text");
    }
}
