//! Splits the benchmark time into parsing, packing and the whole validate() call.
//! Usage: pack_profile <case.json>
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("a case.json");
    let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let text = case["netlist"].to_string();
    let device = case["device"].as_str().unwrap();
    let dev = openqq_fpga::device::device(device).unwrap();
    let runs: u128 = std::env::var("RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(200);
    let t = Instant::now();
    for _ in 0..runs {
        openqq_fpga::netlist::parse(&text, None).unwrap();
    }
    println!("netlist::parse: {} us", t.elapsed().as_micros() / runs);
    let m = openqq_fpga::netlist::parse(&text, None).unwrap();
    let t = Instant::now();
    for _ in 0..runs {
        openqq_fpga::pack::pack(&m, dev);
    }
    println!("pack: {} us", t.elapsed().as_micros() / runs);
    let input =
        openqq_fpga::Input { device, package: case["package"].as_str().unwrap(), netlist: &text, ..Default::default() };
    let t = Instant::now();
    for _ in 0..runs {
        openqq_fpga::validate(&input);
    }
    println!("validate: {} us", t.elapsed().as_micros() / runs);
}
