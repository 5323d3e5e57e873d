//! The designs the test server answers from: `<dir>/<design>/{design.v, tb.v, reference.v,
//! not_equivalent.v, broken_synth.v, spec.md}` (any file may be missing; a reply that needs a
//! missing one is a 500), and which design a prompt asks for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::extract;

/// The files of one design, by name.
#[derive(Debug, Clone)]
pub(crate) struct Design {
    pub name: String,
    pub files: BTreeMap<String, String>,
}

impl Design {
    pub fn file(&self, name: &str) -> Option<&str> {
        self.files.get(name).map(String::as_str)
    }

    /// The top module of `code`: the one named like the design, else the one nobody instantiates.
    pub fn top_of(&self, code: &str) -> String {
        if extract::module_names(code).contains(&self.name) {
            return self.name.clone();
        }
        extract::top_module(code).unwrap_or_else(|| self.name.clone())
    }
}

/// Why the designs could not be read.
#[derive(Debug, thiserror::Error)]
#[error("the designs at {path} could not be read")]
pub struct CorpusError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Files read from each design's directory.
const FILES: [&str; 7] =
    ["design.v", "tb.v", "reference.v", "not_equivalent.v", "broken_synth.v", "spec.md", "design.pcf"];

pub(crate) fn load(dir: &Path) -> Result<Vec<Design>, CorpusError> {
    let error = |path: &Path| {
        let path = path.to_owned();
        move |source| CorpusError { path, source }
    };
    let mut designs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(error(dir))? {
        let entry = entry.map_err(error(dir))?;
        if !entry.file_type().map_err(error(&entry.path()))?.is_dir() {
            continue;
        }
        let mut files = BTreeMap::new();
        for file in FILES {
            let path = entry.path().join(file);
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    files.insert(file.to_owned(), text);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(error(&path)(e)),
            }
        }
        designs.push(Design { name: entry.file_name().to_string_lossy().into_owned(), files });
    }
    designs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(designs)
}

/// The design `prompt` asks for: the one whose name appears earliest as a whole word (the
/// longer name on a tie), else the one whose spec's first line the prompt contains.
pub(crate) fn pick<'a>(designs: &'a [Design], prompt: &str) -> Option<&'a Design> {
    let prompt_lower = prompt.to_ascii_lowercase();
    let by_name = designs
        .iter()
        .filter_map(|d| word_at(&prompt_lower, &d.name.to_ascii_lowercase()).map(|at| (at, d)))
        .min_by(|(a, x), (b, y)| a.cmp(b).then(y.name.len().cmp(&x.name.len())));
    if let Some((_, design)) = by_name {
        return Some(design);
    }
    designs.iter().find(|d| {
        d.file("spec.md")
            .and_then(|spec| spec.lines().map(str::trim).find(|l| !l.is_empty()))
            .is_some_and(|first| prompt.contains(first.trim_start_matches('#').trim()))
    })
}

fn word_at(text: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        !text[..at].chars().next_back().is_some_and(ident) && !text[at + word.len()..].chars().next().is_some_and(ident)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(name: &str, spec: Option<&str>) -> Design {
        let mut files = BTreeMap::new();
        if let Some(spec) = spec {
            files.insert("spec.md".to_owned(), spec.to_owned());
        }
        Design { name: name.to_owned(), files }
    }

    #[test]
    fn the_design_named_earliest_in_the_prompt_is_picked() {
        let designs = [design("counter", None), design("uart_tx", None)];
        let prompt = "Top module: uart_tx\nDesign: a UART transmitter with a bit counter";
        assert_eq!(pick(&designs, prompt).unwrap().name, "uart_tx");
        assert_eq!(pick(&designs, "an 8-bit COUNTER please").unwrap().name, "counter");
        assert!(pick(&designs, "a counters_bank").is_none());
    }

    #[test]
    fn a_prompt_quoting_a_spec_picks_that_design() {
        let designs = [design("alu", Some("# A 4-bit ALU with carry\n\nMore.")), design("fsm", None)];
        assert_eq!(pick(&designs, "Please build: A 4-bit ALU with carry").unwrap().name, "alu");
    }
}
