//! `check`'s lines on the probes that have an fentry alternative to their tracepoint (the sync
//! calls): which hook they got, why not fentry where they did not, and whether the host pays
//! the `syscalls:` tracepoints' tax on every system call.

use crate::probes::{HookChoice, ProbeReport};

/// The lines, from the attach reports and the configured choice.
pub fn describe(reports: &[ProbeReport], choice: HookChoice) -> Vec<String> {
    let mut lines = Vec::new();
    let with_fentry: Vec<&ProbeReport> =
        reports.iter().filter(|r| r.spec.fentry.is_some()).collect();
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
    lines.push(syscall_tax(reports));
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
}
