//! The README's "Repository layout" section and its families table ("Families: from the hook to
//! the metric") say where everything lives: for each family its files in probe-ebpf,
//! probe-common and the daemon, and for the rest of the tree what each directory holds. These
//! tests keep both true to the tree, so that a file moved, renamed or added without the README
//! fails the unit tier:
//! - every file the table names exists, and each family's files carry the family's name in all
//!   three crates;
//! - every file of probe-ebpf and probe-common, and every module of `daemon/src/families`, is
//!   either in the table or (for the shared ones) named in the layout section;
//! - every path the layout section names exists, and every top-level directory and every
//!   directory of `daemon/src` is in it.

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeSet,
        path::{Path, PathBuf},
    };

    const LAYOUT_HEADING: &str = "### Repository layout";
    const TABLE_HEADING: &str = "#### Families: from the hook to the metric";

    /// The table's columns of files: (column, the directory its file names are relative to).
    const PROBE_EBPF: (usize, &str) = (2, "probe-ebpf/src");
    const PROBE_COMMON: (usize, &str) = (3, "probe-common/src");
    const DAEMON: (usize, &str) = (4, "daemon/src");

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace root")
            .to_path_buf()
    }

    fn readme() -> String {
        std::fs::read_to_string(root().join("README.md")).expect("README.md")
    }

    /// The families table's rows, cells trimmed (header and separator left out).
    fn rows(readme: &str) -> Vec<Vec<String>> {
        let start = readme
            .find(TABLE_HEADING)
            .expect("the families table's heading");
        readme[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                l.trim()
                    .trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_owned())
                    .collect()
            })
            .collect()
    }

    /// The family's one name: the first column without the `wbscope check` name in brackets.
    fn family(row: &[String]) -> &str {
        row[0].split(" (").next().unwrap_or_default()
    }

    /// The file names in a cell; `—` (nothing in that crate) gives none.
    fn files(row: &[String], column: usize) -> Vec<&str> {
        row.get(column)
            .map(String::as_str)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty() && *n != "—")
            .collect()
    }

    /// Every `.rs` file under `dir`, relative to it, `/`-separated.
    fn rust_files(dir: &Path) -> BTreeSet<String> {
        fn walk(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
            for entry in std::fs::read_dir(dir).expect("a source directory") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    walk(base, &path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(base).expect("under the base");
                    out.insert(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let mut out = BTreeSet::new();
        walk(dir, dir, &mut out);
        out
    }

    /// The layout section's code block, as (entry, its text) per top-level entry: `daemon/` and
    /// all the lines until the next entry that starts in column 0.
    fn layout_entries(readme: &str) -> Vec<(String, String)> {
        let start = readme
            .find(LAYOUT_HEADING)
            .expect("the layout section's heading");
        let block: Vec<&str> = readme[start..]
            .lines()
            .skip_while(|l| !l.starts_with("```"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .collect();
        let mut entries: Vec<(String, String)> = Vec::new();
        for line in block {
            if !line.starts_with(' ') {
                let name = line.split_whitespace().next().unwrap_or_default();
                entries.push((name.to_owned(), String::new()));
            }
            if let Some((_, text)) = entries.last_mut() {
                text.push_str(line);
                text.push('\n');
            }
        }
        entries
    }

    fn entry<'a>(entries: &'a [(String, String)], name: &str) -> &'a str {
        entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, text)| text.as_str())
            .unwrap_or_else(|| panic!("{name} is not in the layout section"))
    }

    #[test]
    fn every_file_the_families_table_names_exists() {
        let root = root();
        let rows = rows(&readme());
        assert!(
            rows.len() >= 14,
            "only {} families in the table",
            rows.len()
        );
        let mut missing = Vec::new();
        for row in &rows {
            for (column, dir) in [PROBE_EBPF, PROBE_COMMON, DAEMON] {
                for name in files(row, column) {
                    let path = root.join(dir).join(name);
                    if !path.exists() {
                        missing.push(format!("{} ({})", path.display(), row[0]));
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "the families table names missing files: {missing:?}"
        );
    }

    /// `probe-ebpf/src/<family>.rs` (+ `<family>/…`), `probe-common/src/<family>.rs` (+
    /// `<family>/…`) and `daemon/src/families/<family>(.rs|/)`, and the daemon's families are
    /// exactly the table's.
    #[test]
    fn each_family_has_one_name_in_every_crate() {
        let rows = rows(&readme());
        let mut wrong = Vec::new();
        for row in &rows {
            let name = family(row);
            for column in [PROBE_EBPF.0, PROBE_COMMON.0] {
                let cell = files(row, column);
                let own = format!("{name}.rs");
                let part = format!("{name}/");
                if !cell.is_empty() && !cell.contains(&own.as_str()) {
                    wrong.push(format!("{name}: column {column} lacks {own}"));
                }
                for file in cell {
                    if file != own && !file.starts_with(&part) {
                        wrong.push(format!("{name}: {file} is not named after the family"));
                    }
                }
            }
            let daemon = files(row, DAEMON.0);
            let module = [format!("families/{name}.rs"), format!("families/{name}/")];
            if !daemon.iter().any(|f| module.iter().any(|m| m == f)) {
                wrong.push(format!("{name}: no families/{name} in the daemon column"));
            }
            for file in daemon {
                if file.starts_with("families/") && !module.iter().any(|m| m == file) {
                    wrong.push(format!("{name}: {file} is another family's module"));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");

        let in_table: BTreeSet<&str> = rows.iter().map(|r| family(r)).collect();
        let in_daemon: BTreeSet<String> = std::fs::read_dir(root().join("daemon/src/families"))
            .expect("daemon/src/families")
            .map(|e| {
                e.expect("a directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| n != "mod.rs")
            .map(|n| n.trim_end_matches(".rs").to_owned())
            .collect();
        let in_daemon: BTreeSet<&str> = in_daemon.iter().map(String::as_str).collect();
        assert_eq!(in_table, in_daemon, "the table's families and the daemon's");
    }

    /// A file of probe-ebpf or probe-common is in the families table, or it is a shared one
    /// (not named after a family) that the crate's entry in the layout section names.
    #[test]
    fn every_family_file_is_in_the_families_table() {
        let readme = readme();
        let rows = rows(&readme);
        let entries = layout_entries(&readme);
        let families: BTreeSet<&str> = rows.iter().map(|r| family(r)).collect();
        let mut wrong = Vec::new();
        for (column, dir) in [PROBE_EBPF, PROBE_COMMON] {
            let crate_dir = dir.trim_end_matches("/src");
            let layout = entry(&entries, &format!("{crate_dir}/"));
            let listed: BTreeSet<&str> = rows.iter().flat_map(|r| files(r, column)).collect();
            for file in rust_files(&root().join(dir)) {
                if listed.contains(file.as_str()) {
                    continue;
                }
                let head = file.split('/').next().unwrap_or_default();
                if families.contains(head.trim_end_matches(".rs")) {
                    wrong.push(format!(
                        "{dir}/{file}: a family's file missing from the table"
                    ));
                    continue;
                }
                let base = file.rsplit('/').next().unwrap_or_default();
                let parent_named = match file.rsplit_once('/') {
                    Some((parent, _)) => layout.contains(&format!("{parent}/")),
                    None => true,
                };
                if !layout.contains(base) || !parent_named {
                    wrong.push(format!(
                        "{dir}/{file}: neither in the table nor in the layout section"
                    ));
                }
            }
        }
        let listed: BTreeSet<&str> = rows.iter().flat_map(|r| files(r, DAEMON.0)).collect();
        for entry in std::fs::read_dir(root().join("daemon/src/families")).expect("families") {
            let entry = entry.expect("a directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "mod.rs" {
                continue;
            }
            let shown = if entry.path().is_dir() {
                format!("families/{name}/")
            } else {
                format!("families/{name}")
            };
            if !listed.contains(shown.as_str()) {
                wrong.push(format!("daemon/src/{shown}: missing from the table"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// Every path the layout section names exists; every top-level directory, and every
    /// directory of `daemon/src`, is in it.
    #[test]
    fn the_layout_section_matches_the_tree() {
        let root = root();
        let readme = readme();
        let entries = layout_entries(&readme);
        let mut wrong = Vec::new();
        for (name, _) in &entries {
            if !root.join(name).exists() {
                wrong.push(format!("{name} does not exist"));
            }
        }
        for dir in std::fs::read_dir(&root).expect("the workspace root") {
            let dir = dir.expect("a directory entry");
            let name = dir.file_name().to_string_lossy().into_owned();
            if dir.path().is_dir()
                && !name.starts_with('.')
                && name != "target"
                && !entries.iter().any(|(n, _)| *n == format!("{name}/"))
            {
                wrong.push(format!("{name}/ is not in the layout section"));
            }
        }
        let daemon = entry(&entries, "daemon/");
        // Paths in the daemon's entry: a `src/…`, `tests/…` or `build.rs` token.
        for token in daemon.split(|c: char| c.is_whitespace() || c == ';' || c == ',') {
            let token = token.trim_matches(|c: char| c == '(' || c == ')' || c == ':');
            let is_path =
                token.starts_with("src/") || token.starts_with("tests/") || token == "build.rs";
            if is_path && !root.join("daemon").join(token).exists() {
                wrong.push(format!("daemon/{token} does not exist"));
            }
        }
        for dir in std::fs::read_dir(root.join("daemon/src")).expect("daemon/src") {
            let dir = dir.expect("a directory entry");
            let name = dir.file_name().to_string_lossy().into_owned();
            if dir.path().is_dir() && !daemon.contains(&format!("src/{name}/")) {
                wrong.push(format!("daemon/src/{name}/ is not in the layout section"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
