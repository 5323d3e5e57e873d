//! The README's configuration table and `openqq up`'s flags say the same thing: every flag shown
//! by `openqq up --help` has a row with its environment variable, and every row names a real flag.

use crate::Cli;
use clap::CommandFactory;
use std::collections::BTreeMap;

/// `flag → env` from the rows of the README's "Configuration (`openqq up`)" table. A row may name
/// several flags and variables, `--a` / `--b` with `A` / `B`, paired in order.
fn readme_rows() -> BTreeMap<String, String> {
    let readme = include_str!("../../README.md");
    let start = readme.find("## Configuration (`openqq up`)").expect("the README has a configuration section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let ticked = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `--")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let (flags, envs) = (ticked(cells[0]), ticked(cells[1]));
        assert_eq!(flags.len(), envs.len(), "every flag of the row has its variable: {line}");
        rows.extend(flags.into_iter().zip(envs));
    }
    rows
}

/// `flag → env` of every flag `openqq up --help` shows.
fn up_flags() -> BTreeMap<String, String> {
    let cli = Cli::command();
    let up = cli.find_subcommand("up").expect("openqq has an up command");
    up.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let long = a.get_long()?;
            let env = a.get_env().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default();
            Some((format!("--{long}"), env))
        })
        .filter(|(flag, _)| flag != "--help")
        .collect()
}

#[test]
fn the_readme_configuration_table_lists_exactly_the_flags_of_openqq_up_with_their_variables() {
    let (readme, help) = (readme_rows(), up_flags());
    let missing: Vec<_> = help.iter().filter(|(f, e)| readme.get(*f) != Some(*e)).collect();
    let extra: Vec<_> = readme.iter().filter(|(f, _)| !help.contains_key(*f)).collect();
    assert!(missing.is_empty(), "flags of `openqq up` without their README row (flag, env): {missing:?}");
    assert!(extra.is_empty(), "README rows for flags `openqq up` does not have: {extra:?}");
}
