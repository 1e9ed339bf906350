//! Finds the metric names a PromQL expression reads, without a full parser: an identifier is a
//! metric name unless it is a function (followed by `(`), a keyword or aggregation operator, or
//! a label name (inside `{...}`, or in the label list after `by`, `without`, `on`, `ignoring`,
//! `group_left`, `group_right`). Strings, durations, numbers and Grafana variables (`$x`,
//! `${x}`) are skipped.

use std::collections::BTreeSet;

/// Words that are never metric names.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names `expr` selects, as written (suffixes such as `_bucket` included).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '{' {
            i = skip_until(&chars, i, '}');
        } else if c == '[' {
            i = skip_until(&chars, i, ']');
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '$' {
            i = skip_variable(&chars, i + 1);
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            i = skip_number(&chars, i);
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = next_non_space(&chars, i);
            let lower = word.to_ascii_lowercase();
            if LABEL_LISTS.contains(&lower.as_str()) {
                if next.is_some_and(|j| chars[j] == '(') {
                    i = skip_until(&chars, next.unwrap_or(i), ')');
                }
            } else if next.is_some_and(|j| chars[j] == '(') || KEYWORDS.contains(&lower.as_str()) {
                // A function call or an operator.
            } else {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn next_non_space(chars: &[char], mut i: usize) -> Option<usize> {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    (i < chars.len()).then_some(i)
}

/// Index after the string literal starting at `i` (backslash escapes honoured, except in
/// backquoted raw strings).
fn skip_string(chars: &[char], mut i: usize) -> usize {
    let quote = chars[i];
    i += 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' && quote != '`' {
            i += 1;
        }
        i += 1;
    }
    i + 1
}

/// Index after the `close` that ends the group opened at `i`, skipping strings inside.
fn skip_until(chars: &[char], mut i: usize, close: char) -> usize {
    i += 1;
    while i < chars.len() && chars[i] != close {
        if matches!(chars[i], '"' | '\'' | '`') {
            i = skip_string(chars, i);
        } else {
            i += 1;
        }
    }
    i + 1
}

/// Index after a Grafana variable's name (`x`, `{x}` or `__rate_interval`).
fn skip_variable(chars: &[char], i: usize) -> usize {
    if chars.get(i) == Some(&'{') {
        return skip_until(chars, i, '}');
    }
    let mut j = i;
    while j < chars.len() && is_ident(chars[j]) {
        j += 1;
    }
    j
}

/// Index after a number or duration (`0.99`, `1e-9`, `5m`, `1h30m`, `0x1f`).
fn skip_number(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        let c = chars[i];
        let exponent_sign = (c == '-' || c == '+') && i > 0 && matches!(chars[i - 1], 'e' | 'E');
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' || exponent_sign {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// The histogram family a series name belongs to when it carries a histogram suffix.
pub fn strip_histogram_suffix(name: &str) -> Option<&str> {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        metric_names(expr).into_iter().collect()
    }

    #[test]
    fn skips_functions_labels_and_grouping() {
        let expr = "histogram_quantile(0.99, sum by (instance, device, le) (rate(\
                    wbscope_sync_call_duration_seconds_bucket{instance=~\"$instance\",\
                    syscall=~\"fsync|x\"}[$__rate_interval]))) > 1";
        assert_eq!(names(expr), ["wbscope_sync_call_duration_seconds_bucket"]);
    }

    #[test]
    fn finds_both_sides_of_binary_operators() {
        let expr = "wbscope_writeback_bytes{instance=\"a\"} / on (instance) group_left (kind) \
                    wbscope_memory_total_bytes > bool 0.001 and ignoring(x) up";
        assert_eq!(
            names(expr),
            [
                "up",
                "wbscope_memory_total_bytes",
                "wbscope_writeback_bytes"
            ]
        );
    }

    #[test]
    fn trailing_by_numbers_strings_and_variables() {
        let expr = "sum(rate(a_total[5m] offset 1h30m)) by (le) * 1e-9 + count(b{c='}'}) \
                    + ${x} + $y + sort(level:metric:rate5m)";
        assert_eq!(names(expr), ["a_total", "b", "level:metric:rate5m"]);
    }

    #[test]
    fn strips_histogram_suffixes() {
        assert_eq!(
            strip_histogram_suffix("x_seconds_bucket"),
            Some("x_seconds")
        );
        assert_eq!(strip_histogram_suffix("x_total"), None);
    }
}
