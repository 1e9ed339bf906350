//! Where in the configuration text an error is: line and column of a byte offset, the dotted
//! key path (`stalls.threshold`) written there, and the reverse, where a key path is written.
//!
//! The TOML parser reports a byte span but not the key path, and validation errors know the key
//! but not the position; both are recovered from the text. This reads the simple layout a
//! configuration file has (`[table]` headers, `key = value` lines); a key it cannot find is
//! reported without a position rather than with a wrong one.

use std::fmt;

/// A 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl Location {
    /// The line and column of byte `offset` in `text` (clamped to the text).
    pub fn of_offset(text: &str, offset: usize) -> Location {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Location {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

/// A `[table]` or `[[table]]` header's name, if `line` is one.
fn header(line: &str) -> Option<String> {
    let line = strip_comment(line).trim();
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let inner = inner.trim_start_matches('[').trim_end_matches(']');
    Some(unquote_path(inner))
}

/// The key of a `key = value` line.
fn key_of(line: &str) -> Option<String> {
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('#') && !key.starts_with('[')).then(|| unquote_path(key))
}

/// `a . "b"` → `a.b`.
fn unquote_path(path: &str) -> String {
    path.split('.')
        .map(|p| p.trim().trim_matches('"').trim_matches('\''))
        .collect::<Vec<_>>()
        .join(".")
}

fn strip_comment(line: &str) -> &str {
    line.split_once('#').map_or(line, |(before, _)| before)
}

/// `key` inside `table` (the root table is `""`).
fn join(table: &str, key: &str) -> String {
    if table.is_empty() {
        key.to_owned()
    } else {
        format!("{table}.{key}")
    }
}

/// The key path written at byte `offset`: the key of the `key = value` line there, inside the
/// table whose header precedes it (or that header itself).
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    let at = Location::of_offset(text, offset);
    let mut table = String::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(name) = header(line) {
            table = name;
            if i + 1 == at.line {
                return Some(table);
            }
            continue;
        }
        if i + 1 == at.line {
            return key_of(line).map(|key| join(&table, &key));
        }
    }
    None
}

/// Where the key path `path` (`stalls.threshold`, `listen`) is written.
pub fn find_key(text: &str, path: &str) -> Option<Location> {
    let mut table = String::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(name) = header(line) {
            table = name;
            continue;
        }
        if key_of(line).is_some_and(|key| join(&table, &key) == path) {
            let indent = line.chars().take_while(|c| c.is_whitespace()).count();
            return Some(Location {
                line: i + 1,
                column: indent + 1,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str =
        "listen = \":1\"\n# c\n[stalls]\n  threshold = 100 # x\n[ probes ]\ndisable = []\n";

    #[test]
    fn offsets_to_lines_and_columns() {
        assert_eq!(
            Location::of_offset(TEXT, 0),
            Location { line: 1, column: 1 }
        );
        let offset = TEXT.find("100").unwrap();
        assert_eq!(
            Location::of_offset(TEXT, offset),
            Location {
                line: 4,
                column: 15
            }
        );
        assert_eq!(Location::of_offset(TEXT, 10_000).line, 7);
    }

    #[test]
    fn key_paths_at_offsets() {
        assert_eq!(
            key_at(TEXT, TEXT.find("100").unwrap()).as_deref(),
            Some("stalls.threshold")
        );
        assert_eq!(key_at(TEXT, 3).as_deref(), Some("listen"));
        assert_eq!(
            key_at(TEXT, TEXT.find("disable").unwrap()).as_deref(),
            Some("probes.disable")
        );
        assert_eq!(key_at(TEXT, TEXT.find("# c").unwrap()), None);
    }

    #[test]
    fn keys_to_locations() {
        assert_eq!(
            find_key(TEXT, "stalls.threshold"),
            Some(Location { line: 4, column: 3 })
        );
        assert_eq!(
            find_key(TEXT, "probes.disable"),
            Some(Location { line: 6, column: 1 })
        );
        assert_eq!(find_key(TEXT, "threshold"), None);
    }
}
