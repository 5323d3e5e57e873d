//! `openqq validate`: the validator on files. Exit 0: no error findings; 1: error findings;
//! 2: usage error or an unreadable file.

use clap::{Args, ValueEnum};
use openqq_fpga::{FileNames, Input};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Args)]
pub struct ValidateArgs {
    /// Device: an iCE40 part as nextpnr names it (hx8k, lp384, up5k, …) or an ECP5 part
    /// (LFE5U-25F, LFE5UM5G-85F, …).
    #[arg(long)]
    device: String,
    /// Package (ct256, sg48, …; CABGA256, CSFBGA285, …).
    #[arg(long)]
    package: String,
    /// Yosys JSON netlist (`write_json`).
    #[arg(long)]
    netlist: PathBuf,
    /// PCF pin constraints (iCE40).
    #[arg(long, conflicts_with = "lpf")]
    pcf: Option<PathBuf>,
    /// LPF constraints (ECP5).
    #[arg(long)]
    lpf: Option<PathBuf>,
    /// Bitstream (iCE40 .bin, ECP5 .bit).
    #[arg(long)]
    bitstream: Option<PathBuf>,
    /// Top module, when the netlist does not mark one.
    #[arg(long)]
    top: Option<String>,
    /// Report unconstrained ports as warnings instead of errors.
    #[arg(long)]
    allow_unconstrained: bool,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// Largest input file read, in bytes.
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Why an input file could not be read.
#[derive(Debug, thiserror::Error)]
enum InputError {
    #[error("cannot read {}", .path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is larger than {MAX_FILE_BYTES} bytes", .path.display())]
    TooLarge { path: PathBuf },
    #[error("{} is not UTF-8 text", .path.display())]
    NotText {
        path: PathBuf,
        #[source]
        source: std::string::FromUtf8Error,
    },
}

fn read(path: &PathBuf) -> Result<Vec<u8>, InputError> {
    let unreadable = |source| InputError::Unreadable { path: path.clone(), source };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(InputError::TooLarge { path: path.clone() });
    }
    std::fs::read(path).map_err(unreadable)
}

fn text(path: &PathBuf) -> Result<String, InputError> {
    String::from_utf8(read(path)?).map_err(|source| InputError::NotText { path: path.clone(), source })
}

/// The constraints flag given is not the one the device's family reads.
#[derive(Debug, thiserror::Error)]
#[error("{device} is an {family} part: give its constraints with {wanted}, not {given}")]
struct ConstraintsFlagError {
    device: String,
    family: &'static str,
    wanted: String,
    given: &'static str,
}

/// The constraints file given, after checking it is the format the device's family reads.
fn constraints_path(args: &ValidateArgs) -> Result<Option<&PathBuf>, ConstraintsFlagError> {
    let (flag, path) = match (&args.pcf, &args.lpf) {
        (Some(p), _) => ("--pcf", p),
        (None, Some(p)) => ("--lpf", p),
        (None, None) => return Ok(None),
    };
    if let Some(family) = openqq_fpga::Family::of_device(&args.device) {
        let wanted = format!("--{}", family.constraint_format());
        if flag != wanted {
            return Err(ConstraintsFlagError {
                device: args.device.clone(),
                family: family.name(),
                wanted,
                given: flag,
            });
        }
    }
    Ok(Some(path))
}

pub fn run(args: ValidateArgs) -> ExitCode {
    let constraints = match constraints_path(&args) {
        Ok(path) => path,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let loaded = (|| -> Result<_, InputError> {
        Ok((text(&args.netlist)?, constraints.map(text).transpose()?, args.bitstream.as_ref().map(read).transpose()?))
    })();
    let (netlist, pcf, bitstream) = match loaded {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {}", openqq_core::error::with_causes(&e));
            return ExitCode::from(2);
        }
    };
    let names = (
        args.netlist.display().to_string(),
        constraints.map(|p| p.display().to_string()),
        args.bitstream.as_ref().map(|p| p.display().to_string()),
    );
    let input = Input {
        device: &args.device,
        package: &args.package,
        netlist: &netlist,
        constraints: pcf.as_deref(),
        bitstream: bitstream.as_deref(),
        top: args.top.as_deref(),
        allow_unconstrained: args.allow_unconstrained,
        files: FileNames { netlist: Some(&names.0), constraints: names.1.as_deref(), bitstream: names.2.as_deref() },
        // A user's own files on their own machine: no time budget.
        budget: None,
        started: None,
    };
    let report = openqq_fpga::validate(&input);
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report).expect("reports serialise")),
        Format::Text => print!("{}", report.to_text()),
    }
    if report.has_errors() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
