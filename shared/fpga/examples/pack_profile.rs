//! Splits the benchmark time into parsing, packing and the whole validate() call.
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).expect("a case.json");
    let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let text = case["netlist"].to_string();
    let dev = openqq_fpga::device::device(case["device"].as_str().unwrap()).unwrap();
    let t = Instant::now();
    for _ in 0..20 { let _: serde_json::Value = serde_json::from_str(&text).unwrap(); }
    println!("serde_json Value parse: {} us", t.elapsed().as_micros() / 20);
    let t = Instant::now();
    for _ in 0..20 { openqq_fpga::netlist::parse(&text, None).unwrap(); }
    println!("netlist::parse: {} us", t.elapsed().as_micros() / 20);
    let m = openqq_fpga::netlist::parse(&text, None).unwrap();
    let t = Instant::now();
    for _ in 0..20 { openqq_fpga::pack::pack(&m, dev); }
    println!("pack: {} us", t.elapsed().as_micros() / 20);
}
