//! Prometheus alerting and recording rules as data, rendered to rule-file YAML.
//!
//! Prometheus accepts `annotations` only on alerting rules (a recording rule with annotations
//! fails `promtool check rules`), so a recording rule's summary and description are written as
//! comments above it.

pub mod alerts;
pub mod recording;

/// The labels fleet-wide aggregations keep besides their own dimensions: a Prometheus job and
/// the `cluster` label most fleets put on their targets (an absent label costs nothing).
/// Per-target rules aggregate `without` their folded dimensions instead and keep every label.
pub const FLEET_LABELS: &str = "job, cluster";

/// Where each alert's runbook section is: `docs/runbook.md` in the repository, one `##`
/// section per alert named after it (GitHub anchors are the lower-cased heading).
pub const RUNBOOK: &str = "https://github.com/wbscope/wbscope/blob/main/docs/runbook.md";

/// The runbook URL of the alert `name`.
pub fn runbook_url(name: &str) -> String {
    format!("{RUNBOOK}#{}", name.to_ascii_lowercase())
}

use std::fmt::Write as _;

/// One rule of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The alert name, or the recorded series name.
    pub name: &'static str,
    pub kind: RuleKind,
    pub expr: String,
    /// One line: what the rule is about.
    pub summary: &'static str,
    /// What it means and what to do.
    pub description: &'static str,
}

/// Alerting or recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleKind {
    /// Fires after the expression has returned series for `for_`.
    Alert {
        for_: &'static str,
        severity: &'static str,
    },
    /// Stores the expression's result as a new series.
    Record,
}

/// A named group of rules (one evaluation loop in Prometheus).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: &'static str,
    pub rules: Vec<Rule>,
}

/// A rule file: its name under `dashboards/rules/` and its groups.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleFile {
    pub file: &'static str,
    pub groups: Vec<Group>,
}

/// Every rule file we ship.
pub fn files() -> Vec<RuleFile> {
    vec![alerts::file(), recording::file()]
}

/// The names recording rules define (queries may use them besides the daemon's metrics).
pub fn recorded_names() -> Vec<&'static str> {
    recording::file()
        .groups
        .iter()
        .flat_map(|g| &g.rules)
        .map(|r| r.name)
        .collect()
}

/// The file as Prometheus rule-file YAML.
pub fn render(file: &RuleFile) -> String {
    let mut out = String::from("---\n");
    out.push_str(crate::GENERATED_HEADER_YAML);
    out.push_str("groups:\n");
    for group in &file.groups {
        let _ = writeln!(out, "  - name: {}", group.name);
        out.push_str("    rules:\n");
        for rule in &group.rules {
            render_rule(&mut out, rule);
        }
    }
    out
}

fn render_rule(out: &mut String, rule: &Rule) {
    match rule.kind {
        RuleKind::Alert { for_, severity } => {
            let _ = writeln!(out, "      - alert: {}", rule.name);
            write_expr(out, &rule.expr);
            let _ = writeln!(out, "        for: {for_}");
            out.push_str("        labels:\n");
            let _ = writeln!(out, "          severity: {severity}");
            out.push_str("        annotations:\n");
            write_folded(out, "summary", rule.summary);
            write_folded(out, "description", rule.description);
            write_folded(out, "runbook_url", &runbook_url(rule.name));
        }
        RuleKind::Record => {
            let _ = writeln!(out, "      # {}", rule.summary);
            for line in wrap(rule.description, 92) {
                let _ = writeln!(out, "      # {line}");
            }
            let _ = writeln!(out, "      - record: {}", rule.name);
            write_expr(out, &rule.expr);
        }
    }
}

/// The expression as a literal block scalar, which needs no escaping whatever it contains.
fn write_expr(out: &mut String, expr: &str) {
    out.push_str("        expr: |-\n");
    for line in expr.lines() {
        let _ = writeln!(out, "          {line}");
    }
}

/// An annotation as a folded block scalar (`>-`): it needs no escaping for the `{{ }}` and `: `
/// of templates, and its lines fold back into one line, so it can be wrapped at 100 columns.
fn write_folded(out: &mut String, key: &str, text: &str) {
    let _ = writeln!(out, "          {key}: >-");
    for line in wrap(text, 100 - 12) {
        let _ = writeln!(out, "            {line}");
    }
}

/// Splits `text` into lines of at most `width` characters at spaces, never inside a `{{ }}`
/// template action.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in words(text) {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The words of `text`, a `{{ ... }}` action counting as one.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for word in text.split_whitespace() {
        match out.last_mut() {
            Some(last) if open => {
                last.push(' ');
                last.push_str(word);
            }
            _ => out.push(word.to_owned()),
        }
        let last = out.last().map_or("", String::as_str);
        // Inside an action when its last `{{` is not closed yet.
        open = match (last.rfind("{{"), last.rfind("}}")) {
            (Some(o), Some(c)) => o > c,
            (Some(_), None) => true,
            _ => false,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("a {{ $v | h }} b", 3), ["a", "{{ $v | h }}", "b"]);
    }

    #[test]
    fn renders_alert_with_block_expr_and_annotations() {
        let file = RuleFile {
            file: "t.yml",
            groups: vec![Group {
                name: "g",
                rules: vec![Rule {
                    name: "A",
                    kind: RuleKind::Alert {
                        for_: "5m",
                        severity: "warning",
                    },
                    expr: "up{job=\"x\"} == 0".into(),
                    summary: "s: {{ $labels.job }}",
                    description: "d",
                }],
            }],
        };
        let text = render(&file);
        assert!(
            text.contains("      - alert: A\n        expr: |-\n          up{job=\"x\"} == 0\n")
        );
        assert!(text.contains("          summary: >-\n            s: {{ $labels.job }}\n"));
        assert!(text.contains(
            "          runbook_url: >-\n            \
             https://github.com/wbscope/wbscope/blob/main/docs/runbook.md#a\n"
        ));
    }

    fn alerts() -> Vec<Rule> {
        files()
            .into_iter()
            .flat_map(|f| f.groups)
            .flat_map(|g| g.rules)
            .filter(|r| matches!(r.kind, RuleKind::Alert { .. }))
            .collect()
    }

    #[test]
    fn every_alert_has_a_runbook_section() {
        let runbook = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/runbook.md"),
        )
        .expect("docs/runbook.md");
        for alert in alerts() {
            assert!(!alert.summary.is_empty() && !alert.description.is_empty());
            assert!(
                runbook.lines().any(|l| l == format!("## {}", alert.name)),
                "docs/runbook.md has no '## {}' section",
                alert.name
            );
        }
    }

    #[test]
    fn no_rule_aggregates_the_target_labels_away() {
        for rule in files()
            .into_iter()
            .flat_map(|f| f.groups)
            .flat_map(|g| g.rules)
        {
            for by in rule
                .expr
                .match_indices(" by (")
                .map(|(i, _)| &rule.expr[i..])
            {
                assert!(
                    by.starts_with(&format!(" by ({FLEET_LABELS}")),
                    "{}: `by` without the fleet labels: {}",
                    rule.name,
                    rule.expr
                );
            }
            assert!(
                !rule.expr.contains("by (instance"),
                "{}: {}",
                rule.name,
                rule.expr
            );
        }
    }

    #[test]
    fn rule_names_are_unique() {
        let mut names: Vec<_> = files()
            .iter()
            .flat_map(|f| f.groups.iter().flat_map(|g| g.rules.iter().map(|r| r.name)))
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
