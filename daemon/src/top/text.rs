//! The plain summary printed every interval when stdout is not a terminal.

use std::fmt::Write as _;

use super::{
    model::{SortKey, View},
    sections::{self, Section},
};

/// Rows per table in the summary: enough to find the busiest, short enough to read in a log.
const MAX_ROWS: usize = 10;

/// Pads or cuts `s` to `width` characters.
pub fn cell(s: &str, width: u16) -> String {
    let width = usize::from(width);
    let cut: String = s.chars().take(width).collect();
    format!("{cut:<width$}")
}

fn table(out: &mut String, s: &Section) {
    let line = |cells: &mut dyn Iterator<Item = String>| {
        let cells: Vec<String> = cells.zip(s.widths).map(|(c, w)| cell(&c, *w)).collect();
        cells.join(" ").trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", s.title);
    let _ = writeln!(
        out,
        "  {}",
        line(&mut s.header.iter().map(|h| (*h).to_owned()))
    );
    if s.rows.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for row in s.rows.iter().take(MAX_ROWS) {
        let _ = writeln!(out, "  {}", line(&mut row.iter().cloned()));
    }
}

/// One summary: a header line, then every table.
pub fn summary(v: &View, source: &str, sort: SortKey, device: Option<&str>) -> String {
    let mut out = String::new();
    let interval = v
        .interval_s
        .map_or_else(|| "first sample".to_owned(), |s| format!("last {s:.1} s"));
    let _ = writeln!(
        out,
        "wbscope top: {source}; {interval}; device {}",
        device.unwrap_or("all")
    );
    for note in &v.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for section in sections::all(v, sort) {
        table(&mut out, &section);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::model::DeviceRow;

    #[test]
    fn summary_lists_tables_with_aligned_columns() {
        let v = View {
            interval_s: Some(1.0),
            devices: vec![DeviceRow {
                device: "loop3".into(),
                dirty_bytes: Some(4096.0),
                ..DeviceRow::default()
            }],
            ..View::default()
        };
        let text = summary(&v, "daemon at 127.0.0.1:19617", SortKey::SyncTime, None);
        assert!(
            text.starts_with("wbscope top: daemon at 127.0.0.1:19617; last 1.0 s; device all\n")
        );
        assert!(
            text.contains("\nDevices\n  DEVICE       DIRTY       WRITEBACK"),
            "{text}"
        );
        assert!(text.contains("\n  loop3        4.0 KiB     -"), "{text}");
        assert!(text.contains("Latest stalls\n"), "{text}");
        assert_eq!(cell("abcdef", 3), "abc");
    }
}
