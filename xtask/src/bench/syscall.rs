//! The global cost of syscall tracepoints: attaching a program to any `syscalls:` tracepoint
//! sets the syscall-trace flag on every task, so every syscall of every process takes the slow
//! entry path. Measured as the time per `getppid(2)` in a tight loop, without and with the
//! daemon attached, in alternating order.

use std::time::Instant;

use anyhow::{Context, Result};

use super::bpfstats;
use super::daemon::{Daemon, Probe};
use super::report::Section;
use super::stats::{fmt_ratio, median, ratio};
use super::{Ctx, interrupt};

/// Loops per trial; the trial's figure is their median, which discards a loop that a
/// compile job on the other core preempted.
const LOOPS_PER_TRIAL: usize = 5;

/// ns per `getppid` in each configuration, one value per trial.
pub struct SyscallCost {
    pub without: Vec<f64>,
    pub with: Vec<f64>,
    /// With the daemon, its `syscalls:` probes disabled (empty when it has none): separates the
    /// syscall slow path from everything else the daemon does.
    pub without_syscall_probes: Vec<f64>,
    /// Syscall tracepoint attachments of other processes seen during the "without" trials:
    /// when non-zero, the baseline already ran on the slow path.
    pub foreign_attachments: usize,
}

/// The configurations a trial round measures.
#[derive(Clone, Copy)]
enum Variant {
    Without,
    With,
    WithoutSyscallProbes,
}

/// `calls` getppid calls; ns per call. getppid goes to the kernel every time (glibc does not
/// cache it) and does almost nothing there, so the entry/exit path dominates.
fn ns_per_call(calls: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    start.elapsed().as_nanos() as f64 / calls.max(1) as f64
}

fn trial(calls: u64) -> f64 {
    let loops: Vec<f64> = (0..LOOPS_PER_TRIAL)
        .map(|_| ns_per_call(calls / LOOPS_PER_TRIAL as u64))
        .collect();
    median(&loops).unwrap_or(0.0)
}

/// Runs `ctx.plan.syscall_pairs` rounds of trials, rotating the order of the configurations.
pub fn run(ctx: &Ctx, probes: &[Probe]) -> Result<SyscallCost> {
    interrupt::check()?;
    let syscall_names: Vec<String> = syscall_probes(probes)
        .iter()
        .map(|p| p.name.clone())
        .collect();
    let config = ctx.log_path("no-syscall-probes.toml");
    std::fs::write(&config, disable_config(&syscall_names))
        .with_context(|| format!("writing {}", config.display()))?;
    let mut variants = vec![Variant::Without, Variant::With];
    if !syscall_names.is_empty() {
        variants.push(Variant::WithoutSyscallProbes);
    }
    let mut cost = SyscallCost {
        without: Vec::new(),
        with: Vec::new(),
        without_syscall_probes: Vec::new(),
        foreign_attachments: 0,
    };
    for round in 0..ctx.plan.syscall_pairs {
        for k in 0..variants.len() {
            interrupt::check()?;
            let log = ctx.log_path("syscall.log");
            match variants[(round + k) % variants.len()] {
                Variant::Without => {
                    cost.foreign_attachments = cost.foreign_attachments.max(syscall_attachments()?);
                    cost.without.push(trial(ctx.plan.syscall_calls));
                }
                Variant::With => {
                    let daemon = Daemon::start(&ctx.binary, &log)?;
                    cost.with.push(trial(ctx.plan.syscall_calls));
                    daemon.stop()?;
                }
                Variant::WithoutSyscallProbes => {
                    let daemon = Daemon::start_with(&ctx.binary, &log, Some(&config))?;
                    cost.without_syscall_probes
                        .push(trial(ctx.plan.syscall_calls));
                    daemon.stop()?;
                }
            }
        }
    }
    Ok(cost)
}

/// A daemon configuration that disables `names`.
fn disable_config(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("[probes]\ndisable = [{}]\n", quoted.join(", "))
}

/// How many BPF programs are attached to syscall tracepoints right now.
fn syscall_attachments() -> Result<usize> {
    Ok(bpfstats::attachments()?
        .iter()
        .filter(|a| is_syscall_hook(&a.tracepoint))
        .count())
}

/// `sys_enter_*` / `sys_exit_*` (syscalls:) and `sys_enter` / `sys_exit` (raw_syscalls:).
fn is_syscall_hook(tracepoint: &str) -> bool {
    tracepoint.starts_with("sys_enter") || tracepoint.starts_with("sys_exit")
}

/// The probes that hook syscall entry or exit (the path that costs every task).
fn syscall_probes(probes: &[Probe]) -> Vec<&Probe> {
    probes
        .iter()
        .filter(|p| p.attached && p.hook.contains("syscalls/"))
        .collect()
}

/// Rows: without, with, overhead per syscall, and which hook path the kernel got.
pub fn section(cost: &SyscallCost, probes: &[Probe]) -> Section {
    let mut s = Section::new(
        "syscall",
        "Global cost of syscall tracepoints (getppid loop)",
        &["measurement", "value", "trials"],
    );
    let without = median(&cost.without).unwrap_or(0.0);
    let with = median(&cost.with).unwrap_or(0.0);
    let trials = cost.without.len().to_string();
    let vs_without = |v: f64| format!("{:+.1} ns ({})", v - without, fmt_ratio(ratio(v, without)));
    s.row(
        "without",
        vec![
            "ns per getppid, without wbscope (median)".into(),
            format!("{without:.1} ns"),
            trials.clone(),
        ],
    );
    s.row(
        "with",
        vec![
            "ns per getppid, with wbscope (median)".into(),
            format!("{with:.1} ns"),
            trials.clone(),
        ],
    );
    s.row(
        "overhead",
        vec![
            "added per syscall by wbscope (ratio with/without)".into(),
            vs_without(with),
            trials.clone(),
        ],
    );
    let no_sys = median(&cost.without_syscall_probes);
    s.row(
        "overhead-without-syscall-probes",
        vec![
            "added per syscall with wbscope's syscalls: probes disabled".into(),
            no_sys.map_or_else(|| "n/a (no syscalls: probes)".into(), vs_without),
            cost.without_syscall_probes.len().to_string(),
        ],
    );
    let names = |ps: Vec<&Probe>| ps.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    let hooked = names(syscall_probes(probes));
    let fentry = names(
        probes
            .iter()
            .filter(|p| p.attached && (p.hook.starts_with("fentry") || p.hook.starts_with("fexit")))
            .collect(),
    );
    let mut path = Vec::new();
    if !fentry.is_empty() {
        path.push(format!("fentry/fexit ({})", fentry.join(", ")));
    }
    if !hooked.is_empty() {
        path.push(format!("syscalls: tracepoints ({})", hooked.join(", ")));
    }
    let path = if path.is_empty() {
        "no syscall tracepoints and no fentry/fexit attached".to_owned()
    } else {
        path.join("; ")
    };
    s.row(
        "hook-path",
        vec![
            "sync-call hook path on this kernel".into(),
            path,
            "-".into(),
        ],
    );
    if cost.foreign_attachments > 0 {
        s.note(format!(
            "{} syscall tracepoint attachment(s) of other processes were present during the \
             baseline, so \"without\" already ran on the slow syscall path and the overhead is \
             understated.",
            cost.foreign_attachments
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_syscall_hooks() {
        assert!(is_syscall_hook("sys_enter_fsync"));
        assert!(is_syscall_hook("sys_exit"));
        assert!(!is_syscall_hook("block_rq_issue"));
        let probes = vec![
            Probe {
                name: "sys_enter_fsync".into(),
                hook: "tracepoint syscalls/sys_enter_fsync".into(),
                attached: true,
            },
            Probe {
                name: "writeback_start".into(),
                hook: "tracepoint writeback/writeback_start".into(),
                attached: true,
            },
        ];
        assert_eq!(syscall_probes(&probes).len(), 1);
    }

    #[test]
    fn writes_a_disable_config() {
        let names = vec!["sys_enter_fsync".to_owned(), "sys_exit_fsync".to_owned()];
        assert_eq!(
            disable_config(&names),
            "[probes]\ndisable = [\"sys_enter_fsync\", \"sys_exit_fsync\"]\n"
        );
    }

    #[test]
    fn getppid_loop_measures_something() {
        let ns = ns_per_call(1000);
        assert!(ns > 0.0 && ns < 1e6, "{ns}");
    }
}
