#!/usr/bin/env python3
"""Checks that the Lambda functions' development build (`cargo lambda watch` runs
`cargo run -p openqq-lambda -F dev-build`) uses the very dependency builds the workspace build
made, so the test command compiles the dependencies once. When a dependency is built twice, the
two builds gave it different features: the message names it and what to turn on in
shared/dev-features/Cargo.toml.

    scripts/lib/same-build.py        (after both builds; each is asked again, a no-op)
"""
import json
import re
import subprocess
import sys

LAMBDA = ["-p", "openqq-lambda", "--bins", "-F", "dev-build"]
WORKSPACE = ["--workspace", "--all-targets"]
OWN = {"openqq-lambda"}


# A compiled unit's identity: the hash in its file names (`deps/libserde_json-a8204ae6ad59b441.rlib`,
# `build/serde_json-2261e9df698e75e7/build-script-build`). The workspace build also copies its
# members' libraries to unhashed names, which carry none.
UNIT = re.compile(r"-([0-9a-f]{16})(?:[./]|$)")


def artifacts(args):
    """{package id: set of unit hashes} for each compiled unit of `cargo build ARGS`."""
    out = subprocess.run(
        ["cargo", "build", "--locked", "--message-format=json", *args],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    files = {}
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact":
            units = files.setdefault(msg["package_id"], set())
            for path in msg["filenames"]:
                units.update(UNIT.findall(path))
    return files


def name(package_id):
    # "registry+https://…#serde_json@1.0.154" or "path+file:///…/core#openqq-core@0.1.0"
    return package_id.rsplit("#", 1)[-1]


def main():
    workspace = artifacts(WORKSPACE)
    lambda_build = artifacts(LAMBDA)
    twice = []
    for package, files in sorted(lambda_build.items()):
        if name(package).split("@")[0] in OWN:
            continue
        if not files <= workspace.get(package, set()):
            twice.append(name(package))
    if twice:
        print(
            "The Lambda functions' development build compiles these again with other features than "
            "the workspace build gave them:\n  " + "\n  ".join(twice) + "\n"
            "Compare `cargo tree -e features -i CRATE` for the workspace and for "
            "`-p openqq-lambda -F dev-build`, and turn the missing features on in "
            "shared/dev-features/Cargo.toml.",
            file=sys.stderr,
        )
        return 1
    sys.stdout.flush()
    print(f"the functions' development build shares all {len(lambda_build) - 1} dependency builds with the workspace's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
