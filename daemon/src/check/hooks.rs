//! `check`'s lines on the probes that have an fentry alternative to their tracepoint (the sync
//! calls, the end of writeback waits): which hook they got, why not fentry where they did not,
//! and whether the host pays the `syscalls:` tracepoints' tax on every system call.

use crate::probes::{Hook, HookChoice, ProbeReport};

/// Whether the probe's own hook is a `syscalls:` tracepoint (a sync call's).
fn on_syscalls_category(report: &ProbeReport) -> bool {
    matches!(
        report.spec.hook,
        Hook::Tracepoint {
            category: "syscalls",
            ..
        }
    )
}

/// The lines, from the attach reports and the configured choice.
pub fn describe(reports: &[ProbeReport], choice: HookChoice) -> Vec<String> {
    let mut lines = sync_call_lines(reports, choice);
    lines.extend(other_alternatives(reports));
    lines.push(syscall_tax(reports));
    lines
}

/// One line per other probe with an fentry alternative (the writeback waits' end): the hook it
/// got and, on its tracepoint, why not fentry/fexit.
fn other_alternatives(reports: &[ProbeReport]) -> Vec<String> {
    reports
        .iter()
        .filter(|r| r.spec.fentry.is_some() && !on_syscalls_category(r))
        .filter(|r| r.status.is_attached())
        .map(|r| match r.fentry_not_used.as_deref() {
            None => format!("{}: {} on {}", r.family, r.spec.program, r.hook),
            Some(why) => format!(
                "{}: {} on {} (fentry/fexit not used: {why})",
                r.family, r.spec.program, r.hook
            ),
        })
        .collect()
}

/// The sync calls' lines: their hook and why not fentry/fexit.
fn sync_call_lines(reports: &[ProbeReport], choice: HookChoice) -> Vec<String> {
    let mut lines = Vec::new();
    let with_fentry: Vec<&ProbeReport> = reports
        .iter()
        .filter(|r| r.spec.fentry.is_some() && on_syscalls_category(r))
        .collect();
    let attached = with_fentry
        .iter()
        .filter(|r| r.status.is_attached())
        .count();
    let on_fentry = with_fentry.iter().filter(|r| r.on_fentry()).count();
    let setting = format!("probes.sync_call_hook = \"{}\"", choice.as_str());
    let hook = if attached == 0 {
        "none attached".to_owned()
    } else if on_fentry == attached {
        "fentry/fexit on the syscall functions".to_owned()
    } else if on_fentry == 0 {
        "syscalls: tracepoints".to_owned()
    } else {
        format!("mixed: {on_fentry} on fentry/fexit, the others on syscalls: tracepoints")
    };
    lines.push(format!(
        "sync calls: hook {hook} ({attached} of {} probes attached; {setting})",
        with_fentry.len()
    ));
    // The reason is usually one and the same for all (the kernel refuses fentry): each once,
    // with the number of probes it kept on their tracepoints.
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for why in with_fentry
        .iter()
        .filter(|r| r.status.is_attached())
        .filter_map(|r| r.fentry_not_used.as_deref())
    {
        match reasons.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => reasons.push((why, 1)),
        }
    }
    for (why, n) in reasons {
        lines.push(format!(
            "sync calls: fentry/fexit not used by {n} of them: {why}"
        ));
    }
    lines
}

/// Whether any `syscalls:` tracepoint is attached (those of any family), and what that costs.
fn syscall_tax(reports: &[ProbeReport]) -> String {
    let taxing: Vec<&str> = reports
        .iter()
        .filter(|r| r.taxes_syscalls())
        .map(|r| r.spec.program)
        .collect();
    if taxing.is_empty() {
        return "syscall tax: none: no syscalls: tracepoint is attached".to_owned();
    }
    format!(
        "syscall tax: applies: {} syscalls: tracepoints attached ({}): while any is attached, \
         every system call on the host takes the tracepoint slow path",
        taxing.len(),
        taxing.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::{AttachStatus, ProbeSpec};

    const ENTER: ProbeSpec = ProbeSpec::tracepoint(
        "sys_enter_fsync",
        "syscalls",
        "sys_enter_fsync",
    )
    .with_fentry("fentry_fsync", false, &["__x64_sys_fsync"]);

    fn report(hook: &str, fentry_not_used: Option<&str>) -> ProbeReport {
        ProbeReport {
            family: "sync calls",
            spec: ENTER,
            hook: hook.to_owned(),
            status: AttachStatus::Attached,
            fentry_not_used: fentry_not_used.map(str::to_owned),
        }
    }

    #[test]
    fn fentry_everywhere_means_no_syscall_tax() {
        let lines = describe(&[report("fentry __x64_sys_fsync", None)], HookChoice::Auto);
        assert_eq!(
            lines,
            [
                "sync calls: hook fentry/fexit on the syscall functions (1 of 1 probes \
                 attached; probes.sync_call_hook = \"auto\")",
                "syscall tax: none: no syscalls: tracepoint is attached",
            ]
        );
    }

    #[test]
    fn a_fallback_names_the_reason_once_and_the_tax() {
        let refused = Some("EPERM");
        let reports = [
            report("tracepoint syscalls/sys_enter_fsync", refused),
            report("tracepoint syscalls/sys_enter_fsync", refused),
        ];
        let lines = describe(&reports, HookChoice::Auto);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].contains("hook syscalls: tracepoints (2 of 2"),
            "{lines:#?}"
        );
        assert_eq!(
            lines[1],
            "sync calls: fentry/fexit not used by 2 of them: EPERM"
        );
        assert!(
            lines[2].starts_with("syscall tax: applies: 2 syscalls: tracepoints attached"),
            "{lines:#?}"
        );
    }

    const WAIT_END: ProbeSpec = ProbeSpec::btf_tracepoint("folio_wait_end", "sched_wakeup")
        .with_fentry_pair(
            "folio_wait_bit_exit",
            true,
            &["folio_wait_bit"],
            crate::probes::FentryCompanion {
                program: "folio_wait_bit_killable_exit",
                functions: &["folio_wait_bit_killable"],
            },
        );

    fn wait_end(hook: &str, fentry_not_used: Option<&str>) -> ProbeReport {
        ProbeReport {
            family: "writeback waits",
            spec: WAIT_END,
            hook: hook.to_owned(),
            status: AttachStatus::Attached,
            fentry_not_used: fentry_not_used.map(str::to_owned),
        }
    }

    #[test]
    fn the_writeback_wait_end_gets_its_own_line_and_is_no_sync_call() {
        let on_fexit = [
            report("fentry __x64_sys_fsync", None),
            wait_end("fexit folio_wait_bit and folio_wait_bit_killable", None),
        ];
        let lines = describe(&on_fexit, HookChoice::Auto);
        assert!(lines[0].contains("(1 of 1 probes attached"), "{lines:#?}");
        assert_eq!(
            lines[1],
            "writeback waits: folio_wait_end on fexit folio_wait_bit and \
             folio_wait_bit_killable"
        );
        let refused = [wait_end("tp_btf sched_wakeup", Some("EPERM"))];
        let lines = describe(&refused, HookChoice::Auto);
        assert_eq!(
            lines[1],
            "writeback waits: folio_wait_end on tp_btf sched_wakeup (fentry/fexit not used: \
             EPERM)"
        );
        assert_eq!(
            lines[2],
            "syscall tax: none: no syscalls: tracepoint is attached"
        );
    }
}
