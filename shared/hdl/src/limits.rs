//! The bounds every tool run keeps to, whatever the source asks for.

use std::time::Duration;

/// How much input is accepted and how much each tool run may use. Every field bounds something a
/// hostile source could otherwise make unbounded; [`Limits::default`] is the platform's setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Files in one [`crate::Source`] (or testbench); more are refused before any tool runs.
    pub max_files: usize,
    /// Bytes in one submitted file; a larger file is refused by name before any tool runs.
    pub max_file_bytes: usize,
    /// Bytes in all the files of one request together (design, testbench and reference).
    pub max_total_bytes: usize,
    /// Wall-clock time of one tool run; when it passes, the run's whole process group is killed.
    pub timeout: Duration,
    /// CPU seconds of each process of a tool run (`RLIMIT_CPU`), a second fence behind `timeout`.
    pub cpu_seconds: u64,
    /// Address space of each process (`RLIMIT_AS`): a source that asks for a huge memory or
    /// unrolls without end fails to allocate instead of taking the machine's memory.
    pub memory_bytes: u64,
    /// Largest file a tool may write (`RLIMIT_FSIZE`): netlists, simulator images, dumps.
    pub max_written_file_bytes: u64,
    /// Bytes a failing testbench's waveform run may dump (Icarus `$dumplimit`); kept under
    /// `max_written_file_bytes`, whose signal would only end the run sooner.
    pub max_dump_bytes: u64,
    /// Bytes of a failing testbench's waveform kept in its report: the dump cut to a window
    /// around the first failure.
    pub max_waveform_bytes: usize,
    /// Bytes of stdout and stderr read from one run; past it the run is killed (a testbench that
    /// prints without end gets the output-budget verdict).
    pub max_output_bytes: usize,
    /// Time steps of the bounded check from the all-zero state, for sequential designs.
    pub equivalence_depth: u32,
    /// Longest induction tried to turn the bounded check into a proof.
    pub induction_length: u32,
    /// Findings kept from one tool run; the count of the rest is reported.
    pub max_findings: usize,
    /// Bytes kept of one message (a finding, a failure line); longer ones end in `…`.
    pub max_message_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_files: 32,
            max_file_bytes: 256 * 1024,
            max_total_bytes: 1024 * 1024,
            timeout: Duration::from_secs(60),
            cpu_seconds: 60,
            memory_bytes: 2 * 1024 * 1024 * 1024,
            max_written_file_bytes: 64 * 1024 * 1024,
            max_dump_bytes: 16 * 1024 * 1024,
            max_waveform_bytes: 256 * 1024,
            max_output_bytes: 1024 * 1024,
            equivalence_depth: 10,
            induction_length: 8,
            max_findings: 100,
            max_message_bytes: 512,
        }
    }
}
