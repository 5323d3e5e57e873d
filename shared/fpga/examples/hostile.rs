//! Times `openqq_fpga::validate()` on netlists built to be slow: the shapes a hostile tenant
//! would try against a validator with a superlinear path, each sized to a byte target.
//!
//! `hostile [<case>|all] [<bytes>]` prints, per case, "<case> <bytes> <seconds> <MB/s>". The
//! default size is 850 000 bytes, just under the API's 900 KiB body limit. Run it with
//! `cargo run --release -p openqq-fpga --example hostile`.

use std::time::Instant;

use openqq_fpga::hostile::CASES;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map_or("all", String::as_str);
    let bytes = args.get(1).map_or(850_000, |b| b.parse().expect("a byte count"));
    for (name, make) in CASES.iter().filter(|(n, _)| which == "all" || which == *n) {
        let design = make(bytes);
        let size = design.netlist.len() + design.pcf.len();
        let input = openqq_fpga::Input {
            device: "hx8k",
            package: "ct256",
            netlist: &design.netlist,
            constraints: Some(&design.pcf),
            ..Default::default()
        };
        let start = Instant::now();
        let report = openqq_fpga::validate(&input);
        let secs = start.elapsed().as_secs_f64();
        let mb_s = size as f64 / 1e6 / secs;
        println!("{name} {size} {secs:.3} {mb_s:.2} ({} findings)", report.findings.len());
    }
}
