//! Unit tests for the netlist reader.

use super::*;

const SMALL: &str = r#"{"modules":{
    "SB_LUT4":{"attributes":{"blackbox":"00000000000000000000000000000001"},"ports":{},"cells":{}},
    "top":{"attributes":{"top":"00000000000000000000000000000001"},
      "ports":{"a":{"direction":"input","bits":[2,3]},"y":{"direction":"output","bits":[4]}},
      "cells":{"z_lut":{"type":"SB_LUT4","parameters":{"LUT_INIT":"0110","N":7},
        "port_directions":{"I0":"input","I1":"input","O":"output"},
        "connections":{"O":[4],"I0":[2],"I1":["0"]}},
        "a_first":{"type":"SB_DFF","connections":{"D":[3],"C":["x"],"Q":[5]}}},
      "netnames":{"a":{"bits":[2,3],"offset":4},"y":{"hide_name":0,"bits":[4]}}}}}"#;

#[test]
fn the_module_marked_top_is_chosen_and_blackboxes_are_ignored() {
    let m = parse(SMALL, None).unwrap();
    assert_eq!(m.name, "top");
    assert_eq!(m.ports[0].bits, vec![Bit::Net(2), Bit::Net(3)]);
    assert_eq!(m.bit(&m.cells[1], "I1"), Some(Bit::Zero));
    assert!(m.is_output(&m.cells[1], "O"));
    assert!(!m.is_output(&m.cells[1], "I0"));
}

#[test]
fn cells_and_their_connections_are_sorted_by_name_as_nextpnr_reads_them() {
    let m = parse(SMALL, None).unwrap();
    let names: Vec<_> = m.cells.iter().map(|c| c.name.as_ref()).collect();
    assert_eq!(names, ["a_first", "z_lut"]);
    assert_eq!(m.bit(&m.cells[0], "C"), Some(Bit::Undriven));
    let ports: Vec<_> = m.connections(&m.cells[1]).iter().map(|c| c.port.as_ref()).collect();
    assert_eq!(ports, ["I0", "I1", "O"]);
}

#[test]
fn parameters_and_net_names_are_read_on_demand() {
    let m = parse(SMALL, None).unwrap();
    assert_eq!(m.parameter(&m.cells[1], "LUT_INIT"), Some(Param::Text("0110".into())));
    assert_eq!(m.parameter(&m.cells[1], "N"), Some(Param::Number("7")));
    assert_eq!(m.parameter(&m.cells[0], "LUT_INIT"), None);
    let mut named = Vec::new();
    m.each_net_name(|name, bits, offset, upto| {
        named.extend(bit_names(&name, bits, offset, upto));
    });
    assert!(named.contains(&(Bit::Net(3), "a[5]".to_owned())), "{named:?}");
    assert!(named.contains(&(Bit::Net(4), "y".to_owned())), "{named:?}");
    assert!(!named.iter().any(|(b, _)| *b == Bit::Net(9)));
}

#[test]
fn escaped_names_are_decoded() {
    let text = r#"{"modules":{"t\u00e9":{"ports":{"a\"b":{"direction":"input","bits":[2]}}}}}"#;
    let m = parse(text, None).unwrap();
    assert_eq!((m.name.as_ref(), m.ports[0].name.as_ref()), ("té", "a\"b"));
}

#[test]
fn a_named_top_that_does_not_exist_is_top_not_found() {
    assert_eq!(parse(SMALL, Some("nope")).unwrap_err().code, "TOP_NOT_FOUND");
    assert_eq!(parse(SMALL, Some("SB_LUT4")).unwrap_err().code, "TOP_NOT_FOUND");
}

#[test]
fn two_unmarked_modules_are_top_not_found() {
    let two = r#"{"modules":{"a":{"ports":{},"cells":{}},"b":{"ports":{},"cells":{}}}}"#;
    assert_eq!(parse(two, None).unwrap_err().code, "TOP_NOT_FOUND");
    assert_eq!(parse(two, Some("b")).unwrap().name, "b");
}

#[test]
fn broken_json_is_netlist_invalid_with_a_line() {
    let e = parse("{\n\"modules\": [", None).unwrap_err();
    assert_eq!((e.code, e.line), ("NETLIST_INVALID", Some(2)));
}

#[test]
fn wrong_shapes_are_netlist_invalid_not_panics() {
    for text in [
        "[]",
        "{\"modules\":3}",
        "{}",
        "{\"modules\":{\"t\":{\"cells\":{\"c\":{}}}}}",
        "{\"modules\":{\"t\":{\"ports\":{\"p\":{\"direction\":\"up\",\"bits\":[]}}}}}",
        "{\"modules\":{\"t\":{\"ports\":{\"p\":{\"direction\":\"input\"}}}}}",
        "{\"modules\":{\"t\":{\"cells\":{\"c\":{\"type\":\"X\",\"connections\":{\"A\":[-1]}}}}}}",
        "{\"modules\":{\"t\":{\"cells\":{\"c\":{\"type\":\"X\",\"connections\":{\"A\":[\"q\"]}}}}}}",
        "{\"modules\":{\"t\":{\"cells\":{\"c\":{\"type\":\"X\",\"parameters\":[]}}}}}",
        "{\"modules\":{\"t\":{}}} x",
    ] {
        assert_eq!(parse(text, None).unwrap_err().code, "NETLIST_INVALID", "{text}");
    }
}
