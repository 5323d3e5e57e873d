//! The Lambda artifacts against the runtime they deploy to. `cargo lambda build --release`
//! (scripts/lambda-build.sh) writes one `bootstrap` per function under `target/lambda/<bin>/`;
//! `provided.al2023` runs it with Amazon Linux 2023's glibc 2.34 and little else. A binary linked
//! against a newer glibc, or against a shared library the image lacks, starts on a developer's
//! machine and fails on Lambda at its first cold start, so each one is read here: its
//! architecture must be the template's, the glibc symbol versions it imports at most 2.34, and
//! every library it needs one of the base image's glibc and libgcc libraries.

use crate::template::{properties, template, FUNCTIONS};
use goblin::elf::{header, Elf};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The newest glibc `provided.al2023` has (Amazon Linux 2023 ships glibc 2.34).
const GLIBC_ON_LAMBDA: (u32, u32) = (2, 34);

/// The shared libraries of glibc and libgcc, which every `provided.al2023` image has.
const BASE_IMAGE_LIBRARIES: [&str; 8] = [
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "librt.so.1",
    "libpthread.so.0",
    "libgcc_s.so.1",
    "ld-linux-aarch64.so.1",
    "ld-linux-x86-64.so.2",
];

/// What an executable needs from the system it runs on.
#[derive(Debug, Default)]
struct Needs {
    machine: u16,
    libraries: BTreeSet<String>,
    /// Every `GLIBC_x.y` symbol version it imports.
    glibc: BTreeSet<(u32, u32)>,
}

fn needs(path: &Path) -> Needs {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let elf = Elf::parse(&bytes).unwrap_or_else(|e| panic!("{} is not an ELF executable: {e}", path.display()));
    let mut glibc = BTreeSet::new();
    if let Some(verneed) = &elf.verneed {
        for need in verneed.iter() {
            for aux in need.iter() {
                let name = elf.dynstrtab.get_at(aux.vna_name).unwrap_or_default();
                glibc.extend(glibc_version(name));
            }
        }
    }
    Needs { machine: elf.header.e_machine, libraries: elf.libraries.iter().map(|l| l.to_string()).collect(), glibc }
}

/// `GLIBC_2.34` is (2, 34); `GLIBC_2.2.5` is (2, 2); anything else is no glibc version.
fn glibc_version(name: &str) -> Option<(u32, u32)> {
    let mut parts = name.strip_prefix("GLIBC_")?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Why `needs` would not start on `provided.al2023` for `architecture`; empty when it would.
fn problems(needs: &Needs, architecture: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let machine = match architecture {
        "arm64" => header::EM_AARCH64,
        "x86_64" => header::EM_X86_64,
        other => return vec![format!("{other} is no Lambda architecture")],
    };
    if needs.machine != machine {
        problems.push(format!("built for machine {}, not {architecture}", header::machine_to_str(needs.machine)));
    }
    for library in needs.libraries.iter().filter(|l| !BASE_IMAGE_LIBRARIES.contains(&l.as_str())) {
        problems.push(format!("needs {library}, which provided.al2023 does not have"));
    }
    if let Some(&(major, minor)) = needs.glibc.iter().max().filter(|v| **v > GLIBC_ON_LAMBDA) {
        problems.push(format!("imports GLIBC_{major}.{minor} symbols; provided.al2023 has glibc 2.34"));
    }
    problems
}

/// Where `cargo lambda build` put the artifacts: `OPENQQ_LAMBDA_ARTIFACTS` (the test script sets
/// it after building them). Without it the test is skipped, except under CI.
fn artifacts() -> Option<PathBuf> {
    let found = std::env::var_os("OPENQQ_LAMBDA_ARTIFACTS").map(PathBuf::from);
    openqq_e2e::needed(
        found,
        "the Lambda artifacts",
        "set OPENQQ_LAMBDA_ARTIFACTS; scripts/lambda-build.sh builds them",
    )
}

#[test]
fn each_functions_bootstrap_is_built_for_the_templates_architecture_and_needs_nothing_provided_al2023_lacks() {
    let Some(dir) = artifacts() else { return };
    let t = template();
    for (id, bin) in FUNCTIONS {
        let architecture = properties(&t, id)["Architectures"][0].as_str().unwrap_or_else(|| panic!("{id}: arch"));
        let bootstrap = dir.join(bin).join("bootstrap");
        let needs = needs(&bootstrap);
        assert!(needs.libraries.contains("libc.so.6") && !needs.glibc.is_empty(), "{bin}: {needs:?}");
        let problems = problems(&needs, architecture);
        assert!(problems.is_empty(), "{}: {problems:#?}", bootstrap.display());
    }
}

#[test]
fn a_newer_glibc_a_missing_library_or_another_architecture_is_refused() {
    let fine = Needs {
        machine: header::EM_AARCH64,
        libraries: ["libc.so.6", "libgcc_s.so.1"].map(String::from).into(),
        glibc: [(2, 17), (2, 34)].into(),
    };
    assert!(problems(&fine, "arm64").is_empty(), "{:?}", problems(&fine, "arm64"));
    let newer = Needs { glibc: [(2, 17), (2, 35)].into(), ..fine };
    assert_eq!(problems(&newer, "arm64"), ["imports GLIBC_2.35 symbols; provided.al2023 has glibc 2.34"]);
    let openssl =
        Needs { libraries: ["libc.so.6", "libssl.so.3"].map(String::from).into(), glibc: [(2, 17)].into(), ..newer };
    assert_eq!(problems(&openssl, "arm64"), ["needs libssl.so.3, which provided.al2023 does not have"]);
    assert_eq!(problems(&openssl, "x86_64").len(), 2, "an arm64 binary is refused for x86_64");
}

#[test]
fn the_reader_finds_the_libraries_and_glibc_versions_a_real_executable_imports() {
    // This test's own executable, linked by the host's toolchain against the host's glibc.
    let needs = needs(&std::env::current_exe().unwrap());
    assert!(needs.libraries.contains("libc.so.6"), "{needs:?}");
    assert!(needs.glibc.iter().any(|v| *v >= (2, 2)), "{needs:?}");
    assert_eq!(glibc_version("GLIBC_2.2.5"), Some((2, 2)));
    assert_eq!(glibc_version("GLIBC_PRIVATE"), None);
}
