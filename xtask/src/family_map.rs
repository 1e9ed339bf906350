//! The families table of CONTRIBUTING.md ("Families: from the hook to the metric") names, for
//! each family, its files in probe-ebpf, probe-common and the daemon. This test keeps the table
//! true to the tree: a file moved or renamed without the table fails the unit tier.

#[cfg(test)]
mod tests {
    use std::path::Path;

    const HEADING: &str = "### Families: from the hook to the metric";

    /// (column, directory its file names are relative to).
    const COLUMNS: [(usize, &str); 3] = [
        (2, "probe-ebpf/src"),
        (3, "probe-common/src"),
        (4, "daemon/src"),
    ];

    #[test]
    fn every_file_the_families_table_names_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace root");
        let text = std::fs::read_to_string(root.join("CONTRIBUTING.md")).expect("CONTRIBUTING.md");
        let start = text.find(HEADING).expect("the families table's heading");
        let rows: Vec<Vec<&str>> = text[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2) // header and separator
            .map(|l| {
                l.trim()
                    .trim_matches('|')
                    .split('|')
                    .map(str::trim)
                    .collect()
            })
            .collect();
        assert!(
            rows.len() >= 10,
            "only {} families in the table",
            rows.len()
        );
        let mut missing = Vec::new();
        for row in &rows {
            for (column, dir) in COLUMNS {
                let cell = row.get(column).copied().unwrap_or_default();
                for name in cell.split(',').map(str::trim) {
                    // `—`: the family has nothing in that crate.
                    if name.is_empty() || name == "—" {
                        continue;
                    }
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
}
