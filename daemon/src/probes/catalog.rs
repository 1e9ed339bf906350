//! Every probe the build knows: program name in the eBPF object and the hook it attaches to.

/// Which kernel layout facts a probe needs (see `kernel::layout::KernelLayout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `writeback_work_class` record offsets.
    WritebackWork,
    /// `writeback_pages_written`: needs no record fields, only the event.
    WritebackPassEnd,
    /// `sys_enter_fsync` `fd` offset (and BTF for fd → device).
    FsyncEnter,
    FdatasyncEnter,
    /// Syscall exits read no record fields.
    SyscallExit,
}

/// One eBPF program and the classic tracepoint it attaches to.
#[derive(Clone, Copy, Debug)]
pub struct ProbeSpec {
    /// Program (function) name in the eBPF object; also the `probe` label value.
    pub program: &'static str,
    pub category: &'static str,
    pub event: &'static str,
    pub family: Family,
}

const fn tp(
    program: &'static str,
    category: &'static str,
    event: &'static str,
    family: Family,
) -> ProbeSpec {
    ProbeSpec {
        program,
        category,
        event,
        family,
    }
}

/// All probes, in the order they are attached and reported.
pub const CATALOG: &[ProbeSpec] = &[
    tp(
        "writeback_queue",
        "writeback",
        "writeback_queue",
        Family::WritebackWork,
    ),
    tp(
        "writeback_exec",
        "writeback",
        "writeback_exec",
        Family::WritebackWork,
    ),
    tp(
        "writeback_start",
        "writeback",
        "writeback_start",
        Family::WritebackWork,
    ),
    tp(
        "writeback_written",
        "writeback",
        "writeback_written",
        Family::WritebackWork,
    ),
    tp(
        "writeback_pages_written",
        "writeback",
        "writeback_pages_written",
        Family::WritebackPassEnd,
    ),
    tp(
        "sys_enter_fsync",
        "syscalls",
        "sys_enter_fsync",
        Family::FsyncEnter,
    ),
    tp(
        "sys_exit_fsync",
        "syscalls",
        "sys_exit_fsync",
        Family::SyscallExit,
    ),
    tp(
        "sys_enter_fdatasync",
        "syscalls",
        "sys_enter_fdatasync",
        Family::FdatasyncEnter,
    ),
    tp(
        "sys_exit_fdatasync",
        "syscalls",
        "sys_exit_fdatasync",
        Family::SyscallExit,
    ),
];

impl ProbeSpec {
    /// `category/event`, as printed by `wbscope check`.
    pub fn hook(&self) -> String {
        format!("tracepoint {}/{}", self.category, self.event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_names_are_unique() {
        let mut names: Vec<_> = CATALOG.iter().map(|p| p.program).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOG.len());
    }
}
