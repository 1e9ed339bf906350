//! End to end: the release daemon, scraped every second by a private Prometheus that loads our
//! rule files, while a workload runs on a loop-device ext4 filesystem; then every panel query,
//! variable and rule expression of the committed dashboards and rules is evaluated through
//! Prometheus' HTTP API and must return series, and every data link is followed: the
//! dashboard it opens must return series for the host and device of the series clicked. Prints one line per panel with the number of
//! series of each query. Needs root, `WBSCOPE_BIN`, fio and prometheus; run with
//! `cargo xtask test --tier e2e`.

mod allow;
mod kernel_gaps;
mod labels;
mod proc;
mod prometheus;
mod queries;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use testkit::mixed_load::{self, Pace};
use testkit::{FsKind, LoopFs, Scrape};
use wbscope_dashboards::names::Catalog;

use crate::proc::Daemon;
use crate::prometheus::Prometheus;
use crate::queries::{Line, Vars};

/// Scrapes (and rule evaluations) to wait for after the workload, so the last state is stored.
const SETTLE: Duration = Duration::from_secs(4);

fn rule_files() -> Vec<PathBuf> {
    wbscope_dashboards::rules::files()
        .iter()
        .map(|f| {
            wbscope_dashboards::root()
                .join(wbscope_dashboards::RULES_DIR)
                .join(f.file)
        })
        .collect()
}

/// Waits until Prometheus has scraped the daemon successfully.
fn wait_for_target(prom: &Prometheus, target: &str) {
    let query = format!("up{{instance=\"{target}\"}} == 1");
    let up = testkit::wait_until(Duration::from_secs(30), Duration::from_millis(250), || {
        prom.query(&query).ok().filter(|s| !s.is_empty())
    });
    assert!(
        up.is_some(),
        "prometheus never scraped {target}:\n{}",
        prom.log()
    );
}

/// Waits until every rule has been evaluated at least once (health is no longer "unknown").
fn wait_for_rules(prom: &Prometheus, expected: usize) -> Vec<serde_json::Value> {
    let groups = testkit::wait_until(Duration::from_secs(30), Duration::from_millis(250), || {
        let groups = prom.rule_groups().ok()?;
        let rules: Vec<_> = groups
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        (rules.len() == expected && rules.iter().all(|r| r["health"] != "unknown"))
            .then_some(groups)
    });
    groups.unwrap_or_else(|| {
        panic!(
            "prometheus did not load and evaluate {expected} rules from {:?}:\n{}",
            rule_files(),
            prom.log()
        )
    })
}

/// The series the daemon exports for the loaded device now (after the load, so every family the
/// dashboards read has its series), printed per family; at most [`mixed_load::SERIES_BUDGET`]
/// with the default detail level, which is what the daemon runs with here.
fn series_of_the_device(exposition: &Scrape, device: &str) -> usize {
    let by_family = exposition.series_of_device(device);
    let total = by_family.values().sum();
    println!("[e2e] {total} series for device {device} (default detail):");
    for (family, n) in &by_family {
        println!("[e2e]   {n:>4}  {family}");
    }
    total
}

fn print(lines: &[Line]) {
    let width = lines.iter().map(|l| l.place.len()).max().unwrap_or(0);
    for l in lines {
        let mark = if l.failed { "FAIL" } else { "ok  " };
        println!("[e2e] {mark} {:<width$}  {}", l.place, l.outcome);
    }
}

#[test]
#[ignore = "needs root, the release binary, fio and prometheus: run with cargo xtask test"]
fn every_panel_and_rule_returns_series_under_load() {
    if !testkit::require_root() {
        return;
    }
    let started = Instant::now();
    let root = wbscope_dashboards::root();
    let dashboards = wbscope_dashboards::read_dashboards(&root).expect("read dashboards");
    for (file, d) in &dashboards {
        assert!(d.problems.is_empty(), "{file}: {:?}", d.problems);
    }
    let mut pending = wbscope_dashboards::read_pending(&root).expect("read pending list");
    pending.extend(kernel_gaps::missing(&dashboards));
    let expected_rules: usize = wbscope_dashboards::rules::files()
        .iter()
        .flat_map(|f| &f.groups)
        .map(|g| g.rules.len())
        .sum();

    // Declared first so it drops last: its drop lifts the throttle before unmounting.
    let fs = LoopFs::new(FsKind::Ext4, 1024).expect("loop-device ext4");
    // mq-deadline, so requests are inserted into a scheduler and have a queue time.
    fs.set_scheduler("mq-deadline").expect("mq-deadline");
    let daemon = Daemon::start();
    let prom = Prometheus::start(daemon.addr, &rule_files());
    let vars = Vars {
        job: prometheus::JOB.to_owned(),
        cluster: prometheus::CLUSTER.to_owned(),
        instance: daemon.addr.to_string(),
        device: fs.loop_name().to_owned(),
    };
    println!(
        "[e2e] wbscope on {}, prometheus on {} ({}), device {}",
        daemon.addr,
        prom.addr,
        prom.dir().display(),
        vars.device
    );
    wait_for_target(&prom, &vars.instance);

    mixed_load::run_all(&fs, Pace::E2E).expect("mixed load");
    std::thread::sleep(SETTLE);
    let exposition = Scrape::parse(&testkit::scrape(daemon.addr).expect("scrape the daemon"))
        .expect("parse the exposition");
    let device_series = series_of_the_device(&exposition, &vars.device);
    let (missing_labels, unjudged) = labels::missing(&dashboards, &exposition);
    println!(
        "[e2e] labels the queries use: {} missing from the default exposition; not produced on \
         this host, so not judged: {unjudged:?}",
        missing_labels.len()
    );

    let groups = wait_for_rules(&prom, expected_rules);
    let registered = std::collections::BTreeSet::new();
    let catalog = Catalog {
        registered: &registered,
        recorded: &[],
        pending: &pending,
    };
    let evaluating = Instant::now();
    let mut lines = queries::panels(&prom, &catalog, &dashboards, &vars);
    lines.extend(queries::links(&prom, &catalog, &dashboards, &vars));
    lines.extend(queries::rules(&prom, &catalog, &groups, &vars));
    print(&lines);
    let failed: Vec<&str> = lines
        .iter()
        .filter(|l| l.failed)
        .map(|l| l.place.as_str())
        .collect();
    let skipped = lines
        .iter()
        .filter(|l| l.outcome.contains("skipped:"))
        .count();
    println!(
        "[e2e] {} lines, {} failed, {skipped} with pending metrics skipped; queries took {:.1}s, \
         the whole test {:.1}s",
        lines.len(),
        failed.len(),
        evaluating.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        missing_labels.is_empty(),
        "labels the dashboards or rules use that the default exposition lacks: {missing_labels:#?}"
    );
    assert!(
        device_series <= mixed_load::SERIES_BUDGET,
        "the device has {device_series} series, over the budget of {}",
        mixed_load::SERIES_BUDGET
    );
    assert!(
        failed.is_empty(),
        "queries without series: {failed:?}\nwbscope log:\n{}",
        daemon.log()
    );
}
