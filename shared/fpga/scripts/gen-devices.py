#!/usr/bin/env python3
"""Generates shared/fpga/src/ice40/device/generated.rs from Project IceStorm's chip database.

Usage: scripts/gen-devices.py [CHIPDB_DIR] > src/ice40/device/generated.rs
CHIPDB_DIR defaults to /usr/share/fpga-icestorm/chipdb (Debian package fpga-icestorm-chipdb).

Only a few sections of each chipdb-*.txt matter to the validator: tile counts (capacities),
`.pins` (package pin -> IO tile x y z), `.gbufpin` (pads that drive a global network) and
`.extra_cell` (PLL, DSP, SPRAM, oscillators ... plus the PLL output pads and the packages where
a PLL is not bonded, listed as `LOCKED`).
"""
import os
import subprocess
import sys

CHIPDB = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/fpga-icestorm/chipdb"

# nextpnr-ice40 0.4 device flag -> (chipdb die, package suffix, default package).
# lp4k/hx4k are the 8k die sold with fewer bonded pins: their packages carry a ":4k" suffix
# in the chipdb, which nextpnr strips from the name the user types.
DEVICES = [
    ("lp384", "384", "", "qn32", True),
    ("lp1k", "1k", "", "tq144", True),
    ("hx1k", "1k", "", "tq144", True),
    ("lp4k", "8k", ":4k", "tq144", True),
    ("hx4k", "8k", ":4k", "tq144", True),
    ("lp8k", "8k", "", "ct256", True),
    ("hx8k", "8k", "", "ct256", True),
    ("up3k", "5k", "", "sg48", True),
    ("up5k", "5k", "", "sg48", True),
    ("u1k", "u4k", "", "sg48", True),
    ("u2k", "u4k", "", "sg48", True),
    ("u4k", "u4k", "", "sg48", True),
    # In the chip database but without a device flag in nextpnr-ice40 0.4.
    ("lm4k", "lm4k", "", "cm49", False),
]

# chipdb extra-cell type -> resource name as nextpnr-ice40 prints it in --report.
EXTRA_NAMES = {
    "PLL": "ICESTORM_PLL", "MAC16": "ICESTORM_DSP", "SPRAM": "ICESTORM_SPRAM",
    "HFOSC": "ICESTORM_HFOSC", "LFOSC": "ICESTORM_LFOSC", "WARMBOOT": "SB_WARMBOOT",
    "I2C": "SB_I2C", "SPI": "SB_SPI", "IO_I3C": "IO_I3C", "LEDDA_IP": "SB_LEDDA_IP",
    "RGBA_DRV": "SB_RGBA_DRV", "RGB_DRV": "SB_RGB_DRV", "LED_DRV_CUR": "SB_LED_DRV_CUR",
    "SMCCLK": "SMCCLK",
}


# Hard cells that nextpnr-ice40 0.4 places at fixed coordinates (SB_I2C and SB_SPI by their
# BUS_ADDR74 parameter), whose sites the validator compares with those coordinates.
FIXED_SITES = ("I2C", "SPI")


def parse(path):
    die = {"logic": 0, "ramb": 0, "io": 0, "pins": {}, "gbuf": {}, "extra": [], "plls": [], "sites": [], "oscs": []}
    section, cur = None, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                section = None
                continue
            if line.startswith("."):
                words = line.split()
                section = words[0]
                if section == ".device":
                    die["width"], die["height"] = int(words[2]), int(words[3])
                elif section == ".logic_tile":
                    die["logic"] += 1
                elif section == ".ramb_tile":
                    die["ramb"] += 1
                elif section == ".io_tile":
                    die["io"] += 1
                elif section == ".pins":
                    cur = []
                    die["pins"][words[1]] = cur
                elif section == ".extra_cell":
                    die["extra"].append(words[-1])
                    if len(words) == 5 and words[-1] in FIXED_SITES:
                        die["sites"].append((EXTRA_NAMES[words[-1]], int(words[1]), int(words[2]), int(words[3])))
                    if words[-1] == "PLL":
                        cur = {"locked": [], "pads": []}
                        die["plls"].append(cur)
                    elif words[-1] in ("HFOSC", "LFOSC"):
                        cur = {"cell": "SB_" + words[-1], "clk": words[-1][:2] + "OSC", "network": None, "fabric": False}
                        die["oscs"].append(cur)
                continue
            words = line.split()
            if section == ".pins":
                cur.append((words[0], int(words[1]), int(words[2]), int(words[3])))
            elif section == ".gbufpin":
                die["gbuf"][(int(words[0]), int(words[1]), int(words[2]))] = int(words[3])
            elif section == ".extra_cell" and die["extra"][-1] in ("HFOSC", "LFOSC"):
                # The clock's global network, and whether the fabric output exists under the
                # name nextpnr looks for (the u4k database spells HFOSC's CLKLF_FABRIC).
                clk = "CLK" + die["extra"][-1][:2]
                if words[0] == clk and words[3].startswith("glb_netwk_"):
                    cur["network"] = int(words[3][len("glb_netwk_"):])
                elif words[0] == clk + "_FABRIC":
                    cur["fabric"] = True
            elif section == ".extra_cell" and die["extra"][-1] == "PLL":
                if words[0] == "LOCKED":
                    cur["locked"] = words[1:]
                elif words[0] in ("PLLOUT_A", "PLLOUT_B"):
                    cur["pads"].append((int(words[1]), int(words[2]), int(words[3])))
                    cur[words[0]] = (int(words[1]), int(words[2]), int(words[3]))
    return die


def pin_sort_key(pin):
    # Natural order: "A2" before "A10", "9" before "10".
    name = pin[0]
    letters = name.rstrip("0123456789")
    digits = name[len(letters):]
    return (letters, int(digits) if digits else -1, name)


def package_version():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "fpga-icestorm-chipdb"],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    dies = {}
    for _, die, _, _, _ in DEVICES:
        if die not in dies:
            dies[die] = parse(os.path.join(CHIPDB, f"chipdb-{die}.txt"))
    out = []
    w = out.append
    w("// @generated by shared/fpga/scripts/gen-devices.py -- do not edit by hand.")
    w(f"// Source: Project IceStorm chip database, Debian package fpga-icestorm-chipdb {package_version()},")
    w("// files chipdb-{384,1k,8k,5k,u4k,lm4k}.txt. Licence of the source data: ISC")
    w("// (Copyright 2012-2018 Clifford Wolf, Marcus Comstedt, Mathias Lasser, Roland Lutz,")
    w("// Piotr Esden-Tempski). See shared/fpga/DEVICES.md.")
    w("")
    w("use super::{Device, Oscillator, Package, Pin, PllSite};")
    w("")
    # One pin table per (die, chipdb package): devices sharing a die share the statics.
    for die_name, die in dies.items():
        for pkg, pins in die["pins"].items():
            locked_pads = set()
            open_pads = set()
            for pll in die["plls"]:
                (locked_pads if pkg in pll["locked"] else open_pads).update(pll["pads"])
            ident = f"PINS_{die_name}_{pkg}".upper().replace(":", "_")
            w(f"static {ident}: &[Pin] = &[")
            for name, x, y, z in sorted(pins, key=pin_sort_key):
                gb = die["gbuf"].get((x, y, z))
                gb_s = f"Some({gb})" if gb is not None else "None"
                gb_b = "true" if gb is not None else "false"
                pll = "true" if (x, y, z) in open_pads else "false"
                w(f'    Pin {{ name: "{name}", x: {x}, y: {y}, z: {z}, global_buffer: {gb_b}, '
                  f'global_network: {gb_s}, pll_pad: {pll} }},')
            w("];")
    w("")
    w("/// Every device, in nextpnr's order of device flags.")
    w("pub(super) static DEVICES: &[Device] = &[")
    for name, die_name, suffix, default, nextpnr in DEVICES:
        die = dies[die_name]
        w("    Device {")
        w(f'        name: "{name}",')
        w(f'        die: "{die_name}",')
        w(f"        supported_by_nextpnr: {str(nextpnr).lower()},")
        w(f'        default_package: "{default}",')
        w("        packages: &[")
        for pkg in sorted(die["pins"]):
            if suffix:
                if not pkg.endswith(suffix):
                    continue
                shown = pkg[: -len(suffix)]
            else:
                if ":" in pkg:
                    continue
                shown = pkg
            ident = f"PINS_{die_name}_{pkg}".upper().replace(":", "_")
            w(f'            Package {{ name: "{shown}", pins: {ident} }},')
        w("        ],")
        w(f"        width: {die['width']},")
        w(f"        height: {die['height']},")
        w(f"        logic_tiles: {die['logic']},")
        w(f"        ram_tiles: {die['ramb']},")
        w(f"        io_tiles: {die['io']},")
        counts = {}
        for cell in die["extra"]:
            counts[EXTRA_NAMES[cell]] = counts.get(EXTRA_NAMES[cell], 0) + 1
        extras = ", ".join(f'("{k}", {v})' for k, v in sorted(counts.items()))
        w(f"        extra_cells: &[{extras}],")
        sites = ", ".join(f'("{t}", ({x}, {y}, {z}))' for t, x, y, z in die["sites"])
        w(f"        fixed_sites: &[{sites}],")
        oscs = ", ".join(
            f'Oscillator {{ cell: "{o["cell"]}", global_network: {o["network"]}, fabric_output: {str(o["fabric"]).lower()} }}'
            for o in die["oscs"]
        )
        w(f"        oscillators: &[{oscs}],")
        w("        plls: &[")
        for pll in die["plls"]:
            locked = []
            for pkg in pll["locked"]:
                if suffix and pkg.endswith(suffix):
                    locked.append(pkg[: -len(suffix)])
                elif not suffix and ":" not in pkg:
                    locked.append(pkg)
            a, b = pll["PLLOUT_A"], pll["PLLOUT_B"]
            shown = ", ".join(f'"{l}"' for l in sorted(locked))
            w(f"            PllSite {{ out_a: ({a[0]}, {a[1]}, {a[2]}), out_b: ({b[0]}, {b[1]}, {b[2]}), locked_in: &[{shown}] }},")
        w("        ],")
        w("    },")
    w("];")
    print("\n".join(out))


if __name__ == "__main__":
    main()
