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

fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{} is larger than {MAX_FILE_BYTES} bytes", path.display()));
    }
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn text(path: &PathBuf) -> Result<String, String> {
    String::from_utf8(read(path)?).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// The constraints file given, after checking it is the format the device's family reads.
fn constraints_path(args: &ValidateArgs) -> Result<Option<&PathBuf>, String> {
    let (flag, path) = match (&args.pcf, &args.lpf) {
        (Some(p), _) => ("--pcf", p),
        (None, Some(p)) => ("--lpf", p),
        (None, None) => return Ok(None),
    };
    if let Some(family) = openqq_fpga::Family::of_device(&args.device) {
        let wanted = format!("--{}", family.constraint_format());
        if flag != wanted {
            return Err(format!(
                "{} is an {} part: give its constraints with {wanted}, not {flag}",
                args.device,
                family.name()
            ));
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
    let loaded = (|| -> Result<_, String> {
        Ok((text(&args.netlist)?, constraints.map(text).transpose()?, args.bitstream.as_ref().map(read).transpose()?))
    })();
    let (netlist, pcf, bitstream) = match loaded {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
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
