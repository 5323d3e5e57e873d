//! Times `openqq_fpga::validate()` on one netlist file, the same file nextpnr is given.
//!
//! `pack_bench <device> <package> <netlist.json> [constraints]` prints "<median µs per call>
//! <logic cells used>" (`ICESTORM_LC` or `TRELLIS_COMB`) over 200 in-process calls (JSON parse,
//! packing, resource, pin and PLL checks; the PCF or LPF when one is given).
//! `pack_bench --once <device> <package> <netlist.json> [constraints]` reads the files and
//! validates once, so a caller can time the whole process the way it times nextpnr.

use std::time::Instant;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let once = args.first().is_some_and(|a| a == "--once");
    if once {
        args.remove(0);
    }
    let usage = "usage: pack_bench [--once] <device> <package> <netlist.json> [constraints]";
    let constraints = (args.len() == 4).then(|| args.pop().expect(usage));
    let [device, package, path] = <[String; 3]>::try_from(args).expect(usage);
    let netlist = std::fs::read_to_string(&path).expect("readable netlist");
    let constraints = constraints.map(|c| std::fs::read_to_string(c).expect("readable constraints"));
    let input = openqq_fpga::Input {
        device: &device,
        package: &package,
        netlist: &netlist,
        constraints: constraints.as_deref(),
        allow_unconstrained: true,
        ..Default::default()
    };
    let lcs = |r: &openqq_fpga::Report| {
        r.utilization.iter().find(|u| u.resource == "ICESTORM_LC" || u.resource == "TRELLIS_COMB").map_or(0, |u| u.used)
    };
    if once {
        println!("{}", lcs(&openqq_fpga::validate(&input)));
        return;
    }
    let mut times = Vec::new();
    let mut used = 0;
    for _ in 0..200 {
        let start = Instant::now();
        let report = openqq_fpga::validate(&input);
        times.push(start.elapsed().as_micros());
        used = lcs(&report);
    }
    times.sort_unstable();
    println!("{} {}", times[times.len() / 2], used);
}
