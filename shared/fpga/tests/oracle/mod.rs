//! Shared loading for the oracle tests: recordings made by `fixtures/bad/generate.sh`.
//!
//! The committed recordings live in `fixtures/bad`; set `FPGA_ORACLE_DIR` to a directory the
//! generator wrote (`bash shared/fpga/fixtures/bad/generate.sh /tmp/oracle`) to compare against
//! live tool results instead.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use openqq_fpga::{FileNames, Input, Report};
use serde_json::Value;

pub mod corpus;

pub struct Oracle {
    dir: PathBuf,
    texts: HashMap<String, String>,
}

impl Oracle {
    pub fn load() -> Self {
        let dir = std::env::var_os("FPGA_ORACLE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad"));
        Self { dir, texts: HashMap::new() }
    }

    /// Parses one of the generator's JSON files (`cases.json`, `mutants.json`).
    pub fn json(&self, name: &str) -> Value {
        let path = self.dir.join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
    }

    pub fn text(&mut self, rel: &str) -> String {
        let dir = &self.dir;
        self.texts
            .entry(rel.to_owned())
            .or_insert_with(|| {
                std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
            })
            .clone()
    }

    pub fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
    }
}

/// The inputs of one recorded run, as `validate()` takes them.
pub struct Run {
    pub device: String,
    pub package: String,
    pub netlist: String,
    pub pcf: String,
    pub bitstream: Option<Vec<u8>>,
    pub top: Option<String>,
    pub allow_unconstrained: bool,
}

impl Run {
    pub fn validate(&self) -> Report {
        openqq_fpga::validate(&Input {
            device: &self.device,
            package: &self.package,
            netlist: &self.netlist,
            constraints: Some(&self.pcf),
            bitstream: self.bitstream.as_deref(),
            top: self.top.as_deref(),
            allow_unconstrained: self.allow_unconstrained,
            files: FileNames { netlist: None, constraints: Some("input.pcf"), bitstream: None },
            budget: None,
            started: None,
        })
    }
}

pub fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("recording lacks string field {key}: {v}"))
}
