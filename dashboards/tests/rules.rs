//! `promtool check rules` and `promtool test rules` on the committed rule files (unit tier):
//! the unit tests in `tests/rules/` show that the probe and dropped-event alerts stay silent on
//! a kernel-skipped or config-disabled probe and on flight-recorder eviction, fire on a real
//! failure, and that alerts and recording rules keep the target labels (`job`, `cluster`).
//! promtool comes from Debian's prometheus package, which `cargo xtask setup` installs.

use std::{path::PathBuf, process::Command};

fn dashboards() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn promtool(args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dashboards())
        .output()
        .expect("run promtool (from Debian's prometheus package; `cargo xtask setup` installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn rule_files_pass_promtool_check() {
    let out = promtool(&[
        "check",
        "rules",
        "rules/wbscope-alerts.yml",
        "rules/wbscope-recording.yml",
    ]);
    assert!(out.contains("SUCCESS: 7 rules found"), "{out}");
}

#[test]
fn rule_unit_tests_pass() {
    let out = promtool(&["test", "rules", "tests/rules/wbscope-rules.test.yml"]);
    assert!(out.contains("SUCCESS"), "{out}");
}
