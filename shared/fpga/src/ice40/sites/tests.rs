//! Unit tests for the site checks and the hard-IP packing rules, each a case the hard-IP
//! corpus (`fixtures/hardip`) found nextpnr-ice40 0.4 deciding differently from us before.

use crate::{validate, FileNames, Input, Report, Severity};

/// Cell ports that are outputs, for `port_directions` (nextpnr needs them; so do we).
const OUTPUTS: &[&str] = &[
    "O",
    "Q",
    "CO",
    "LOCK",
    "PLLOUTCORE",
    "PLLOUTCOREA",
    "PLLOUTGLOBAL",
    "D_IN_0",
    "D_IN_1",
    "GLOBAL_BUFFER_OUTPUT",
    "CLKHF",
    "FILTEROUT",
    "SBACKO",
    "RGB0",
    "RGB1",
    "RGB2",
    "LEDPU",
];

/// A netlist with the given ports (`name:direction:net`) and cells (`name`, type, JSON of
/// parameters, JSON of connections).
fn netlist(ports: &[&str], cells: &[(&str, &str, &str, &str)]) -> String {
    let ports: Vec<String> = ports
        .iter()
        .map(|p| {
            let [name, dir, net] = p.split(':').collect::<Vec<_>>()[..] else { panic!("bad port {p}") };
            format!(r#""{name}": {{"direction": "{dir}", "bits": [{net}]}}"#)
        })
        .collect();
    let cells: Vec<String> = cells
        .iter()
        .map(|(name, t, params, conns)| {
            let directions: Vec<String> = conns
                .split('"')
                .skip(1)
                .step_by(2)
                .filter(|p| p.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .map(|p| format!(r#""{p}": "{}""#, if OUTPUTS.contains(&p) { "output" } else { "input" }))
                .collect();
            format!(
                r#""{name}": {{"type": "{t}", "parameters": {{{params}}}, "port_directions": {{{}}}, "connections": {{{conns}}}}}"#,
                directions.join(", ")
            )
        })
        .collect();
    format!(r#"{{"modules": {{"top": {{"ports": {{{}}}, "cells": {{{}}}}}}}}}"#, ports.join(", "), cells.join(", "))
}

fn run(device: &str, package: &str, netlist: &str, pcf: Option<&str>) -> Report {
    validate(&Input {
        device,
        package,
        netlist,
        constraints: pcf,
        bitstream: None,
        top: None,
        allow_unconstrained: false,
        files: FileNames::default(),
        budget: None,
        started: None,
    })
}

fn errors(report: &Report) -> Vec<&str> {
    report.findings.iter().filter(|f| f.severity == Severity::Error).map(|f| f.code.as_str()).collect()
}

fn used(report: &Report, resource: &str) -> u32 {
    report.utilization.iter().find(|u| u.resource == resource).map_or(0, |u| u.used)
}

const PLL_PARAMS: &str = r#""DIVF": "0111111", "DIVQ": "100", "FILTER_RANGE": "001""#;

/// A PLL of `cell_type` reading net 2 (port `clk`), its core output A on port `led` (net 3).
fn pll_design(cell_type: &str, extra_ports: &[&str]) -> String {
    let input = if cell_type.ends_with("PAD") { "PACKAGEPIN" } else { "REFERENCECLK" };
    let out = if cell_type.contains("_2") { "PLLOUTCOREA" } else { "PLLOUTCORE" };
    let mut ports = vec!["clk:input:2", "led:output:3"];
    ports.extend(extra_ports);
    netlist(&ports, &[("pll", cell_type, PLL_PARAMS, &format!(r#""{input}": [2], "{out}": [3]"#))])
}

#[test]
fn a_pad_pll_on_the_input_pad_of_a_pll_the_package_does_not_bond_is_invalid() {
    // hx1k's PLL is LOCKED in vq100: its input pad is an ordinary pin there.
    let design = pll_design("SB_PLL40_PAD", &[]);
    let locked = run("hx1k", "vq100", &design, Some("set_io clk 33\nset_io led 1\n"));
    assert_eq!(errors(&locked), ["PLL_PAD_PIN_INVALID"]);
    let message = &locked.findings[0].message;
    assert!(
        message.contains("'pll'") && message.contains("pin 33") && message.contains("bonds out no PLL"),
        "{message}"
    );
    assert!(errors(&run("hx1k", "tq144", &design, Some("set_io clk 49\nset_io led 1\n"))).is_empty());
}

#[test]
fn an_input_on_the_b_pad_of_a_two_output_pad_pll_conflicts_with_it() {
    // hx8k ct256: the bottom PLL reads R9 and drives output B on K9.
    let pcf = "set_io clk R9\nset_io led B5\nset_io btn K9\nset_io out B4\n";
    let ports = ["btn:input:4", "out:output:4"];
    let dual = run("hx8k", "ct256", &pll_design("SB_PLL40_2_PAD", &ports), Some(pcf));
    assert_eq!(errors(&dual), ["PLL_OUTPUT_PAD_CONFLICT"]);
    assert_eq!(dual.findings[0].location.pin.as_deref(), Some("K9"));
    let single = run("hx8k", "ct256", &pll_design("SB_PLL40_PAD", &ports), Some(pcf));
    assert!(errors(&single).is_empty(), "{:?}", single.findings);
}

#[test]
fn a_core_pll_has_no_site_when_an_input_sits_on_its_only_output_pad() {
    // up5k sg48 has one PLL, whose output A is pin 35.
    let design = pll_design("SB_PLL40_CORE", &["btn:input:4", "out:output:4"]);
    let blocked = run("up5k", "sg48", &design, Some("set_io clk 20\nset_io led 11\nset_io btn 35\nset_io out 12\n"));
    assert_eq!(errors(&blocked), ["PLL_NO_SITE"]);
    assert!(blocked.findings[0].message.contains("input 'btn$sb_io' is on pin 35"), "{}", blocked.findings[0].message);
    let output_there =
        run("up5k", "sg48", &design, Some("set_io clk 20\nset_io led 35\nset_io btn 10\nset_io out 12\n"));
    assert!(errors(&output_there).is_empty(), "{:?}", output_there.findings);
}

#[test]
fn two_pad_plls_reading_one_pin_need_the_same_site() {
    let design = netlist(
        &["clk:input:2", "clk2:input:5", "led:output:3", "led2:output:4"],
        &[
            ("pll0", "SB_PLL40_PAD", PLL_PARAMS, r#""PACKAGEPIN": [2], "PLLOUTCORE": [3]"#),
            ("pll1", "SB_PLL40_PAD", PLL_PARAMS, r#""PACKAGEPIN": [5], "PLLOUTCORE": [4]"#),
        ],
    );
    let report = run("hx8k", "ct256", &design, Some("set_io clk R9\nset_io clk2 R9\nset_io led B5\nset_io led2 B4\n"));
    assert!(errors(&report).contains(&"PLL_SITE_TAKEN"), "{:?}", report.findings);
}

#[test]
fn an_sb_gb_io_must_sit_on_a_global_buffer_pin_and_have_one() {
    let design = netlist(
        &["pad:input:2", "led:output:4"],
        &[
            ("gbio", "SB_GB_IO", r#""PIN_TYPE": "000001""#, r#""PACKAGE_PIN": [2], "GLOBAL_BUFFER_OUTPUT": [3]"#),
            ("ff", "SB_DFF", "", r#""C": [3], "D": [5], "Q": [4]"#),
            ("inv", "SB_LUT4", r#""LUT_INIT": "01""#, r#""I0": [4], "O": [5]"#),
        ],
    );
    // hx1k tq144: pin 21 is a GBIN pin, pin 1 is not.
    let off = run("hx1k", "tq144", &design, Some("set_io pad 1\nset_io led 99\n"));
    assert_eq!(errors(&off), ["GB_IO_PIN_NOT_GLOBAL"]);
    assert_eq!(off.findings[0].location.cell.as_deref(), Some("gbio"));
    let on = run("hx1k", "tq144", &design, Some("set_io pad 21\nset_io led 99\n"));
    assert!(errors(&on).is_empty(), "{:?}", on.findings);
    // Its buffer counts as a global buffer, as nextpnr creates one beside it.
    assert_eq!(used(&on, "SB_GB"), 1);
    assert_eq!(errors(&run("hx1k", "tq144", &design, None)), ["GB_IO_UNCONSTRAINED"]);
}

#[test]
fn the_two_pads_of_an_io_tile_must_agree_on_their_shared_input_clock() {
    // hx1k tq144 pins 1 and 2 are pads 1 and 0 of IO tile (0, 14).
    let io = |clk: u32, pad: u32, din: u32| {
        (r#""PIN_TYPE": "000000""#, format!(r#""PACKAGE_PIN": [{pad}], "INPUT_CLK": [{clk}], "D_IN_0": [{din}]"#))
    };
    let (p, a) = io(2, 4, 6);
    let (_, b_same) = io(2, 5, 7);
    let (_, b_other) = io(3, 5, 7);
    let ports = ["c0:input:2", "c1:input:3", "a:inout:4", "b:inout:5", "x:output:6", "y:output:7"];
    let pcf = "set_io c0 21\nset_io c1 20\nset_io a 1\nset_io b 2\nset_io x 99\nset_io y 98\n";
    let same = netlist(&ports, &[("ioa", "SB_IO", p, &a), ("iob", "SB_IO", p, &b_same)]);
    assert!(errors(&run("hx1k", "tq144", &same, Some(pcf))).is_empty());
    let other = netlist(&ports, &[("ioa", "SB_IO", p, &a), ("iob", "SB_IO", p, &b_other)]);
    let report = run("hx1k", "tq144", &other, Some(pcf));
    assert_eq!(errors(&report), ["IO_PAIR_CONFLICT"]);
    assert!(report.findings[0].message.contains("INPUT_CLK"), "{}", report.findings[0].message);
}

#[test]
fn an_lvds_input_takes_the_first_pad_of_its_tile_and_leaves_the_other_free() {
    let lvds = r#""PIN_TYPE": "000001", "IO_STANDARD": "SB_LVDS_INPUT ""#;
    let design = netlist(
        &["a:input:2", "x:output:3", "b:input:4"],
        &[("diff", "SB_IO", lvds, r#""PACKAGE_PIN": [2], "D_IN_0": [3]"#)],
    );
    // Pin 2 is pad 0 of tile (0, 14), pin 1 its pad 1.
    let alone = run("hx1k", "tq144", &design, Some("set_io a 2\nset_io x 99\nset_io b 10\n"));
    assert!(errors(&alone).is_empty(), "{:?}", alone.findings);
    assert_eq!(
        errors(&run("hx1k", "tq144", &design, Some("set_io a 2\nset_io x 99\nset_io b 1\n"))),
        ["IO_PAIR_CONFLICT"]
    );
    assert!(errors(&run("hx1k", "tq144", &design, Some("set_io a 1\nset_io x 99\nset_io b 10\n")))
        .contains(&"IO_PAIR_CONFLICT"));
}

#[test]
fn i2c_and_spi_blocks_sit_where_bus_addr74_says() {
    let i2c = |name: &'static str, addr: &'static str| {
        (name, "SB_I2C", if addr.is_empty() { "" } else { addr }, r#""SBCLKI": [2]"#)
    };
    let ports = ["clk:input:2"];
    let pcf = Some("set_io clk 35\n");
    let two = netlist(&ports, &[i2c("left", r#""BUS_ADDR74": "0b0001""#), i2c("right", r#""BUS_ADDR74": "0b0011""#)]);
    assert!(errors(&run("up5k", "sg48", &two, pcf)).is_empty());
    let same = netlist(&ports, &[i2c("a", ""), i2c("b", "")]);
    assert_eq!(errors(&run("up5k", "sg48", &same, pcf)), ["HARD_IP_SITE_TAKEN"]);
    let bad = netlist(&ports, &[i2c("a", r#""BUS_ADDR74": "0b0101""#)]);
    assert_eq!(errors(&run("up5k", "sg48", &bad, pcf)), ["HARD_IP_SITE_INVALID"]);
    // nextpnr 0.4 looks for I2C blocks at UltraPlus coordinates; the u4k die has them elsewhere.
    assert_eq!(errors(&run("u4k", "sg48", &netlist(&ports, &[i2c("a", "")]), pcf)), ["HARD_IP_SITE_INVALID"]);
}

#[test]
fn library_cells_nextpnr_rejects_are_errors_naming_the_cell() {
    let design = netlist(
        &["a:input:2", "b:output:3"],
        &[("filt", "SB_FILTER_50NS", "", r#""FILTERIN": [2], "FILTEROUT": [3]"#)],
    );
    let report = run("up5k", "sg48", &design, Some("set_io a 10\nset_io b 11\n"));
    assert_eq!(errors(&report), ["CELL_TYPE_UNSUPPORTED"]);
    assert_eq!(report.findings[0].location.cell.as_deref(), Some("filt"));
}

/// `n` flip-flops on clock net 2 with their reset on net `reset` (a net number or `"0"`).
fn flops(n: usize, reset: &str) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("ff{i}"), format!(r#""C": [2], "D": [{}], "R": [{reset}], "Q": [{}]"#, 10 + i, 11 + i)))
        .collect()
}

#[test]
fn a_constant_reset_with_a_fanout_above_15_takes_a_global_buffer() {
    let promoted = |n: usize| {
        let ffs = flops(n, r#""0""#);
        let cells: Vec<(&str, &str, &str, &str)> =
            ffs.iter().map(|(name, c)| (name.as_str(), "SB_DFFR", "", c.as_str())).collect();
        let report = run("hx8k", "ct256", &netlist(&["clk:input:2"], &cells), Some("set_io clk J3\n"));
        used(&report, "SB_GB")
    };
    // The clock always; nextpnr's constant-zero net once it resets more flip-flops than the
    // clock clocks and more than 15.
    assert_eq!((promoted(15), promoted(16)), (1, 2));
}

#[test]
fn a_pll_lock_read_only_by_luts_needs_no_pass_through_lut() {
    let lc = |lock_users: &str, ports: &[&str]| {
        let mut cells =
            vec![("pll", "SB_PLL40_CORE", PLL_PARAMS, r#""REFERENCECLK": [2], "PLLOUTCORE": [3], "LOCK": [4]"#)];
        if lock_users == "lut" {
            cells.push(("l", "SB_LUT4", r#""LUT_INIT": "01""#, r#""I0": [4], "O": [5]"#));
        }
        let report = run("hx8k", "ct256", &netlist(ports, &cells), None);
        used(&report, "ICESTORM_LC")
    };
    // A LUT (plus nextpnr's VCC driver) against a port, which needs the pass-through LUT.
    assert_eq!(lc("lut", &["clk:input:2", "led:output:3", "o:output:5"]), 2);
    assert_eq!(lc("port", &["clk:input:2", "led:output:3", "o:output:4"]), 2);
}

#[test]
fn oscillators_and_pll_global_outputs_bring_their_global_buffer() {
    // Their clocks only leave through a port here, so nothing is promoted as a clock: every
    // SB_GB counted is one nextpnr's packer put beside the cell.
    let osc = |attrs: &str| {
        let design = format!(
            r#"{{"modules": {{"top": {{"ports": {{"o": {{"direction": "output", "bits": [2]}}}}, "cells": {{
               "osc": {{"type": "SB_HFOSC", "attributes": {{{attrs}}},
                        "connections": {{"CLKHFPU": ["1"], "CLKHFEN": ["1"], "CLKHF": [2]}}}}}}}}}}}}"#
        );
        used(&run("up5k", "sg48", &design, None), "SB_GB")
    };
    assert_eq!(osc(""), 1);
    assert_eq!(osc(r#""ROUTE_THROUGH_FABRIC": "00000000000000000000000000000001""#), 0);
    let pll = |port: &str| {
        let design = netlist(
            &["clk:input:2", "o:output:3"],
            &[("pll", "SB_PLL40_CORE", PLL_PARAMS, &format!(r#""REFERENCECLK": [2], "{port}": [3]"#))],
        );
        used(&run("hx8k", "ct256", &design, None), "SB_GB")
    };
    assert_eq!((pll("PLLOUTGLOBAL"), pll("PLLOUTCORE")), (1, 0));
}

#[test]
fn an_rgb_driver_needs_current_from_an_led_driver_and_its_pads_to_itself() {
    let ports = ["a:input:2", "r:output:4", "g:output:5", "b:output:6"];
    let pcf = Some("set_io a 10\nset_io r 11\nset_io g 12\nset_io b 13\n");
    let rgb = |pu: &str| {
        ("rgb", "SB_RGB_DRV", "", format!(r#""RGB0PWM": [2], "RGBPU": [{pu}], "RGB0": [4], "RGB1": [5], "RGB2": [6]"#))
    };
    let (n, t, p, c) = rgb(r#""x""#);
    assert_eq!(errors(&run("u4k", "sg48", &netlist(&ports, &[(n, t, p, &c)]), pcf)), ["LED_DRIVER_UNPOWERED"]);
    let (n, t, p, c) = rgb("7");
    let powered = netlist(&ports, &[(n, t, p, &c), ("cur", "SB_LED_DRV_CUR", "", r#""EN": ["1"], "LEDPU": [7]"#)]);
    assert!(errors(&run("u4k", "sg48", &powered, pcf)).is_empty());
    let rgba = r#""RGB0PWM": [2], "RGB0": [4], "RGB1": [5], "RGB2": [6]"#;
    let read_back = netlist(
        &["a:input:2", "r:output:4", "g:output:5", "b:output:6", "o:output:8"],
        &[("rgba", "SB_RGBA_DRV", "", rgba), ("inv", "SB_LUT4", r#""LUT_INIT": "01""#, r#""I0": [4], "O": [8]"#)],
    );
    let report =
        run("up5k", "sg48", &read_back, Some("set_io a 10\nset_io r 39\nset_io g 40\nset_io b 41\nset_io o 12\n"));
    assert_eq!(errors(&report), ["LED_DRIVER_OUTPUT_SHARED"]);
}

#[test]
fn the_u4k_hfosc_cannot_route_its_clock_through_the_fabric() {
    let design = |attrs: &str| {
        format!(
            r#"{{"modules": {{"top": {{"ports": {{"o": {{"direction": "output", "bits": [2]}}}}, "cells": {{
               "osc": {{"type": "SB_HFOSC", "attributes": {{{attrs}}}, "port_directions": {{"CLKHF": "output"}},
                        "connections": {{"CLKHFPU": ["1"], "CLKHFEN": ["1"], "CLKHF": [2]}}}}}}}}}}}}"#
        )
    };
    let fabric = design(r#""ROUTE_THROUGH_FABRIC": "00000000000000000000000000000001""#);
    assert_eq!(errors(&run("u4k", "sg48", &fabric, Some("set_io o 10\n"))), ["OSC_FABRIC_UNSUPPORTED"]);
    assert!(errors(&run("up5k", "sg48", &fabric, Some("set_io o 10\n"))).is_empty());
    assert!(errors(&run("u4k", "sg48", &design(""), Some("set_io o 10\n"))).is_empty());
}

#[test]
fn global_buffers_fed_from_io_on_even_networks_use_up_the_reset_globals() {
    // Four SB_GB_IOs and a reset net with fanout 20, on hx8k ct256 (nextpnr: 5 and 6 SB_GB).
    let design = |pads: [&str; 4]| {
        let mut cells: Vec<(String, String)> = (0..4)
            .map(|i| {
                (format!("gbio{i}"), format!(r#""PACKAGE_PIN": [{}], "GLOBAL_BUFFER_OUTPUT": [{}]"#, 10 + i, 20 + i))
            })
            .collect();
        cells.extend(
            (0..20).map(|i| (format!("ff{i}"), format!(r#""C": [2], "D": [{}], "R": [3], "Q": [{}]"#, 30 + i, 31 + i))),
        );
        let cells: Vec<(&str, &str, &str, &str)> = cells
            .iter()
            .map(|(n, c)| {
                if n.starts_with("gbio") {
                    (n.as_str(), "SB_GB_IO", r#""PIN_TYPE": "000001""#, c.as_str())
                } else {
                    (n.as_str(), "SB_DFFR", "", c.as_str())
                }
            })
            .collect();
        let ports = ["clk:input:2", "rst:input:3", "a:input:10", "b:input:11", "c:input:12", "d:input:13"];
        let pcf = format!(
            "set_io clk C1\nset_io rst D1\nset_io a {}\nset_io b {}\nset_io c {}\nset_io d {}\n",
            pads[0], pads[1], pads[2], pads[3]
        );
        used(&run("hx8k", "ct256", &netlist(&ports, &cells), Some(&pcf)), "SB_GB")
    };
    let pin_of = |network: u8| {
        let ct256 = crate::device::device("hx8k").unwrap().package("ct256").unwrap();
        ct256.pins.iter().find(|p| p.global_network == Some(network)).unwrap().name
    };
    // Even networks: no reset global is left, so the reset stays local; the clock is promoted.
    assert_eq!(design([pin_of(0), pin_of(2), pin_of(4), pin_of(6)]), 5);
    // Odd networks: the reset is promoted too.
    assert_eq!(design([pin_of(1), pin_of(3), pin_of(5), pin_of(7)]), 6);
}

#[test]
fn two_pads_of_a_tile_cannot_connect_different_output_clocks_even_unregistered() {
    // PIN_TYPE 011001 registers nothing, so nextpnr's placer lets both pads be; its router then
    // finds two nets for the tile's one OUTPUT_CLK wire.
    let io = |clk: u32, pad: u32, din: u32| {
        format!(r#""PACKAGE_PIN": [{pad}], "OUTPUT_CLK": [{clk}], "D_OUT_0": [{din}], "D_IN_0": [{din}]"#)
    };
    let p = r#""PIN_TYPE": "011001""#;
    let ports = ["c0:input:2", "c1:input:3", "a:inout:4", "b:inout:5", "x:output:6", "y:output:7"];
    let pcf = Some("set_io c0 21\nset_io c1 20\nset_io a 1\nset_io b 2\nset_io x 99\nset_io y 98\n");
    let (a, b_same, b_other) = (io(2, 4, 6), io(2, 5, 7), io(3, 5, 7));
    let same = netlist(&ports, &[("ioa", "SB_IO", p, &a), ("iob", "SB_IO", p, &b_same)]);
    assert!(errors(&run("hx1k", "tq144", &same, pcf)).is_empty());
    let other = netlist(&ports, &[("ioa", "SB_IO", p, &a), ("iob", "SB_IO", p, &b_other)]);
    assert_eq!(errors(&run("hx1k", "tq144", &other, pcf)), ["IO_PAIR_CONFLICT"]);
}

#[test]
fn a_hard_cell_over_capacity_or_absent_is_named() {
    let boot = r#""BOOT": [2], "S0": ["0"], "S1": ["0"]"#;
    let two = netlist(&["b:input:2"], &[("wb0", "SB_WARMBOOT", "", boot), ("wb1", "SB_WARMBOOT", "", boot)]);
    let report = run("hx1k", "tq144", &two, Some("set_io b 1\n"));
    assert_eq!(errors(&report), ["RESOURCE_OVER_CAPACITY"]);
    let f = &report.findings[0];
    assert!(f.message.contains("'wb0', 'wb1'"), "{}", f.message);
    assert_eq!(f.location.cell.as_deref(), Some("wb1"), "the cell that does not fit");
    let dsp = netlist(&["b:input:2"], &[("mac", "SB_MAC16", "", r#""CLK": [2]"#)]);
    let absent = run("hx8k", "ct256", &dsp, Some("set_io b J3\n"));
    assert_eq!(errors(&absent), ["RESOURCE_ABSENT"]);
    assert_eq!(absent.findings[0].location.cell.as_deref(), Some("mac"));
}
