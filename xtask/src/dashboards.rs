//! `cargo xtask dashboards`: the offline checks of the Grafana dashboards, Prometheus rules and
//! provisioning files.
//! Offline except for one step: the list of metric names comes from the release daemon itself
//! (`wbscope check --metrics`, which loads the probes and so needs root), never from a copy.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::cmd::{self, Cmd};
use crate::pins::Pins;
use crate::{host, run};

/// The rule unit tests, relative to the dashboards directory.
const RULE_TESTS: &str = "tests/rules/wbscope-rules.test.yml";

/// Arguments of `cargo xtask dashboards`.
#[derive(clap::Args, Debug)]
pub struct DashboardsArgs {
    /// Regenerate the dashboard JSON and rule files from their definitions and exit.
    #[arg(long)]
    pub write: bool,
}

/// Runs the subcommand.
pub fn run(pins: &Pins, args: &DashboardsArgs) -> Result<()> {
    let root = pins.root.join("dashboards");
    if args.write {
        let changed = wbscope_dashboards::write(&root)?;
        for path in &changed {
            println!("wrote dashboards/{}", path.display());
        }
        println!("{} generated files changed", changed.len());
        return Ok(());
    }
    check(pins)
}

/// The checks: generated files current, Grafana model, metric names, `promtool check rules`,
/// `promtool test rules` (the rule unit tests in `dashboards/tests/rules/`), yamllint.
pub fn check(pins: &Pins) -> Result<()> {
    if !host::is_root() {
        bail!(
            "the dashboards check asks the daemon which metrics it registers (`wbscope check \
             --metrics` loads the probes): run it as root"
        );
    }
    let root = pins.root.join("dashboards");
    run::build_release(pins)?;
    let names = registered_names(pins)?;
    let report = wbscope_dashboards::check(&root, &names)?;
    println!(
        "[dashboards] {} panels, {} queries and rules expressions, {} rules; the daemon registers \
         {} metric families",
        report.panels,
        report.queries,
        report.rules,
        names.len()
    );
    for p in &report.pending {
        println!("[dashboards] pending: {} ({})", p.name, p.reason);
    }
    // The YAML files keep the project's yamllint rules (100 columns), like deploy/.
    let tools = cmd::run_all([
        Cmd::new("promtool")
            .args(["check", "rules"])
            .args(rule_files(&root)?),
        Cmd::new("promtool")
            .args(["test", "rules"])
            .arg(root.join(RULE_TESTS)),
        Cmd::new("yamllint")
            .arg("-c")
            .arg(pins.root.join("deploy/.yamllint"))
            .arg(root.join(wbscope_dashboards::RULES_DIR))
            .arg(root.join(RULE_TESTS))
            .arg(root.join("provisioning")),
    ]);
    let mut problems = report.problems.clone();
    // The metrics reference and `wbscope check --metrics` name the same families.
    let doc_path = pins.root.join(crate::docs::METRICS_DOC);
    let doc = std::fs::read_to_string(&doc_path).unwrap_or_default();
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_owned()))
        .collect();
    if documented != names {
        problems.push(format!(
            "{} and `wbscope check --metrics` disagree (run `cargo xtask docs`): only in the \
             doc {:?}, only registered {:?}",
            crate::docs::METRICS_DOC,
            documented.difference(&names).collect::<Vec<_>>(),
            names.difference(&documented).collect::<Vec<_>>()
        ));
    }
    for problem in &problems {
        println!("[dashboards] problem: {problem}");
    }
    match (problems.len(), tools) {
        (0, tools) => tools,
        (n, tools) => bail!(
            "{n} problems in dashboards/{}",
            tools.err().map_or(String::new(), |e| format!("; {e:#}"))
        ),
    }
}

/// The metric family names the release daemon registers, one per line of its output.
fn registered_names(pins: &Pins) -> Result<BTreeSet<String>> {
    let out = Cmd::new(run::release_binary(pins))
        .args(["check", "--metrics"])
        .capture()?;
    let names: BTreeSet<String> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        bail!("`wbscope check --metrics` printed no metric names");
    }
    Ok(names)
}

/// `dashboards/rules/*.yml`, sorted.
fn rule_files(root: &std::path::Path) -> Result<Vec<PathBuf>> {
    let dir = root.join(wbscope_dashboards::RULES_DIR);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no rule files in {}", dir.display());
    }
    Ok(files)
}
