//! `openqq trace CORRELATION_ID`: one request's path through the API and the three consumer
//! functions, from the JSON log file `openqq up` keeps in its data dir
//! (`<data-dir>/logs/openqq.jsonl` and its rotated predecessors; see
//! `openqq_telemetry::log_file`). Each line that names the correlation id is a row: when, which
//! function, the record's event kind, partition and offset, how long it took and how it ended
//! (applied, retried, dead-lettered); dead letters are listed under the table.
//!
//! `--aws` prints the CloudWatch Logs Insights query that finds the same lines in the four
//! functions' log groups instead. The file is only read, so a trace works while `openqq up` runs.

use crate::trace_format::{aws_instructions, in_time_order, parse, table, to_json, Hop};
use anyhow::{bail, Context, Result};
use clap::Args;
use openqq_core::CorrelationId;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Longest log line read; a longer one (nothing the platform writes) is skipped.
const MAX_LINE_BYTES: u64 = 1024 * 1024;

/// Most lines of one correlation id kept; a request replayed in a loop stops here.
const MAX_HOPS: usize = 10_000;

#[derive(Args)]
pub struct TraceArgs {
    /// The correlation id: the `x-correlation-id` a client sent or the API returned.
    correlation_id: String,
    /// The data dir of `openqq up` whose log file is read.
    #[arg(long, env = "OPENQQ_DATA_DIR", default_value = ".openqq")]
    data_dir: PathBuf,
    /// Print the trace as one JSON document instead of a table.
    #[arg(long)]
    json: bool,
    /// Print the CloudWatch Logs Insights query that traces the id on AWS instead.
    #[arg(long)]
    aws: bool,
    /// With --aws: the CloudFormation stack, whose name starts the functions' log groups.
    #[arg(long, default_value = "openqq", requires = "aws")]
    stack: String,
}

pub fn run(args: TraceArgs) -> Result<()> {
    let id = CorrelationId::parse(&args.correlation_id)
        .map_err(|e| anyhow::anyhow!("{:?} is not a correlation id: {e}", args.correlation_id))?;
    if args.aws {
        print!("{}", aws_instructions(id.as_str(), &args.stack));
        return Ok(());
    }
    let dir = openqq_telemetry::log_file::dir_of(&args.data_dir);
    let files = openqq_telemetry::log_file::files(&dir);
    if files.is_empty() {
        bail!(
            "{} holds no log file: is --data-dir that of `openqq up`? (it writes {} once it starts)",
            args.data_dir.display(),
            dir.join(openqq_telemetry::log_file::FILE_NAME).display()
        );
    }
    let (hops, truncated) = read_hops(&files, id.as_str())?;
    let hops = in_time_order(hops);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(id.as_str(), &hops))?);
    } else {
        print!("{}", table(id.as_str(), &hops));
        if hops.is_empty() {
            println!(
                "(searched {}; the logs keep the newest {} MiB)",
                files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "),
                openqq_telemetry::log_file::MAX_TOTAL_BYTES / (1024 * 1024)
            );
        }
    }
    if truncated {
        eprintln!("warning: more than {MAX_HOPS} lines name this id; only the first {MAX_HOPS} were read");
    }
    Ok(())
}

/// Every line of `files` (oldest first) that names `id`, up to [`MAX_HOPS`]; whether more were left.
fn read_hops(files: &[PathBuf], id: &str) -> Result<(Vec<Hop>, bool)> {
    let mut hops = Vec::new();
    for path in files {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            // Rotated away between listing and opening: its lines are in the next file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
        };
        if scan(BufReader::new(file), path, id, &mut hops)? {
            return Ok((hops, true));
        }
    }
    Ok((hops, false))
}

/// Adds the lines of one file that name `id` to `hops`; true once [`MAX_HOPS`] is reached.
fn scan(mut reader: impl BufRead, path: &Path, id: &str, hops: &mut Vec<Hop>) -> Result<bool> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {}", path.display()))?;
        if read == 0 {
            return Ok(false);
        }
        if !line.ends_with(b"\n") && read as u64 == MAX_LINE_BYTES {
            // Skip the rest of an overlong line.
            reader.skip_until(b'\n').with_context(|| format!("reading {}", path.display()))?;
            continue;
        }
        if let Some(hop) = std::str::from_utf8(&line).ok().and_then(|l| parse(l.trim_end(), id)) {
            hops.push(hop);
            if hops.len() >= MAX_HOPS {
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlong_line_is_skipped_and_the_lines_after_it_are_read() {
        let good = r#"{"timestamp":"2026-01-01T00:00:00.000000Z","level":"INFO","message":"m","correlation_id":"c-1","function":"api"}"#;
        let long = format!("{}\n", "x".repeat(MAX_LINE_BYTES as usize + 10));
        let text = format!("{good}\n{long}{good}\n");
        let mut hops = Vec::new();
        let full = scan(text.as_bytes(), Path::new("f"), "c-1", &mut hops).unwrap();
        assert!(!full);
        assert_eq!(hops.len(), 2);
    }
}
