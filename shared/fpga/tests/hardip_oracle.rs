//! Hard-IP differential oracle: for every design recorded by `fixtures/hardip/generate.py`
//! (PLLs, IO primitives, global buffers and the UltraPlus hard cells at random legal and illegal
//! sites, on hx1k, hx4k, hx8k, lp8k, lp384, up5k and u4k in several packages), our verdict must be
//! the full nextpnr-ice40 flow's exit status, and where `--pack-only` packed the design our
//! utilisation must be its report's, resource by resource.
//!
//! The committed recording is `fixtures/hardip/corpus.json`; set `FPGA_HARDIP_DIR` to a
//! directory the generator wrote to compare against live tool results instead.

mod oracle;

use oracle::corpus::Differential;

/// Cases where we knowingly differ from nextpnr-ice40 0.4, each with its reason. The test fails
/// if a listed case starts to agree, so the list can only shrink.
const KNOWN_DIFFERENT: &[(&str, &str)] = &[];

/// nextpnr-ice40's first error, by a phrase in it, and the error codes of ours that say the same
/// thing. When nextpnr fails, one of our errors must be one of these: the same verdict for
/// another reason is a disagreement too.
const CAUSES: &[(&str, &[&str])] = &[
    ("is not connected to any PLL BEL", &["PLL_PAD_PIN_INVALID"]),
    ("PACKAGEPIN SB_IO", &["PLL_PAD_PIN_INVALID"]),
    ("but BEL is already assigned to PLL", &["PLL_SITE_TAKEN"]),
    ("B output conflicts with SB_IO", &["PLL_OUTPUT_PAD_CONFLICT"]),
    ("couldn't be placed anywhere", &["PLL_NO_SITE"]),
    ("has no global buffer connection available", &["GB_IO_PIN_NOT_GLOBAL"]),
    ("Unconstrained SB_GB_IO", &["GB_IO_UNCONSTRAINED"]),
    ("is not valid for cell", &["IO_PAIR_CONFLICT"]),
    ("Found two arcs with same sink wire", &["IO_PAIR_CONFLICT"]),
    ("can only drive PLL", &["PLL_PAD_NOT_FROM_PIN"]),
    ("Invalid value for BUS_ADDR74", &["HARD_IP_SITE_INVALID"]),
    ("is unsupported (instantiated as", &["CELL_TYPE_UNSUPPORTED"]),
    ("package does not have a pin named", &["PIN_NOT_IN_PACKAGE"]),
    ("since it is already bound to cell", &["PIN_DOUBLE_ASSIGNED", "HARD_IP_SITE_TAKEN", "RESOURCE_OVER_CAPACITY"]),
    ("no BELs remaining to implement cell type", &["RESOURCE_OVER_CAPACITY", "RESOURCE_ABSENT"]),
    ("Unable to place cell", &["RESOURCE_ABSENT", "RESOURCE_OVER_CAPACITY"]),
    ("Unable to find placement for cell", &["RESOURCE_ABSENT", "HARD_IP_SITE_INVALID"]),
    ("should be driven by port LEDPU of SB_LED_DRV_CUR", &["LED_DRIVER_UNPOWERED"]),
    ("port connected to more than just package pin", &["LED_DRIVER_OUTPUT_SHARED"]),
    ("No wire found for port CLKHF_FABRIC", &["OSC_FABRIC_UNSUPPORTED"]),
];

const CORPUS: Differential = Differential {
    tool: "nextpnr-ice40",
    dir_var: "FPGA_HARDIP_DIR",
    fixtures: "fixtures/hardip",
    verdict_run: "flow",
    constraints: "pcf",
    causes: CAUSES,
    known_different: KNOWN_DIFFERENT,
    min_cases: 300,
};

#[test]
fn every_hard_ip_design_gets_the_full_flows_verdict_and_pack_only_utilisation() {
    CORPUS.check_every_case();
}

#[test]
fn every_known_difference_names_a_recorded_case_and_a_reason() {
    CORPUS.check_known_differences();
}
