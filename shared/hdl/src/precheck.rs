//! The static check every source passes before a tool sees it: constructs that would let the
//! source reach the machine beyond its work directory are refused, naming file and line.
//!
//! The tools run in an empty work directory with limits (see [`crate::sandbox`]), but they run
//! as the platform's user: Icarus Verilog and Yosys both open any path a source names. So the
//! source may name only files of its own work directory, by a plain name, and only through
//! constructs that can be checked without preprocessing:
//!
//! - `` `include "name" ``: `name` must be one of the submitted files (no paths, no `<…>`, no
//!   macro).
//! - `$fopen`, `$fopenr`, `$fopenw`, `$fopena`, `$readmemh`, `$readmemb`, `$writememh`,
//!   `$writememb`, `$dumpfile`: the first argument must be a string literal that is a safe
//!   file name (no `/`, no `..`), directly followed by `,` or `)`; a name built at run time
//!   (a variable, a concatenation, a macro) is refused. What they write stays in the work
//!   directory, bounded by the file-size limit.
//! - Every other system task or function must be on [`ALLOWED_SYSTEM_NAMES`] (display, file
//!   descriptors from `$fopen`, simulation control, math, random, assertions, …). Anything
//!   else, `$system` first, is refused, and so is any name the check does not know
//!   (`$sdf_annotate`, `$input`, `$save`, `$log`, `$list`, `$scope`, …).
//! - Macros cannot build a system name: token pasting (` `` `) is refused, as is a system name
//!   (or a bare `$`) joined to a macro use, and a bare `$` inside a `` `define ``.
//!
//! The tools' own ways out are closed by how they are invoked: no VPI modules (`-m`), no
//! include or library directories, no plusargs, `vvp -N` so `$stop` ends the run instead of
//! opening the interactive prompt, stdin from `/dev/null`, an empty environment.

use crate::error::Refusal;
use crate::source::{is_safe_file_name, SourceFile};

/// System tasks and functions that cannot reach outside the simulation (file descriptors can
/// only come from a checked `$fopen`, or be stdout/stderr).
pub const ALLOWED_SYSTEM_NAMES: &[&str] = &[
    // Output to stdout.
    "$display",
    "$displayb",
    "$displayh",
    "$displayo",
    "$write",
    "$writeb",
    "$writeh",
    "$writeo",
    "$strobe",
    "$strobeb",
    "$strobeh",
    "$strobeo",
    "$monitor",
    "$monitorb",
    "$monitorh",
    "$monitoro",
    "$monitoron",
    "$monitoroff",
    // File descriptors (opened by a checked $fopen, or stdout/stderr).
    "$fdisplay",
    "$fdisplayb",
    "$fdisplayh",
    "$fdisplayo",
    "$fwrite",
    "$fwriteb",
    "$fwriteh",
    "$fwriteo",
    "$fstrobe",
    "$fstrobeb",
    "$fstrobeh",
    "$fstrobeo",
    "$fmonitor",
    "$fmonitorb",
    "$fmonitorh",
    "$fmonitoro",
    "$fclose",
    "$fflush",
    "$fgetc",
    "$fgets",
    "$fscanf",
    "$fread",
    "$feof",
    "$ferror",
    "$fseek",
    "$ftell",
    "$rewind",
    "$ungetc",
    // Simulation control and severity.
    "$finish",
    "$stop",
    "$fatal",
    "$error",
    "$warning",
    "$info",
    // Time.
    "$time",
    "$stime",
    "$realtime",
    "$timeformat",
    "$printtimescale",
    // Random numbers.
    "$random",
    "$urandom",
    "$urandom_range",
    "$dist_uniform",
    "$dist_normal",
    "$dist_exponential",
    "$dist_poisson",
    "$dist_chi_square",
    "$dist_t",
    "$dist_erlang",
    // Conversions and math.
    "$signed",
    "$unsigned",
    "$rtoi",
    "$itor",
    "$realtobits",
    "$bitstoreal",
    "$shortrealtobits",
    "$bitstoshortreal",
    "$cast",
    "$clog2",
    "$ln",
    "$log10",
    "$exp",
    "$sqrt",
    "$pow",
    "$floor",
    "$ceil",
    "$sin",
    "$cos",
    "$tan",
    "$asin",
    "$acos",
    "$atan",
    "$atan2",
    "$hypot",
    "$sinh",
    "$cosh",
    "$tanh",
    "$asinh",
    "$acosh",
    "$atanh",
    // Types and bits.
    "$bits",
    "$size",
    "$high",
    "$low",
    "$left",
    "$right",
    "$increment",
    "$dimensions",
    "$unpacked_dimensions",
    "$countones",
    "$countbits",
    "$onehot",
    "$onehot0",
    "$isunknown",
    "$typename",
    // Strings.
    "$sformat",
    "$sformatf",
    "$swrite",
    "$swriteb",
    "$swriteh",
    "$swriteo",
    "$sscanf",
    // Assertions and formal (Yosys).
    "$past",
    "$rose",
    "$fell",
    "$stable",
    "$changed",
    "$initstate",
    "$anyconst",
    "$anyseq",
    "$allconst",
    "$allseq",
    "$global_clock",
    "$asserton",
    "$assertoff",
    "$assertkill",
    // Waveform dumps (into the file named by a checked $dumpfile, or dump.vcd).
    "$dumpvars",
    "$dumpon",
    "$dumpoff",
    "$dumpall",
    "$dumpflush",
    "$dumplimit",
    // Plusargs (none are passed) and scopes.
    "$test$plusargs",
    "$value$plusargs",
    "$root",
    "$unit",
];

/// System tasks that name a file: allowed only with a literal safe name as first argument.
pub const FILE_SYSTEM_NAMES: &[&str] =
    &["$fopen", "$fopenr", "$fopenw", "$fopena", "$readmemh", "$readmemb", "$writememh", "$writememb", "$dumpfile"];

/// Checks every file of a set; `visible` are the names an `` `include `` may use.
pub(crate) fn check_files(files: &[SourceFile], visible: &[&str]) -> Result<(), Refusal> {
    files.iter().try_for_each(|file| check_text(&file.name, &file.text, visible))
}

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    /// `$name`, or a bare `$` (empty name).
    System(&'a str),
    /// `` `name `` (a directive or a macro use).
    Directive(&'a str),
    /// The contents of `"…"`.
    Str(&'a str),
    /// The end of a `` `define `` (its last line).
    DefineEnd,
    /// Any other single character or word.
    Other(&'a str),
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    line: u32,
    in_define: bool,
}

fn forbidden(file: &str, line: u32, construct: &str, reason: &str) -> Refusal {
    Refusal::Forbidden {
        file: file.to_string(),
        line,
        construct: crate::findings::clip(construct, 64),
        reason: reason.to_string(),
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

impl<'a> Lexer<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn word_end(&self, from: usize) -> usize {
        let bytes = self.text.as_bytes();
        let mut end = from;
        while end < bytes.len() && is_word_byte(bytes[end]) {
            end += 1;
        }
        end
    }

    /// The next token and the line it starts on; comments and whitespace are skipped.
    fn next(&mut self) -> Option<(Token<'a>, u32)> {
        let bytes = self.text.as_bytes();
        loop {
            let b = self.peek()?;
            match b {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    if self.in_define && !self.text[..self.pos - 1].trim_end_matches('\r').ends_with('\\') {
                        self.in_define = false;
                        return Some((Token::DefineEnd, self.line - 1));
                    }
                }
                b'/' if bytes.get(self.pos + 1) == Some(&b'/') => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                b'/' if bytes.get(self.pos + 1) == Some(&b'*') => {
                    self.pos += 2;
                    while self.pos < bytes.len() && !self.text[self.pos..].starts_with("*/") {
                        if bytes[self.pos] == b'\n' {
                            self.line += 1;
                        }
                        self.pos += 1;
                    }
                    self.pos = (self.pos + 2).min(bytes.len());
                }
                b if b.is_ascii_whitespace() => self.pos += 1,
                _ => break,
            }
        }
        let line = self.line;
        let start = self.pos;
        let token = match bytes[start] {
            b'"' => {
                let mut end = start + 1;
                while end < bytes.len() && bytes[end] != b'"' && bytes[end] != b'\n' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let end = end.min(bytes.len());
                self.pos = (end + 1).min(bytes.len());
                Token::Str(&self.text[start + 1..end])
            }
            b'$' => {
                self.pos = self.word_end(start + 1);
                Token::System(&self.text[start..self.pos])
            }
            b'`' => {
                self.pos = self.word_end(start + 1);
                if self.pos == start + 1 {
                    // `` ` `` followed by a non-word character: `` `` ``, `` `" ``, `` `\`" ``.
                    self.pos = start + 1 + self.text[start + 1..].chars().next().map_or(0, char::len_utf8);
                    Token::Directive(&self.text[start..self.pos])
                } else {
                    let name = &self.text[start + 1..self.pos];
                    if name == "define" {
                        self.in_define = true;
                    }
                    Token::Directive(name)
                }
            }
            b'\\' => {
                // An escaped identifier runs to the next whitespace; it names, it never calls.
                let mut end = start + 1;
                while end < bytes.len() && !bytes[end].is_ascii_whitespace() {
                    end += 1;
                }
                self.pos = end;
                Token::Other(&self.text[start..end])
            }
            b if is_word_byte(b) => {
                self.pos = self.word_end(start);
                Token::Other(&self.text[start..self.pos])
            }
            _ => {
                let len = self.text[start..].chars().next().map_or(1, char::len_utf8);
                self.pos = start + len;
                Token::Other(&self.text[start..self.pos])
            }
        };
        Some((token, line))
    }
}

/// Checks one file's text (see the module documentation for the rules).
pub fn check_text(file: &str, text: &str, visible: &[&str]) -> Result<(), Refusal> {
    let mut lexer = Lexer { text, pos: 0, line: 1, in_define: false };
    while let Some((token, line)) = lexer.next() {
        match token {
            Token::Directive("`") | Token::Directive("``") => {
                return Err(forbidden(file, line, "``", "token pasting could build a system task name"));
            }
            Token::Directive("include") => {
                let target = lexer.next();
                match target {
                    Some((Token::Str(name), _)) if visible.contains(&name) && is_safe_file_name(name) => {}
                    Some((Token::Str(name), _)) => {
                        return Err(forbidden(
                            file,
                            line,
                            &format!("`include \"{name}\""),
                            "an include must name one of the submitted files, without a path",
                        ))
                    }
                    _ => {
                        return Err(forbidden(
                            file,
                            line,
                            "`include",
                            "an include must name a submitted file as a string literal",
                        ))
                    }
                }
            }
            Token::System(name) => {
                let joined = lexer.peek() == Some(b'`');
                if joined {
                    return Err(forbidden(file, line, name, "a system name joined to a macro could become any name"));
                }
                if name == "$" {
                    let next = text[lexer.pos..].trim_start_matches([' ', '\t']).bytes().next();
                    let ordinary = matches!(next, Some(b']' | b')' | b':' | b',' | b';' | b'}' | b'-' | b'+'));
                    if lexer.in_define || !ordinary {
                        return Err(forbidden(file, line, "$", "a bare '$' could be joined into a system name"));
                    }
                } else if FILE_SYSTEM_NAMES.contains(&name) {
                    check_file_argument(&mut lexer, file, line, name)?;
                } else if !ALLOWED_SYSTEM_NAMES.contains(&name) {
                    return Err(forbidden(
                        file,
                        line,
                        name,
                        "this system task or function is not allowed (it may reach the machine, or is unknown)",
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `NAME ( "safe-name" ,|)` or a refusal.
fn check_file_argument(lexer: &mut Lexer<'_>, file: &str, line: u32, name: &str) -> Result<(), Refusal> {
    let refuse = |what: &str| {
        Err(forbidden(
            file,
            line,
            &format!("{name}({what})"),
            "a file may be named only by a string literal holding a plain file name (no '/' or '..')",
        ))
    };
    if !matches!(lexer.next(), Some((Token::Other("("), _))) {
        return refuse("");
    }
    let Some((Token::Str(path), _)) = lexer.next() else {
        return refuse("…");
    };
    if !is_safe_file_name(path) {
        return refuse(&format!("\"{path}\""));
    }
    match lexer.next() {
        Some((Token::Other(")" | ","), _)) => Ok(()),
        _ => refuse(&format!("\"{path}\" …")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Refusal {
        check_text("tb.v", text, &["tb.v", "defs.vh"]).expect_err(text)
    }

    fn accepted(text: &str) {
        check_text("tb.v", text, &["tb.v", "defs.vh"]).unwrap_or_else(|e| panic!("{text}: {e}"));
    }

    #[test]
    fn ordinary_testbench_constructs_are_accepted() {
        accepted(
            "`timescale 1ns/1ps\n`include \"defs.vh\"\nmodule tb; integer fd; reg [7:0] m [0:3];\n\
             initial begin $display(\"%0d $fopen(/etc/passwd)\", $time); // $system(\"x\")\n\
             /* $readmemh(\"/etc/x\") */ $readmemh(\"rom.hex\", m); fd = $fopen(\"out.txt\", \"w\");\n\
             $fwrite(fd, \"x\"); $fclose(fd); $dumpfile(\"wave.vcd\"); $dumpvars(0, tb);\n\
             if ($test$plusargs(\"v\")) $error(\"e\"); q[$] = 1; x = q[1:$];\n\
             $fatal(1, \"f\"); $finish; end\nwire \\$fopen = 1; endmodule\n",
        );
    }

    #[test]
    fn file_access_by_path_is_refused_with_its_line() {
        let err = refused("module tb;\ninitial begin\n  fd = $fopen(\"/etc/passwd\", \"r\");\nend\nendmodule\n");
        assert!(matches!(err, Refusal::Forbidden { line: 3, ref construct, .. } if construct.contains("/etc/passwd")));
        refused("initial $readmemh(\"/etc/hostname\", mem);");
        refused("initial $readmemb(\"../secret.bin\", mem);");
        refused("initial $writememh(\"/tmp/x\", mem);");
        refused("initial $dumpfile(\"/tmp/wave.vcd\");");
        refused("initial fd = $fopenr(\"/etc/shadow\");");
    }

    #[test]
    fn file_names_built_at_run_time_are_refused() {
        refused("initial fd = $fopen(name);");
        refused("initial fd = $fopen({\"/etc/\", \"passwd\"});");
        refused("initial fd = $fopen(\"x\" == \"x\" ? \"/etc/passwd\" : \"y\");");
        refused("`define F \"/etc/passwd\"\ninitial fd = $fopen(`F);");
        refused("`define OPEN $fopen(\"ok.txt\"\ninitial fd = `OPEN == \"\" ? 1 : 2);");
    }

    #[test]
    fn includes_must_name_submitted_files() {
        assert!(matches!(refused("`include \"/etc/passwd\"\n"), Refusal::Forbidden { line: 1, .. }));
        refused("`include \"../defs.vh\"\n");
        refused("`include \"other.vh\"\n");
        refused("`include <defs.vh>\n");
        refused("`define H \"defs.vh\"\n`include `H\n");
    }

    #[test]
    fn machine_reaching_and_unknown_system_tasks_are_refused() {
        for text in [
            "initial $system(\"rm -rf /\");",
            "initial $sdf_annotate(\"x.sdf\");",
            "initial $save(\"s\");",
            "initial $input(\"cmds\");",
            "initial $log(\"l\");",
            "initial $scope(tb);",
            "initial $nonsense;",
        ] {
            assert!(matches!(refused(text), Refusal::Forbidden { .. }), "{text}");
        }
    }

    #[test]
    fn macros_cannot_assemble_a_system_name() {
        refused("`define CALL(a, b) a``b\ninitial `CALL($fo, pen)(\"/etc/passwd\");");
        refused("`define D fopen\ninitial fd = $`D(\"/etc/passwd\");");
        refused("`define D open\ninitial fd = $f`D(\"/etc/passwd\");");
        refused("`define DOLLAR $\ninitial fd = `DOLLAR fopen(\"/etc/passwd\");");
        refused("`define S(n) $n\ninitial fd = `S(fopen)(\"/etc/passwd\");");
    }

    #[test]
    fn lines_are_counted_through_comments_and_strings() {
        let err = refused("/* one\ntwo */\n// three\n\"four\"\n$system(\"x\");\n");
        assert!(matches!(err, Refusal::Forbidden { line: 5, .. }));
    }

    #[test]
    fn unterminated_text_ends_the_scan_without_panicking() {
        for text in ["\"open", "/* open", "`", "$", "\\", "`define X \\\n", "$fopen(", "$fopen(\"a\""] {
            let _ = check_text("tb.v", text, &[]);
        }
    }
}
