//! The kernel support table (kernel, probes attached, what degrades, tests), written to
//! `target/vmtest/kernel-support.md` after every run and, with `--readme`, into the README
//! between its markers.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// What one kernel showed.
pub struct KernelResult {
    /// `uname -r`.
    pub release: String,
    /// Where it ran: the Debian package booted in QEMU, or the host.
    pub source: String,
    /// `(attached, total)` from `wbscope check`.
    pub attached: Option<(usize, usize)>,
    /// Probes that did not attach, with `wbscope check`'s reason.
    pub degraded: Vec<(String, String)>,
    /// Lines of `wbscope check`'s header that say something is not available on this kernel
    /// (and that the host does not print).
    pub notes: Vec<String>,
    /// libtest's result line for the kernel-test subset, or why there is none.
    pub tests: String,
    /// Host wall time of the whole boot, in seconds.
    pub wall_secs: f64,
    /// Whether `wbscope check` and the tests passed.
    pub passed: bool,
    /// When not: the failed tests and, for a guest that did not finish, its console's tail.
    pub failures: String,
}

const BEGIN: &str = "<!-- kernel-support:begin (cargo xtask vmtest --readme) -->";
const END: &str = "<!-- kernel-support:end -->";

/// The markdown table.
pub fn table(results: &[KernelResult]) -> String {
    let mut s = String::from(
        "| kernel | probes attached | what degrades | kernel tests in the VM | wall time |\n\
         |---|---|---|---|---|\n",
    );
    for r in results {
        let attached = match r.attached {
            Some((n, m)) => format!("{n} of {m}"),
            None => "no check output".to_owned(),
        };
        let parts: Vec<String> = r
            .degraded
            .iter()
            .map(|(probe, why)| format!("`{probe}` {why}"))
            .chain(r.notes.iter().cloned())
            .map(|p| p.replace('|', "\\|"))
            .collect();
        let degraded = if parts.is_empty() {
            "nothing".to_owned()
        } else {
            parts.join("; ")
        };
        let _ = writeln!(
            s,
            "| {} ({}) | {attached} | {degraded} | {} | {:.0} s |",
            r.release,
            r.source,
            r.tests.replace('|', "\\|"),
            r.wall_secs
        );
    }
    s
}

/// Replaces the README's block between the markers with `table`.
pub fn write_readme(readme: &Path, table: &str) -> Result<()> {
    let text = fs::read_to_string(readme).with_context(|| format!("read {}", readme.display()))?;
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        bail!("{} has no {BEGIN} … {END} block", readme.display());
    };
    let new = format!("{}{BEGIN}\n{table}{}", &text[..b], &text[e..]);
    fs::write(readme, new).with_context(|| format!("write {}", readme.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_degraded_probes_and_escapes_pipes() {
        let t = table(&[KernelResult {
            release: "6.1.0-57-cloud-amd64".into(),
            source: "Debian package".into(),
            attached: Some((35, 36)),
            degraded: vec![("block_io_start".into(), "skipped: a|b".into())],
            notes: vec!["block: latency not from the kernel".into()],
            tests: "ok. 4 passed; 0 failed".into(),
            wall_secs: 61.4,
            passed: true,
            failures: String::new(),
        }]);
        assert!(
            t.contains(
                "| 35 of 36 | `block_io_start` skipped: a\\|b; block: latency not from the kernel |"
            ),
            "{t}"
        );
        assert!(t.contains("| 61 s |"), "{t}");
    }
}
