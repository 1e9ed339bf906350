//! The labels a PromQL expression relies on, per metric family: those it matches on
//! (`metric{label="..."}`) and those it groups by (`by (...)`). The e2e tier checks each
//! against the default exposition, so a panel or rule cannot come to split by a label that
//! `[metrics] detail = "basic"` leaves out. `without (...)` lists are not: folding a label
//! that a detail level does not export is what keeps a rule the same at both levels. Target
//! labels (`job`, `cluster`, `instance`, added by Prometheus) and `le` are not the daemon's and
//! are skipped.

use std::collections::BTreeSet;

use crate::promql;

/// Labels that the daemon does not export itself.
const NOT_THE_DAEMONS: [&str; 5] = ["job", "cluster", "instance", "le", "__name__"];

/// `(family, label)` pairs `expr` relies on; histogram suffixes are stripped from the family.
pub fn label_uses(expr: &str) -> BTreeSet<(String, String)> {
    let mut uses = BTreeSet::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut add = |metric: &str, label: &str| {
        if !NOT_THE_DAEMONS.contains(&label) && !label.is_empty() {
            let family = promql::strip_histogram_suffix(metric).unwrap_or(metric);
            uses.insert((family.to_owned(), label.to_owned()));
        }
    };
    let mut i = 0;
    while i < chars.len() {
        if is_ident_start(chars[i]) && (i == 0 || (!is_ident(chars[i - 1]) && chars[i - 1] != '$'))
        {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = skip_spaces(&chars, i);
            if chars.get(i) == Some(&'{') {
                let end = group_end(&chars, i, '{', '}');
                for label in matcher_labels(&chars[i + 1..end.saturating_sub(1)]) {
                    add(&word, &label);
                }
                i = end;
            } else if word == "by" && chars.get(after) == Some(&'(') {
                let list_end = group_end(&chars, after, '(', ')');
                let list: String = chars[after + 1..list_end.saturating_sub(1)]
                    .iter()
                    .collect();
                let body_start = skip_spaces(&chars, list_end);
                if chars.get(body_start) == Some(&'(') {
                    let body_end = group_end(&chars, body_start, '(', ')');
                    let body: String = chars[body_start..body_end].iter().collect();
                    for metric in promql::metric_names(&body) {
                        for label in list.split(',').map(str::trim) {
                            add(&metric, label);
                        }
                    }
                }
                i = list_end;
            }
            continue;
        }
        if chars[i] == '"' || chars[i] == '\'' || chars[i] == '`' {
            i = skip_string(&chars, i);
            continue;
        }
        i += 1;
    }
    uses
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn skip_spaces(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// Index after the string literal starting at `i`.
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

/// Index after the `close` matching the `open` at `i`, skipping strings.
fn group_end(chars: &[char], mut i: usize, open: char, close: char) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(chars, i);
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    chars.len()
}

/// The label names of a matcher list (`a="x",b=~"y"`), values skipped.
fn matcher_labels(chars: &[char]) -> Vec<String> {
    let mut labels = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(chars, i);
        } else if is_ident_start(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            labels.push(chars[start..i].iter().collect());
        } else {
            i += 1;
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(expr: &str) -> Vec<(String, String)> {
        label_uses(expr).into_iter().collect()
    }

    fn p(family: &str, label: &str) -> (String, String) {
        (family.to_owned(), label.to_owned())
    }

    #[test]
    fn grouping_and_matcher_labels_are_found_per_family() {
        let expr = "histogram_quantile(0.99, sum by (instance, device, op, le) \
            (rate(wbscope_block_request_latency_seconds_bucket{job=~\"$job\",device=~\"$device\"}[5m])))";
        assert_eq!(
            pairs(expr),
            [
                p("wbscope_block_request_latency_seconds", "device"),
                p("wbscope_block_request_latency_seconds", "op"),
            ]
        );
    }

    #[test]
    fn both_sides_of_a_ratio_count_and_folded_labels_do_not() {
        let expr = "sum by (device, sync) (rate(a_total{x=\"1,y=2\"}[5m])) / \
            sum by (device) (rate(b_total[5m])) + sum without (op) (rate(c_total[5m]))";
        assert_eq!(
            pairs(expr),
            [
                p("a_total", "device"),
                p("a_total", "sync"),
                p("a_total", "x"),
                p("b_total", "device"),
            ]
        );
    }

    #[test]
    fn target_labels_and_group_modifiers_are_not_the_daemons() {
        let expr = "x and on (instance, device) group by (instance, device) (y_total)";
        assert_eq!(pairs(expr), [p("y_total", "device")]);
        assert!(pairs("up{job=\"a\",cluster=\"b\"}").is_empty());
    }
}
