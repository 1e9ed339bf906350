//! The benchmark report: a header naming the run (command, kernel, CPU, date, probe set) and one
//! table per section, printed to the terminal and written as Markdown.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

/// Facts that identify the run, so a number in the report can be traced to where it was taken.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// The command line that produced the report.
    pub command: String,
    /// UTC date and time of the start of the run.
    pub date: String,
    /// `uname -r`.
    pub kernel: String,
    /// CPU model and the number of online CPUs.
    pub cpu: String,
    /// `/proc/loadavg` at the start and at the end: other work on the host makes numbers noisy.
    pub load: String,
    /// The probes the daemon attached, as `wbscope check` listed them.
    pub probes: Vec<String>,
    /// `full` or `quick`.
    pub mode: String,
}

/// One row: a stable key (for the completeness check) and the cells under the columns.
#[derive(Debug, Clone)]
pub struct Row {
    pub key: String,
    pub cells: Vec<String>,
}

/// One table of the report.
#[derive(Debug, Clone)]
pub struct Section {
    /// Stable identifier, used in row keys (`id/row-key`).
    pub id: &'static str,
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
    /// Lines printed under the table: how to read it, and what went wrong if it failed.
    pub notes: Vec<String>,
}

impl Section {
    /// An empty table with these columns.
    pub fn new(id: &'static str, title: &str, columns: &[&str]) -> Section {
        Section {
            id,
            title: title.to_owned(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A section whose measurement failed: no rows, the error as a note.
    pub fn failed(id: &'static str, title: &str, error: &anyhow::Error) -> Section {
        let mut section = Section::new(id, title, &[]);
        section.notes.push(format!("FAILED: {error:#}"));
        section
    }

    /// Appends a row.
    pub fn row(&mut self, key: impl Into<String>, cells: Vec<String>) {
        self.rows.push(Row {
            key: key.into(),
            cells,
        });
    }

    /// Appends a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

/// The whole report.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub header: Header,
    pub sections: Vec<Section>,
}

impl Report {
    /// Every `section/row` key in `expected` that the report lacks, plus every row with an empty
    /// cell: what `--quick` asserts is "every row was produced".
    pub fn missing(&self, expected: &[String]) -> Vec<String> {
        let mut missing: Vec<String> = expected
            .iter()
            .filter(|key| !self.has_row(key))
            .cloned()
            .collect();
        for section in &self.sections {
            for row in &section.rows {
                if row.cells.len() != section.columns.len()
                    || row.cells.iter().any(String::is_empty)
                {
                    missing.push(format!("{}/{} (incomplete row)", section.id, row.key));
                }
            }
        }
        missing
    }

    fn has_row(&self, key: &str) -> bool {
        self.sections.iter().any(|s| {
            s.rows
                .iter()
                .any(|r| key.strip_prefix(s.id).and_then(|k| k.strip_prefix('/')) == Some(&r.key))
        })
    }

    /// The report as Markdown.
    pub fn markdown(&self) -> String {
        let h = &self.header;
        let mut out = String::from("# wbscope overhead benchmark\n\n");
        let _ = writeln!(out, "| | |\n|---|---|");
        for (name, value) in [
            ("command", format!("`{}`", h.command)),
            ("mode", h.mode.clone()),
            ("date (UTC)", h.date.clone()),
            ("kernel", h.kernel.clone()),
            ("CPU", h.cpu.clone()),
            ("load average (start → end)", h.load.clone()),
            (
                "probes measured",
                format!("{}: {}", h.probes.len(), h.probes.join(", ")),
            ),
        ] {
            let _ = writeln!(out, "| {name} | {value} |");
        }
        for section in &self.sections {
            let _ = write!(out, "\n## {}\n\n", section.title);
            if !section.columns.is_empty() {
                let _ = writeln!(out, "| {} |", section.columns.join(" | "));
                let _ = writeln!(out, "|{}", "---|".repeat(section.columns.len()));
                for row in &section.rows {
                    let _ = writeln!(out, "| {} |", row.cells.join(" | "));
                }
            }
            if !section.notes.is_empty() {
                out.push('\n');
                for note in &section.notes {
                    let _ = writeln!(out, "- {note}");
                }
            }
        }
        out
    }

    /// Writes the Markdown to `path`, creating its directory.
    pub fn write(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(path, self.markdown()).with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut s = Section::new("ab", "A/B", &["workload", "ratio"]);
        s.row("fio", vec!["fio".into(), "0.99".into()]);
        s.row("buffered", vec!["buffered".into(), String::new()]);
        s.note("interleaved pairs");
        Report {
            header: Header {
                command: "cargo xtask bench".into(),
                probes: vec!["a".into(), "b".into()],
                ..Header::default()
            },
            sections: vec![s],
        }
    }

    #[test]
    fn finds_missing_and_incomplete_rows() {
        let r = report();
        let missing = r.missing(&["ab/fio".into(), "ab/soak".into(), "x/fio".into()]);
        assert_eq!(
            missing,
            vec![
                "ab/soak".to_owned(),
                "x/fio".to_owned(),
                "ab/buffered (incomplete row)".to_owned()
            ]
        );
    }

    #[test]
    fn renders_markdown_tables() {
        let md = report().markdown();
        assert!(md.contains("| command | `cargo xtask bench` |"), "{md}");
        assert!(md.contains("| probes measured | 2: a, b |"), "{md}");
        assert!(
            md.contains("## A/B\n\n| workload | ratio |\n|---|---|\n| fio | 0.99 |"),
            "{md}"
        );
        assert!(md.contains("- interleaved pairs"), "{md}");
    }
}
