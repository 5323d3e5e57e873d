//! Reading code out of a plain-text answer: fenced blocks, which one is the design, and the
//! names of the modules it declares. Pure and total over any text.

/// One fenced block: its info string's first word, lower-cased, and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub lang: String,
    pub body: String,
}

/// More fenced blocks than the limit: the answer is refused rather than scanned further.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooManyBlocks;

/// The fenced blocks of `text` (```` ``` ```` or `~~~`, three or more, indented at most three
/// spaces), at most `max`. A block left open at the end (an answer cut short) runs to the end.
pub(crate) fn fenced_blocks(text: &str, max: usize) -> Result<Vec<Block>, TooManyBlocks> {
    let mut blocks = Vec::new();
    let mut open: Option<(char, usize, String, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let fence = (indent <= 3).then(|| fence(trimmed)).flatten();
        match (&mut open, fence) {
            (None, Some((ch, len, info))) => {
                let lang = info.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
                open = Some((ch, len, lang, Vec::new()));
            }
            (Some((ch, len, _, _)), Some((c, l, info))) if c == *ch && l >= *len && info.is_empty() => {
                if let Some((_, _, lang, lines)) = open.take() {
                    if blocks.len() == max {
                        return Err(TooManyBlocks);
                    }
                    blocks.push(Block { lang, body: join(&lines) });
                }
            }
            (Some((_, _, _, lines)), _) => lines.push(line),
            (None, None) => {}
        }
    }
    if let Some((_, _, lang, lines)) = open {
        if blocks.len() == max {
            return Err(TooManyBlocks);
        }
        blocks.push(Block { lang, body: join(&lines) });
    }
    Ok(blocks)
}

fn join(lines: &[&str]) -> String {
    let mut body = lines.join("\n");
    body.push('\n');
    body
}

/// A fence opening `line`: its character, its length and the info string after it.
fn fence(line: &str) -> Option<(char, usize, &str)> {
    let ch = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|c| *c == ch).count();
    let info = line[len..].trim();
    (len >= 3 && !(ch == '`' && info.contains('`'))).then_some((ch, len, info))
}

/// Info strings of blocks that may hold the design.
const HDL_LANGS: [&str; 5] = ["verilog", "systemverilog", "v", "sv", ""];

/// The block holding the design: among Verilog (or untagged) blocks that declare a module, those
/// declaring `module TOP` when the top is known, the largest.
pub(crate) fn design_block<'a>(blocks: &'a [Block], top: Option<&str>) -> Option<&'a Block> {
    let hdl: Vec<&Block> =
        blocks.iter().filter(|b| HDL_LANGS.contains(&b.lang.as_str()) && !module_names(&b.body).is_empty()).collect();
    let with_top: Vec<&Block> = match top {
        Some(top) => hdl.iter().copied().filter(|b| module_names(&b.body).iter().any(|m| m == top)).collect(),
        None => Vec::new(),
    };
    let pool = if with_top.is_empty() { hdl } else { with_top };
    pool.into_iter().max_by_key(|b| b.body.len())
}

/// The pin constraints block, if the answer has one.
pub(crate) fn pcf_block(blocks: &[Block]) -> Option<&Block> {
    blocks.iter().find(|b| b.lang == "pcf")
}

/// The modules `code` declares, in order (comments skipped).
pub(crate) fn module_names(code: &str) -> Vec<String> {
    declarations(&strip_comments(code)).into_iter().map(|(name, _)| name).collect()
}

/// The top module of `code`: one no other module instantiates (the last such, as designs are
/// usually written bottom-up), or `None` when `code` declares no module.
pub(crate) fn top_module(code: &str) -> Option<String> {
    let code = strip_comments(code);
    let modules = declarations(&code);
    let mut uninstantiated = modules.iter().filter(|(name, _)| {
        !modules.iter().any(|(other, body)| other != name && words(body).any(|w| w == name.as_str()))
    });
    uninstantiated.next_back().or(modules.last()).map(|(name, _)| name.clone())
}

/// Each `module NAME … endmodule` as (name, body).
fn declarations(code: &str) -> Vec<(String, &str)> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "module") {
        let after = &rest[at + "module".len()..];
        let name: String = after.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let end = find_word(after, "endmodule").unwrap_or(after.len());
        if !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) {
            found.push((name, &after[..end]));
        }
        rest = &after[end..];
    }
    found
}

/// The byte offset of `word` in `text` standing as a whole identifier.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(ident) && !after.is_some_and(ident) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')).filter(|w| !w.is_empty())
}

/// `code` without `//` and `/* */` comments (string literals are rare enough in HDL not to matter
/// here: at worst a module name is missed and the model's own `top` is used).
fn strip_comments(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                out.push(' ');
                rest = rest[b + 2..].find("*/").map_or("", |e| &rest[b + 2 + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = "Here is the design.\n\n```verilog\nmodule half(input a, output y);\n  assign y = a;\nendmodule\n\nmodule blinky(input clk, output led);\n  half h(.a(clk), .y(led));\nendmodule\n```\n\nAnd the pins:\n\n```pcf\nset_io led 99\n```\n";

    #[test]
    fn fenced_blocks_keep_their_language_and_body() {
        let blocks = fenced_blocks(ANSWER, 8).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].lang, "verilog");
        assert!(blocks[0].body.starts_with("module half"));
        assert_eq!(pcf_block(&blocks).unwrap().body, "set_io led 99\n");
    }

    #[test]
    fn more_blocks_than_the_limit_are_refused() {
        let text = "```\nmodule a; endmodule\n```\n".repeat(5);
        assert_eq!(fenced_blocks(&text, 4), Err(TooManyBlocks));
        assert_eq!(fenced_blocks(&text, 5).unwrap().len(), 5);
    }

    #[test]
    fn a_block_cut_short_runs_to_the_end() {
        let blocks = fenced_blocks("```systemverilog\nmodule m;\n", 4).unwrap();
        assert_eq!(blocks, vec![Block { lang: "systemverilog".into(), body: "module m;\n".into() }]);
    }

    #[test]
    fn the_design_block_is_the_one_declaring_the_top_else_the_largest() {
        let text = "```verilog\nmodule small; endmodule\n```\n```\nmodule larger_one(input a); wire w; endmodule\n```\n```python\nprint('module x')\n```\n";
        let blocks = fenced_blocks(text, 8).unwrap();
        assert!(design_block(&blocks, None).unwrap().body.contains("larger_one"));
        assert!(design_block(&blocks, Some("small")).unwrap().body.contains("small"));
        assert!(design_block(&blocks, Some("absent")).unwrap().body.contains("larger_one"));
    }

    #[test]
    fn no_block_declaring_a_module_means_no_design() {
        let blocks = fenced_blocks("```\nnot hdl\n```\n", 8).unwrap();
        assert_eq!(design_block(&blocks, None), None);
    }

    #[test]
    fn the_top_is_the_module_nobody_instantiates() {
        let code = &fenced_blocks(ANSWER, 8).unwrap()[0].body;
        assert_eq!(module_names(code), vec!["half".to_owned(), "blinky".to_owned()]);
        assert_eq!(top_module(code).as_deref(), Some("blinky"));
    }

    #[test]
    fn commented_out_modules_are_not_declarations() {
        let code = "// module old(input a);\n/* module older;\nendmodule */\nmodule new_one; endmodule\n";
        assert_eq!(module_names(code), vec!["new_one".to_owned()]);
        assert_eq!(top_module("no modules here"), None);
    }
}
