//! Prints our packer's step counts next to nextpnr's recorded ones for fixture cases, to find
//! which packing step a utilisation difference comes from.
//! Usage: breakdown <case.json>...

fn main() {
    for path in std::env::args().skip(1) {
        let case: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("readable case")).expect("case JSON");
        let text = case["netlist"].to_string();
        let dev = openqq_fpga::device::device(case["device"].as_str().unwrap_or("")).expect("known device");
        let module = openqq_fpga::netlist::parse(&text, None).expect("parsable netlist");
        let packed = openqq_fpga::pack::pack(&module, dev);
        println!("{path}\n  nextpnr {}\n  ours    {:?}", case["nextpnr"]["log"], packed.breakdown);
    }
}
