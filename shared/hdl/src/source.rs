//! What a job carries: HDL files with a top module, testbenches, and the target family; and the
//! checks on their shape (names, counts, sizes) made before anything is written to disk.

use crate::error::Refusal;
use crate::limits::Limits;
use serde::{Deserialize, Serialize};

pub use openqq_core::hdl::{is_identifier, is_safe_file_name, Source, SourceFile, Testbench};

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
    /// The family of a device the validator knows (`hx8k`, `LFE5U-25F`), if it knows it.
    pub fn of_device(device: &str) -> Option<Self> {
        Some(match openqq_fpga::Family::of_device(device)? {
            openqq_fpga::Family::Ice40(_) => Family::Ice40,
            openqq_fpga::Family::Ecp5(_) => Family::Ecp5,
        })
    }

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
const MAX_NAME_BYTES: usize = openqq_core::hdl::MAX_FILE_NAME_BYTES;

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
