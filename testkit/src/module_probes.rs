//! Probes on the tracepoints of a kernel module that a test host may not have at all (the
//! development kernel has no NFS): `wbscope check` skips them there by design, with the reason,
//! and the tests that expect "every probe attaches" leave exactly those out. Where the module's
//! tracepoints exist (the vm tier loads nfs), they are required like every other probe.

use std::path::Path;

/// (probe name prefix, tracefs event directory the module registers).
const MODULE_PROBES: &[(&str, &str)] = &[("nfs_", "/sys/kernel/tracing/events/nfs")];

/// Whether `probe` hooks a module whose tracepoints this kernel does not have.
pub fn skipped_by_absent_module(probe: &str) -> bool {
    MODULE_PROBES
        .iter()
        .any(|(prefix, events)| probe.starts_with(prefix) && !Path::new(events).exists())
}

/// How many of `probes` are skipped that way.
pub fn count_skipped_by_absent_module<'a>(probes: impl IntoIterator<Item = &'a str>) -> usize {
    probes
        .into_iter()
        .filter(|p| skipped_by_absent_module(p))
        .count()
}
