//! NFS client writeback: WRITE RPCs by mount, requested stability (UNSTABLE vs DATA_SYNC /
//! FILE_SYNC) and the sync mode of the writepages pass that issued them; COMMIT RPCs; their
//! latency and errors. The probes are in probe-ebpf/src/nfs.rs.
//!
//! The `nfs` tracepoints belong to the `nfs` module, so they exist only once it is loaded
//! (the first NFS mount loads it). wbscope resolves and attaches its probes at start: on a host
//! where the module loads later, the NFS probes stay skipped (the reason is in `wbscope check`
//! and the probe status metric) until wbscope restarts.

mod collect;
mod labels;
mod layout;

use aya::{Ebpf, EbpfLoader, maps::PerCpuHashMap};
use probe_common::nfs::{
    NfsFormat,
    globals::NFS_FMT,
    maps::{NFS_COMMITS, NFS_WRITES},
};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, LayoutError, Part, gap_of};
use crate::probes::ProbeSpec;

const PROBES: &[ProbeSpec] = &[
    ProbeSpec::tracepoint("nfs_initiate_write", layout::CATEGORY, "nfs_initiate_write"),
    ProbeSpec::tracepoint("nfs_writeback_done", layout::CATEGORY, "nfs_writeback_done"),
    ProbeSpec::tracepoint(
        "nfs_initiate_commit",
        layout::CATEGORY,
        "nfs_initiate_commit",
    ),
    ProbeSpec::tracepoint("nfs_commit_done", layout::CATEGORY, "nfs_commit_done"),
    // After the WRITE probes: the sync mode it tracks is read by nfs_initiate_write.
    ProbeSpec::btf_tracepoint("nfs_wbc_writepage", "wbc_writepage"),
];

/// The NFS family.
#[derive(Default)]
pub struct Nfs {
    writes: Part<()>,
    commits: Part<()>,
    pass_mode: Part<()>,
    /// Why the `nfs` tracepoints are missing, if they are.
    module_missing: Option<String>,
    /// The resolved parts as the probes' global (zero where unresolved).
    format: NfsFormat,
}

impl Family for Nfs {
    fn name(&self) -> &'static str {
        "nfs"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        let mut format = NfsFormat::default();
        self.module_missing = layout::module_missing(kernel);
        self.writes = Some(layout::writes(kernel, &mut format));
        self.commits = Some(layout::commits(kernel, &mut format));
        // Without the WRITE probes nothing reads the mode: spare every writepages pass the hook.
        self.pass_mode = Some(match &self.writes {
            Some(Ok(())) => layout::pass_mode(kernel, &mut format),
            Some(Err(why)) => Err(why.clone()),
            None => Err(LayoutError::Unhandled("layout not resolved".into())),
        });
        self.format = format;
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        match probe.program {
            "nfs_initiate_write" | "nfs_writeback_done" => gap_of(&self.writes),
            "nfs_initiate_commit" | "nfs_commit_done" => gap_of(&self.commits),
            _ => gap_of(&self.pass_mode),
        }
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader.override_global(NFS_FMT, &self.format, true);
    }

    fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(why) = &self.module_missing {
            lines.push(format!("nfs: {why}"));
        }
        if let Some(Ok(())) = &self.writes
            && let Some(Err(why)) = &self.pass_mode
        {
            lines.push(format!(
                "nfs: WRITEs are counted with sync_mode=\"unknown\" ({why})"
            ));
        }
        lines
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        let writes = ebpf
            .take_map(NFS_WRITES)
            .and_then(|m| PerCpuHashMap::try_from(m).ok());
        let commits = ebpf
            .take_map(NFS_COMMITS)
            .and_then(|m| PerCpuHashMap::try_from(m).ok());
        vec![Box::new(collect::NfsCollector::new(
            writes,
            commits,
            &ctx.map_errors,
        ))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a kernel without the nfs module (this development host) every NFS probe is skipped
    /// with the reason; with it, every part resolves.
    #[test]
    fn resolves_or_says_the_module_is_missing() {
        let Ok(kernel) = KernelInfo::discover() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        let mut family = Nfs::default();
        family.resolve(&kernel);
        let loaded = kernel
            .tracefs
            .event_exists(layout::CATEGORY, "nfs_initiate_write");
        for probe in PROBES {
            let gap = family.gap(probe);
            if loaded {
                if probe.program != "nfs_wbc_writepage" || kernel.btf.is_ok() {
                    assert_eq!(gap, None, "{}", probe.program);
                }
            } else {
                let why = gap.unwrap_or_default();
                assert!(why.contains("nfs module is not loaded"), "{why}");
            }
        }
    }
}
