//! What the docs say about the code's layout, checked against it: the module list of this crate's
//! doc, the crate table of docs/ARCHITECTURE.md against the workspace's members, and the store
//! methods docs/BENCHMARKS.md §8 counts against the ports.

/// The `[`name`]` links of the `//! - ` lines of `doc` (a module list).
fn listed(doc: &str) -> std::collections::BTreeSet<String> {
    doc.lines()
        .filter(|l| l.starts_with("//! - "))
        .flat_map(|l| l.split("[`").skip(1).filter_map(|part| part.split_once("`]").map(|(name, _)| name.to_owned())))
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

#[test]
fn the_crate_doc_lists_every_module_and_only_those() {
    let lib = include_str!("lib.rs");
    let modules: std::collections::BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ").and_then(|rest| rest.strip_suffix(';')))
        .map(str::to_owned)
        .collect();
    assert_eq!(listed(lib), modules, "the module list of openqq_platform's doc and its `pub mod`s");
}

#[test]
fn the_architecture_crate_table_names_every_workspace_member_at_its_path() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = &manifest[manifest.find("members = [").unwrap()..];
    let members: Vec<&str> = members[..members.find(']').unwrap()].split('"').skip(1).step_by(2).collect();
    let architecture = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let table: Vec<&str> = architecture.lines().filter(|l| l.starts_with("| `")).collect();
    for member in members {
        let package = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        let name = package.lines().find_map(|l| l.strip_prefix("name = ")).unwrap().trim_matches('"').to_owned();
        let row = table.iter().copied().find(|row| row.contains(&format!("`{name}`")));
        let at_path = |row: &str| row.contains(&format!("`{member}`")) || row.contains("`functions/*`");
        assert!(row.is_some_and(at_path), "docs/ARCHITECTURE.md's crate table has `{name}` at `{member}`");
    }
}

#[test]
fn benchmarks_section_8_names_store_methods_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let benchmarks = std::fs::read_to_string(root.join("docs/BENCHMARKS.md")).unwrap();
    let start = benchmarks.find("## 8. ").expect("BENCHMARKS.md has a section 8");
    let section = &benchmarks[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    // The embedded store's rows: `| embedded | `method` …` and the rows under it, `| | `method` …`.
    let rows =
        section.lines().skip_while(|l| !l.starts_with("| embedded | `")).take_while(|l| !l.starts_with("| DynamoDB"));
    let methods: Vec<&str> = rows.filter_map(|l| l.split('`').nth(1)).collect();
    assert!(methods.len() >= 3, "section 8's embedded rows name the store's methods: {methods:?}");
    // The store's roles: shared/core/src/ports/store.rs, the feed reader and the webhook roles.
    let ports = ["ports/store.rs", "feed.rs", "webhook.rs"]
        .map(|f| std::fs::read_to_string(root.join("shared/core/src").join(f)).unwrap())
        .concat();
    for method in methods {
        assert!(ports.contains(&format!("fn {method}(")), "BENCHMARKS.md §8 names `{method}`, a method of no port");
    }
}
