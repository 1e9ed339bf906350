//! Every label a panel query or rule matches on, groups by or folds must be on the metric in the
//! daemon's default exposition (`[metrics] detail = "basic"`, what the test daemon runs with),
//! read after the load so that every family the host can produce has its series. A metric the
//! host does not produce (NFS without a mount, pending ones) cannot be judged and is listed.

use std::collections::BTreeSet;

use testkit::Scrape;
use wbscope_dashboards::grafana::DashboardInfo;
use wbscope_dashboards::labels::label_uses;

/// Labels used but missing from the exposition (`family: label (where)`), and the families
/// that could not be judged.
pub fn missing(
    dashboards: &[(String, DashboardInfo)],
    scrape: &Scrape,
) -> (Vec<String>, BTreeSet<String>) {
    let mut exprs: Vec<(String, String)> = Vec::new();
    for (file, d) in dashboards {
        for panel in &d.panels {
            for t in &panel.targets {
                exprs.push((format!("{file}: {}", panel.title), t.expr.clone()));
            }
        }
    }
    for f in wbscope_dashboards::rules::files() {
        for g in &f.groups {
            for r in &g.rules {
                exprs.push((format!("{}: {}", f.file, r.name), r.expr.clone()));
            }
        }
    }
    let mut missing = Vec::new();
    let mut unjudged = BTreeSet::new();
    for (place, expr) in &exprs {
        for (family, label) in label_uses(expr) {
            let samples: Vec<_> = scrape
                .all_samples()
                .iter()
                .filter(|s| {
                    s.name == family
                        || wbscope_dashboards::promql::strip_histogram_suffix(&s.name)
                            == Some(family.as_str())
                })
                .collect();
            if samples.is_empty() {
                unjudged.insert(family);
            } else if !samples.iter().any(|s| s.labels.contains_key(&label)) {
                missing.push(format!("{family}: {label} ({place})"));
            }
        }
    }
    (missing, unjudged)
}
