//! ECP5 differential oracle: for every design recorded by `fixtures/ecp5/generate.py` (logic,
//! carry chains, wide multiplexers, registers, distributed and block RAM, multipliers, PLLs,
//! clock buffers, IO and its electrical rules on every ECP5 device and package, legal and
//! illegal), our verdict must be nextpnr-ecp5's full flow through writing the configuration
//! (`--textcfg`, where it checks the sysIO rules), and where it packed the design our
//! utilisation must be its report's, bel type by bel type.
//!
//! The committed recording is `fixtures/ecp5/corpus.json`; set `FPGA_ECP5_DIR` to a directory
//! the generator wrote to compare against live tool results instead.

mod oracle;

use oracle::corpus::Differential;

/// Cases where we knowingly differ from nextpnr-ecp5, each with its reason. The test fails if a
/// listed case starts to agree, so the list can only shrink.
const KNOWN_DIFFERENT: &[(&str, &str)] = &[
    ("bad_iotype-000", UNKNOWN_IO_TYPE),
    ("bad_iotype-002", UNKNOWN_IO_TYPE),
    ("bad_iotype-004", UNKNOWN_IO_TYPE),
    ("io_overflow-001", UNBONDED_IO),
    ("io_overflow-003", UNBONDED_IO),
];

const UNKNOWN_IO_TYPE: &str = "nextpnr-ecp5 accepts an IO_TYPE it does not know on an input through packing, placement, routing and writing the textual config (PIOA.BASE_TYPE INPUT_HSTL15_I); only ecppack, which the corpus does not run, has no such setting. We reject it at the LPF (IO_TYPE_UNKNOWN)";

const UNBONDED_IO: &str = "more IO than the package bonds out: nextpnr-ecp5 puts the extra IO on the die's unbonded PIOs and writes the configuration (exit 0), so those ports reach no ball of the package; we refuse the design (IO_EXCEEDS_PACKAGE), on purpose (ECP5.md)";

/// nextpnr-ecp5's first error, by a phrase in it, and the error codes of ours that say the same
/// thing. When nextpnr fails, one of our errors must be one of these: the same verdict for
/// another reason is a disagreement too.
const CAUSES: &[(&str, &[&str])] = &[
    ("which does not exist for package", &["PIN_NOT_IN_PACKAGE"]),
    ("is unconstrained in LPF", &["PORT_UNCONSTRAINED"]),
    ("since it is already bound to cell", &["PIN_DOUBLE_ASSIGNED", "RESOURCE_OVER_CAPACITY"]),
    ("unexpected input following", &["LPF_SYNTAX"]),
    ("expected", &["LPF_SYNTAX"]),
    ("failed to place PLL", &["RESOURCE_OVER_CAPACITY"]),
    ("no BELs remaining to implement cell type", &["RESOURCE_OVER_CAPACITY"]),
    ("must be driven by", &["DSP_ALU_INPUT", "DSP_SIGNED_INPUT"]),
    ("is unsupported (instantiated as", &["CELL_TYPE_UNSUPPORTED", "CELL_TYPE_UNKNOWN"]),
    ("incompatible IO voltages", &["BANK_VCCIO_CONFLICT"]),
    ("is occupied by IO", &["VREF_PIN_OCCUPIED"]),
    ("unable to find VREF input for bank", &["VREF_PIN_MISSING"]),
    ("cannot place differential IO at location", &["DIFFERENTIAL_ON_COMPLEMENT_PIN"]),
    ("must be constrained to 'A' side of pair", &["DIFFERENTIAL_ON_COMPLEMENT_PIN"]),
    ("Pseudo-differential IO", &["PSEUDO_DIFFERENTIAL_INPUT"]),
    ("TERMINATION is not supported", &["TERMINATION_UNSUPPORTED"]),
    ("cannot route global from", &["GLOBAL_BUFFERS_EXCEEDED"]),
    // The router's own failure names no cause; the rules we know to end in it.
    ("Routing design failed", &["DSP_CASCADE_INPUT", "GLOBAL_CLOCK_UNROUTABLE"]),
    // A crash (the WebAssembly build traps on nextpnr's failed assertions) says nothing either:
    // the rules whose violation we have seen crash it (an unknown IO_TYPE on an output: ECP5.md).
    (
        "wasmtime._trap.Trap",
        &[
            "IO_TYPE_UNSUPPORTED",
            "IO_TYPE_UNKNOWN",
            "GLOBAL_BUFFERS_EXCEEDED",
            "GLOBAL_CLOCK_UNROUTABLE",
            "RESOURCE_OVER_CAPACITY",
        ],
    ),
];

const CORPUS: Differential = Differential {
    tool: "nextpnr-ecp5",
    dir_var: "FPGA_ECP5_DIR",
    fixtures: "fixtures/ecp5",
    verdict_run: "flow",
    constraints: "lpf",
    causes: CAUSES,
    known_different: KNOWN_DIFFERENT,
    min_cases: 150,
};

#[test]
fn every_ecp5_design_gets_nextpnrs_verdict_and_pack_utilisation() {
    CORPUS.check_every_case();
}

#[test]
fn every_known_difference_names_a_recorded_case_and_a_reason() {
    CORPUS.check_known_differences();
}
