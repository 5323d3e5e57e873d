//! Times our packing + resource checks on recorded fixture netlists.
//! Usage: pack_bench <case.json>... ; prints "<name> <microseconds per run> <ICESTORM_LC used>".

use std::time::Instant;

fn main() {
    for path in std::env::args().skip(1) {
        let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("readable case")).expect("case JSON");
        let netlist = case["netlist"].to_string();
        let input = openqq_fpga::Input {
            device: case["device"].as_str().unwrap_or(""),
            package: case["package"].as_str().unwrap_or(""),
            netlist: &netlist,
            allow_unconstrained: true,
            ..Default::default()
        };
        let runs = 50;
        let start = Instant::now();
        let mut lcs = 0;
        for _ in 0..runs {
            let report = openqq_fpga::validate(&input);
            lcs = report.utilization.iter().find(|u| u.resource == "ICESTORM_LC").map_or(0, |u| u.used);
        }
        let micros = start.elapsed().as_micros() / runs;
        println!("{} {} {}", path, micros, lcs);
    }
}
