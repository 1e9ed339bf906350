//! Each kernel test's outcome in the guest, read from its framed console section, and the
//! summary line of the support table.

use std::fmt::Write as _;

use crate::vmtest::guest::section;

/// Lines of a failed test's output (or of the console, when the guest never finished) printed
/// at the end of the run.
pub const TAIL_LINES: usize = 40;

/// How one test ended in the guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Passed without asserting: a hook it needs is skipped on this kernel (the reason it printed).
    Skipped(String),
    Failed(i32),
    /// The guest's watchdog killed it after its time.
    TimedOut,
    /// Its section never ended: the guest crashed or its overall time ran out.
    NoResult,
    /// Never started.
    NotRun,
}

impl Outcome {
    /// Whether the test counts as passed.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Passed | Outcome::Skipped(_))
    }

    pub fn label(&self) -> String {
        match self {
            Outcome::Passed => "ok".to_owned(),
            Outcome::Skipped(why) => format!("skipped ({why})"),
            Outcome::Failed(rc) => format!("FAILED (exit status {rc})"),
            Outcome::TimedOut => "TIMED OUT".to_owned(),
            Outcome::NoResult => "NO RESULT (the guest stopped during it)".to_owned(),
            Outcome::NotRun => "NOT RUN".to_owned(),
        }
    }
}

/// What a test prints (at the start of a line) when it skips itself, followed by the reason.
pub const SKIP_MARKER: &str = "SKIPPED: ";

/// One test's outcome and its output.
pub struct TestRun {
    pub name: String,
    pub outcome: Outcome,
    pub text: String,
}

/// Every planned test's run, in plan order.
pub fn read(console: &str, tests: &[String]) -> Vec<TestRun> {
    tests
        .iter()
        .map(|name| {
            let Some(s) = section(console, &format!("test {name}")) else {
                return TestRun {
                    name: name.clone(),
                    outcome: Outcome::NotRun,
                    text: String::new(),
                };
            };
            let timeout = format!("@@VMTEST timeout test {name} ");
            let skipped = s
                .text
                .lines()
                .find_map(|l| l.trim_start().strip_prefix(SKIP_MARKER));
            let outcome = match s.rc {
                None => Outcome::NoResult,
                Some(_) if s.text.contains(&timeout) => Outcome::TimedOut,
                Some(0) => match skipped {
                    Some(why) => Outcome::Skipped(why.trim().to_owned()),
                    None => Outcome::Passed,
                },
                Some(rc) => Outcome::Failed(rc),
            };
            TestRun {
                name: name.clone(),
                outcome,
                text: s.text,
            }
        })
        .collect()
}

/// One line for the table: `ok. 5 passed; 1 skipped; 0 failed; finished in 31 s`.
pub fn summary(runs: &[TestRun], guest_secs: Option<u64>) -> String {
    let count = |f: fn(&Outcome) -> bool| runs.iter().filter(|r| f(&r.outcome)).count();
    let passed = count(|o| *o == Outcome::Passed);
    let skipped = count(|o| matches!(o, Outcome::Skipped(_)));
    let timed_out = count(|o| *o == Outcome::TimedOut);
    let failed = runs.len() - passed - skipped - timed_out;
    let all_ok = runs.iter().all(|r| r.outcome.is_ok());
    let mut s = format!(
        "{}. {passed} passed; ",
        if all_ok { "ok" } else { "FAILED" }
    );
    if skipped > 0 {
        let _ = write!(s, "{skipped} skipped; ");
    }
    if timed_out > 0 {
        let _ = write!(s, "{timed_out} timed out; ");
    }
    let _ = write!(s, "{failed} failed");
    if let Some(secs) = guest_secs {
        let _ = write!(s, "; finished in {secs} s");
    }
    s
}

/// Prints each test's outcome, and the output tail of those that did not pass.
pub fn print(runs: &[TestRun]) {
    for r in runs {
        println!("    {}: {}", r.name, r.outcome.label());
    }
    for r in runs.iter().filter(|r| !r.outcome.is_ok()) {
        println!(
            "--- {} {}; its last lines in the guest:",
            r.name,
            r.outcome.label()
        );
        println!("{}", tail(&r.text, TAIL_LINES));
    }
}

/// The guest's total test time, from the script's closing line.
pub fn guest_secs(console: &str) -> Option<u64> {
    console.lines().find_map(|l| {
        l.split("@@VMTEST tests finished in ")
            .nth(1)?
            .trim_end_matches('s')
            .trim()
            .parse()
            .ok()
    })
}

/// The kernel's own complaints on the console (it prints those at error level and above even
/// with `quiet`): soft lockups, hung tasks, RCU stalls, BUGs and WARNINGs.
pub fn kernel_warnings(console: &str) -> Vec<&str> {
    const SIGNS: &[&str] = &[
        "soft lockup",
        "blocked for more than",
        "rcu_sched self-detected stall",
        "rcu_preempt self-detected stall",
        "detected stalls on CPUs",
        "BUG:",
        "WARNING:",
        "Oops",
    ];
    console
        .lines()
        .filter(|l| SIGNS.iter().any(|s| l.contains(s)))
        .collect()
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_outcome_and_summarises() {
        let console = "@@VMTEST begin test a\nok\n@@VMTEST end test a rc=0\n\
            @@VMTEST begin test b\n  SKIPPED: probe x is skipped here\n@@VMTEST end test b rc=0\n\
            @@VMTEST begin test c\npanicked\n@@VMTEST end test c rc=101\n\
            @@VMTEST begin test d\n@@VMTEST timeout test d after 300s; stuck tasks:\n\
            @@VMTEST end test d rc=137\n@@VMTEST tests finished in 42s\n\
            @@VMTEST begin test e\nrunning\n";
        let names: Vec<String> = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
        let runs = read(console, &names);
        let outcomes: Vec<Outcome> = runs.iter().map(|r| r.outcome.clone()).collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Passed,
                Outcome::Skipped("probe x is skipped here".into()),
                Outcome::Failed(101),
                Outcome::TimedOut,
                Outcome::NoResult,
                Outcome::NotRun
            ]
        );
        assert_eq!(guest_secs(console), Some(42));
        assert_eq!(
            summary(&runs, Some(42)),
            "FAILED. 1 passed; 1 skipped; 1 timed out; 3 failed; finished in 42 s"
        );
        assert_eq!(
            summary(&runs[..2], None),
            "ok. 1 passed; 1 skipped; 0 failed"
        );
        assert_eq!(tail("1\n2\n3\n", 2), "2\n3");
        assert_eq!(
            kernel_warnings(
                "[ 9.1] ok\n[ 30.2] watchdog: BUG: soft lockup - CPU#1 stuck for 22s!\n"
            ),
            ["[ 30.2] watchdog: BUG: soft lockup - CPU#1 stuck for 22s!"]
        );
    }
}
