//! Every query the dashboards and rules run, with Grafana's variables substituted, evaluated
//! through Prometheus' HTTP API; each must return at least one series with a finite value,
//! unless it reads a pending metric or its alert is allow-listed.

use serde_json::Value;
use wbscope_dashboards::grafana::DashboardInfo;
use wbscope_dashboards::names::Catalog;

use crate::allow;
use crate::prometheus::{Prometheus, finite, max};

/// The window substituted for `$__rate_interval` and `$__range`: what Grafana uses on a
/// multi-day time range, and long enough that the whole workload is inside every window.
pub const WINDOW: &str = "5m";

/// Values of the dashboard variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Vars {
    pub job: String,
    pub cluster: String,
    pub instance: String,
    pub device: String,
}

impl Vars {
    /// The value the test gives the variable `name`.
    fn get(&self, name: &str) -> &str {
        match name {
            "job" => &self.job,
            "cluster" => &self.cluster,
            "instance" => &self.instance,
            _ => &self.device,
        }
    }

    /// `self` with the variable `name` set to `value`.
    fn with(&self, name: &str, value: &str) -> Vars {
        let mut v = self.clone();
        match name {
            "job" => v.job = value.to_owned(),
            "cluster" => v.cluster = value.to_owned(),
            "instance" => v.instance = value.to_owned(),
            _ => v.device = value.to_owned(),
        }
        v
    }

    /// `expr` as Grafana would send it with these variables.
    pub fn substitute(&self, expr: &str) -> String {
        expr.replace("$__rate_interval", WINDOW)
            .replace("${job}", &self.job)
            .replace("$job", &self.job)
            .replace("${cluster}", &self.cluster)
            .replace("$cluster", &self.cluster)
            .replace("$__range", WINDOW)
            .replace("$__interval", "15s")
            .replace("${instance}", &self.instance)
            .replace("$instance", &self.instance)
            .replace("${device}", &self.device)
            .replace("$device", &self.device)
    }
}

/// One evaluated query, as printed.
pub struct Line {
    pub place: String,
    pub outcome: String,
    pub failed: bool,
}

/// Evaluates `expr` and describes the result. It fails without a series of finite value, and,
/// when the series carry a `device` label, without one for the test's device (the daemon sees
/// every device of the host; only the test's own is known to have had the workload).
fn evaluate(prom: &Prometheus, expr: &str, device: &str) -> (String, bool) {
    let series = match prom.query(expr) {
        Ok(series) => series,
        Err(e) => return (format!("query failed: {e}"), true),
    };
    let good = finite(&series);
    let mut text = format!("{} series", series.len());
    if good != series.len() {
        text += &format!(" ({good} finite; NaN: {})", nan_labels(&series));
    }
    if let Some(max) = max(&series) {
        text += &format!(", max {max:.3e}");
    }
    let mut failed = good == 0;
    if series.iter().any(|s| s["metric"]["device"].is_string()) {
        let ours = series
            .iter()
            .filter(|s| s["metric"]["device"] == device)
            .count();
        if ours != series.len() {
            text += &format!(", {ours} for {device}");
        }
        failed |= ours == 0;
    }
    (text, failed)
}

/// Evaluates one query unless it reads a pending metric.
fn check(prom: &Prometheus, catalog: &Catalog, place: String, expr: &str, vars: &Vars) -> Line {
    let pending = catalog.pending_in(expr);
    if let Some(p) = pending.first() {
        return Line {
            place,
            outcome: format!("skipped: reads {} ({})", p.name, p.reason),
            failed: false,
        };
    }
    let (outcome, failed) = evaluate(prom, &vars.substitute(expr), &vars.device);
    Line {
        place,
        outcome,
        failed,
    }
}

/// Every panel of `dashboards`, one line per panel with the series count of each target.
pub fn panels(
    prom: &Prometheus,
    catalog: &Catalog,
    dashboards: &[(String, DashboardInfo)],
    vars: &Vars,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for (file, d) in dashboards {
        for p in &d.panels {
            let results: Vec<(String, Line)> = p
                .targets
                .iter()
                .map(|t| {
                    let line = check(prom, catalog, String::new(), &t.expr, vars);
                    (t.ref_id.clone(), line)
                })
                .collect();
            lines.push(Line {
                place: format!("{} / {}", short(file), p.title),
                outcome: results
                    .iter()
                    .map(|(r, l)| format!("{r}: {}", l.outcome))
                    .collect::<Vec<_>>()
                    .join("; "),
                failed: results.iter().any(|(_, l)| l.failed),
            });
        }
        for v in &d.variables {
            lines.push(variable(prom, catalog, file, &v.name, &v.selector, vars));
        }
    }
    lines
}

/// A variable's `label_values` selector must return series carrying the value the test uses.
fn variable(
    prom: &Prometheus,
    catalog: &Catalog,
    file: &str,
    name: &str,
    selector: &str,
    vars: &Vars,
) -> Line {
    let place = format!("{} / variable ${name}", short(file));
    let mut line = check(prom, catalog, place, selector, vars);
    let want = vars.get(name);
    let series = prom.query(&vars.substitute(selector)).unwrap_or_default();
    if !series.iter().any(|s| s["metric"][name] == want) {
        line.outcome += &format!(", none with {name}={want}");
        line.failed = true;
    }
    line
}

/// Every rule's expression (allow-listed alerts without their threshold), and every recorded
/// series, which proves Prometheus evaluated the rule.
/// Every data link of every panel, followed as a user would: the link's source query gives
/// a series (the test device's where there is one), the link's `var-<name>` parameters take
/// that series' labels, and every panel query of the dashboard it opens must return series for
/// those values. Each distinct target is evaluated once.
pub fn links(
    prom: &Prometheus,
    catalog: &Catalog,
    dashboards: &[(String, DashboardInfo)],
    vars: &Vars,
) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut evaluated: std::collections::HashMap<(String, Vars), (String, bool)> =
        Default::default();
    for (file, d) in dashboards {
        for p in &d.panels {
            for link in &p.links {
                let place = format!("{} / {} → link", short(file), p.title);
                let Some((target_file, target)) =
                    dashboards.iter().find(|(_, t)| t.uid == link.uid)
                else {
                    lines.push(Line {
                        place,
                        outcome: format!("opens {}, which is not a dashboard of ours", link.uid),
                        failed: true,
                    });
                    continue;
                };
                let mut link_vars = vars.clone();
                // A source query on a pending metric (or one of a module this kernel lacks)
                // has nothing to click here: skipped with its reason, like the query itself.
                let source_pending = p
                    .targets
                    .first()
                    .and_then(|t| catalog.pending_in(&t.expr).first().copied());
                if let Some(pending) = source_pending
                    && !link.from_labels.is_empty()
                {
                    lines.push(Line {
                        place,
                        outcome: format!("skipped: reads {} ({})", pending.name, pending.reason),
                        failed: false,
                    });
                    continue;
                }
                if !link.from_labels.is_empty() {
                    let source = p.targets.first().map(|t| vars.substitute(&t.expr));
                    let series = source
                        .and_then(|expr| prom.query(&expr).ok())
                        .unwrap_or_default();
                    let clicked = series
                        .iter()
                        .find(|s| s["metric"]["device"] == vars.device.as_str())
                        .or_else(|| series.first());
                    let Some(clicked) = clicked else {
                        lines.push(Line {
                            place,
                            outcome: "the source query has no series to click".into(),
                            failed: true,
                        });
                        continue;
                    };
                    for (var, label) in &link.from_labels {
                        let value = clicked["metric"][label].as_str().unwrap_or_default();
                        link_vars = link_vars.with(var, value);
                    }
                }
                let key = (target.uid.clone(), link_vars.clone());
                let (outcome, failed) = evaluated
                    .entry(key)
                    .or_insert_with(|| follow(prom, catalog, target, &link_vars))
                    .clone();
                lines.push(Line {
                    place,
                    outcome: format!(
                        "{} instance={} device={}: {outcome}",
                        short(target_file),
                        link_vars.instance,
                        link_vars.device
                    ),
                    failed,
                });
            }
        }
    }
    lines
}

/// Every panel query of `target` with `vars`: how many return series, and which do not.
fn follow(
    prom: &Prometheus,
    catalog: &Catalog,
    target: &DashboardInfo,
    vars: &Vars,
) -> (String, bool) {
    let mut total = 0;
    let mut empty = Vec::new();
    let mut skipped = 0;
    for p in &target.panels {
        for t in &p.targets {
            let line = check(prom, catalog, String::new(), &t.expr, vars);
            if line.outcome.starts_with("skipped:") {
                skipped += 1;
                continue;
            }
            total += 1;
            if line.failed {
                empty.push(format!("{} {}", p.title, t.ref_id));
            }
        }
    }
    let mut text = format!(
        "{} of {total} panel queries return series",
        total - empty.len()
    );
    if skipped > 0 {
        text += &format!(" ({skipped} pending skipped)");
    }
    if !empty.is_empty() {
        text += &format!("; without: {}", empty.join(", "));
    }
    (text, !empty.is_empty())
}

pub fn rules(prom: &Prometheus, catalog: &Catalog, groups: &[Value], vars: &Vars) -> Vec<Line> {
    let mut lines = Vec::new();
    for rule in groups
        .iter()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
    {
        let name = rule["name"].as_str().unwrap_or_default();
        let query = rule["query"].as_str().unwrap_or_default();
        let place = format!("rule {name}");
        if rule["health"] == "err" {
            lines.push(Line {
                place,
                outcome: format!("evaluation error: {}", rule["lastError"]),
                failed: true,
            });
            continue;
        }
        let line = match allow::reason(name) {
            Some(reason) => match allow::strip_threshold(query) {
                Some(inner) => {
                    let mut l = check(prom, catalog, place, inner, vars);
                    l.outcome = format!("{} without its threshold (allowed: {reason})", l.outcome);
                    l
                }
                None => Line {
                    place,
                    outcome: "allow-listed but has no final threshold to strip".into(),
                    failed: true,
                },
            },
            None => check(prom, catalog, place, query, vars),
        };
        lines.push(line);
        if rule["type"] == "recording" {
            let recorded = if catalog.pending_in(query).is_empty() {
                name.to_owned()
            } else {
                // Reads a pending metric: skipped with the same reason as its expression.
                query.to_owned()
            };
            lines.push(check(
                prom,
                catalog,
                format!("recorded {name}"),
                &recorded,
                vars,
            ));
        }
    }
    lines
}

/// The distinguishing labels of up to three series without a finite value (a quantile over a
/// window without events, a ratio over zero).
fn nan_labels(series: &[Value]) -> String {
    let mut shown: Vec<String> = series
        .iter()
        .filter(|s| finite(std::slice::from_ref(*s)) == 0)
        .map(|s| {
            let labels = s["metric"].as_object().cloned().unwrap_or_default();
            labels
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "instance" | "job" | "__name__"))
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let more = shown.len().saturating_sub(3);
    shown.truncate(3);
    if more > 0 {
        shown.push(format!("{more} more"));
    }
    shown.join(" ")
}

fn short(file: &str) -> &str {
    file.trim_start_matches("grafana/wbscope-")
        .trim_end_matches(".json")
}
