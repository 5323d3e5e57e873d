#!/usr/bin/env python3
"""Generates shared/fpga/src/ecp5/device/generated.rs from Project Trellis's database.

Usage:
  scripts/gen-devices-ecp5.py TRELLIS_DB > src/ecp5/device/generated.rs
  scripts/gen-devices-ecp5.py TRELLIS_DB --record-available NEXTPNR_ECP5 YOSYS

TRELLIS_DB_COMMIT names the database's commit when TRELLIS_DB is not a git checkout.

TRELLIS_DB is a checkout of https://github.com/YosysHQ/prjtrellis-db (the commit is recorded in
DEVICES.md). From it come, per part: the IDCODE and tile grid size (`devices.json`), the
packages, each package pin's PIO site (row, column, letter) and its IO bank, and each bank's VREF
input pin (the PIO whose function is `VREF1_<bank>`) (`iodb.json`), and the tile counts behind the logic capacities (`tilegrid.json`).

The capacities are the ones nextpnr-ecp5 reports as `available` in its `--report`. They are
recorded once from the tool into scripts/ecp5-available.json (`--record-available`, which packs
a one-LUT design for every part), and the generator checks the ones the database determines
(logic cells, flip-flops, RAM write ports and IO sites) against it, so the two cannot drift apart.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
AVAILABLE = os.path.join(HERE, "ecp5-available.json")

# Part name -> nextpnr-ecp5 device flag. nextpnr builds one database per die (from the LFE5UM5G
# part's Trellis data, plus TQFP144 from the LFE5U part) and the 12F is the 25F die.
PARTS = [
    ("LFE5U-12F", "12k"),
    ("LFE5U-25F", "25k"),
    ("LFE5U-45F", "45k"),
    ("LFE5U-85F", "85k"),
    ("LFE5UM-25F", "um-25k"),
    ("LFE5UM-45F", "um-45k"),
    ("LFE5UM-85F", "um-85k"),
    ("LFE5UM5G-25F", "um5g-25k"),
    ("LFE5UM5G-45F", "um5g-45k"),
    ("LFE5UM5G-85F", "um5g-85k"),
]

# nextpnr-ecp5's bel types in the order it prints its utilisation.
RESOURCES = [
    "TRELLIS_IO", "DCCA", "DP16KD", "MULT18X18D", "ALU54B", "EHXPLLL", "EXTREFB", "DCUA", "PCSCLKDIV",
    "IOLOGIC", "SIOLOGIC", "GSR", "JTAGG", "OSCG", "SEDGA", "DTR", "USRMCLK", "CLKDIVF", "ECLKSYNCB",
    "DLLDELD", "DDRDLL", "DQSBUFM", "TRELLIS_ECLKBUF", "ECLKBRIDGECS", "DCSC", "TRELLIS_FF", "TRELLIS_COMB",
    "TRELLIS_RAMW",
]

# nextpnr's default package when none is given.
DEFAULT_PACKAGE = "CABGA381"


def load(db, part, name):
    with open(os.path.join(db, "ECP5", part, name)) as f:
        return json.load(f)


def record_available(nextpnr, yosys):
    """Runs nextpnr-ecp5 --pack-only on a one-LUT design for every part; writes AVAILABLE."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        # The WebAssembly builds see only the working directory: relative names, cwd=tmp.
        with open(os.path.join(tmp, "inv.v"), "w") as f:
            f.write("module top(input a, output b); assign b = ~a; endmodule\n")
        subprocess.run([yosys, "-q", "-p", "synth_ecp5 -json inv.json", "inv.v"], check=True, cwd=tmp)
        for part, flag in PARTS:
            subprocess.run(
                [nextpnr, f"--{flag}", "--package", DEFAULT_PACKAGE, "--json", "inv.json",
                 "--lpf-allow-unconstrained", "--pack-only", "--report", "report.json", "-q"],
                check=True, cwd=tmp,
            )
            with open(os.path.join(tmp, "report.json")) as f:
                util = json.load(f)["utilization"]
            out[part] = {r: util[r]["available"] for r in RESOURCES}
            missing = sorted(set(util) - set(RESOURCES))
            if missing:
                sys.exit(f"{part}: nextpnr reports resources this generator does not know: {missing}")
    version = subprocess.run([nextpnr, "--version"], capture_output=True, text=True).stderr.strip().splitlines()[-1]
    with open(AVAILABLE, "w") as f:
        json.dump({"nextpnr": version, "available": out}, f, indent=1, sort_keys=True)
        f.write("\n")


def natural(name):
    """A2 before A10; TQFP pins by number."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1)


def main():
    if len(sys.argv) == 5 and sys.argv[2] == "--record-available":
        record_available(sys.argv[3], sys.argv[4])
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    db = sys.argv[1]
    with open(os.path.join(db, "devices.json")) as f:
        devices = json.load(f)["families"]["ECP5"]["devices"]
    with open(AVAILABLE) as f:
        available = json.load(f)["available"]

    tables = {}  # pin table text -> identifier
    pin_tables = []
    parts = []
    for part, _ in PARTS:
        info = devices[part]
        iodb = load(db, part, "iodb.json")
        cap = available[part]
        # What the database determines must be what nextpnr reports. The tile grids of the 45F
        # and 85F dies are large files a shallow copy of the database may lack; without one
        # only the IO sites are compared.
        derived = {"TRELLIS_IO": len(iodb["pio_metadata"])}
        if os.path.exists(os.path.join(db, "ECP5", part, "tilegrid.json")):
            tiles = load(db, part, "tilegrid.json")
            plc = sum(1 for t in tiles.values() if t["type"] == "PLC2")
            derived.update({"TRELLIS_COMB": plc * 8, "TRELLIS_FF": plc * 8, "TRELLIS_RAMW": plc})
        for r, n in derived.items():
            if cap[r] != n:
                sys.exit(f"{part}: Trellis gives {n} {r} but nextpnr-ecp5 reports {cap[r]} available")
        banks = {(m["row"], m["col"], m["pio"]): m["bank"] for m in iodb["pio_metadata"]}
        # nextpnr-ecp5 looks a bank's VREF input up by the PIO's function, `VREF1_<bank>`, on the
        # die (bonded or not), comparing the whole function name; a bank without one cannot take
        # referenced inputs.
        vrefs = sorted((m["bank"], m["row"], m["col"], m["pio"]) for m in iodb["pio_metadata"]
                       if m.get("function") == f'VREF1_{m["bank"]}')
        if any("VREF1_" in m.get("function", "") and m.get("function") != f'VREF1_{m["bank"]}'
               for m in iodb["pio_metadata"]):
            sys.exit(f"{part}: a VREF1 function outside its own bank or beside another function")
        packages = []
        for pkg in sorted(iodb["packages"]):
            pins = iodb["packages"][pkg]
            rows = []
            for name in sorted(pins, key=natural):
                p = pins[name]
                bank = banks.get((p["row"], p["col"], p["pio"]))
                if bank is None:
                    sys.exit(f"{part} {pkg}: pin {name} is on a PIO without metadata")
                rows.append(
                    f'Pin {{ name: "{name}", row: {p["row"]}, col: {p["col"]}, pio: b\'{p["pio"]}\', bank: {bank} }},')
            text = "\n".join(rows)
            if text not in tables:
                ident = f"PINS_{len(tables)}"
                tables[text] = ident
                pin_tables.append(f"/// {part} {pkg} (and any part with the same pin-out).\n"
                                  f"static {ident}: &[Pin] = &[\n{text}\n];")
            packages.append(f'Package {{ name: "{pkg}", pins: {tables[text]} }},')
        caps = ", ".join(f'("{r}", {cap[r]})' for r in RESOURCES)
        parts.append(
            f'Device {{ name: "{part}", idcode: {info["idcode"]}, width: {info["max_col"] + 1}, '
            f'height: {info["max_row"] + 1}, frames: {info["frames"]}, '
            f'frame_bytes: {(info["bits_per_frame"] + info["pad_bits_after_frame"] + info["pad_bits_before_frame"]) // 8}, '
            f'capacities: &[{caps}], vrefs: &[' + ", ".join(
                f"Vref {{ bank: {b}, row: {r}, col: {c}, pio: b'{p}' }}" for b, r, c, p in vrefs) +
            '], packages: &[\n' + "\n".join(packages) + "\n] },")

    commit = os.environ.get("TRELLIS_DB_COMMIT", "unknown")
    try:
        commit = subprocess.run(["git", "-C", db, "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    print("// @generated by shared/fpga/scripts/gen-devices-ecp5.py from Project Trellis's database")
    print(f"// (prjtrellis-db {commit}, CC0 1.0) and the capacities nextpnr-ecp5 reports")
    print("// (scripts/ecp5-available.json). Do not edit by hand: see DEVICES.md.")
    print()
    print("use super::{Device, Package, Pin, Vref};")
    print()
    print("/// Every ECP5 part, in the order `GET /v1/targets` lists them.")
    print("pub(super) static DEVICES: &[Device] = &[")
    print("\n".join(parts))
    print("];")
    print()
    print("\n\n".join(pin_tables))


if __name__ == "__main__":
    main()
