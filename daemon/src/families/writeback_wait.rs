//! Waits on pages under writeback: `tp_btf/folio_wait_writeback` paired with `tp_btf/sched_switch`,
//! and `wbscope_writeback_wait_duration_seconds{device}`.

use aya::{Ebpf, EbpfLoader};
use probe_common::dirty::{FolioWaitLayout, globals};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, gap_of};
use crate::{
    kernel::{btf::Btf, constants::task_uninterruptible, devices, layout::member_offset},
    metrics::hist_collector::{KeyLabels, Log2HistCollector},
    probes::ProbeSpec,
};

const PROBES: &[ProbeSpec] = &[
    ProbeSpec::btf_tracepoint("folio_wait_writeback", "folio_wait_writeback"),
    ProbeSpec::btf_tracepoint("folio_wait_sched_switch", "sched_switch"),
];

/// Map name in the eBPF object.
const WRITEBACK_WAIT: &str = "WRITEBACK_WAIT";

const FAMILIES: &[(&str, &str)] = &[(
    "wbscope_writeback_wait_duration_seconds",
    "Time tasks slept waiting on pages under writeback (folio_wait_writeback to the task's next \
     switch-in), by the device of the file's filesystem.",
)];

/// The writeback-wait family.
#[derive(Default)]
pub struct WritebackWait {
    layout: Option<Result<FolioWaitLayout, String>>,
}

/// Offsets from BTF plus TASK_UNINTERRUPTIBLE from the sched_switch format.
fn folio_wait_layout(kernel: &KernelInfo) -> Result<FolioWaitLayout, String> {
    let btf: &Btf = kernel
        .btf
        .as_ref()
        .map_err(|why| format!("no kernel BTF: {why}"))?;
    Ok(FolioWaitLayout {
        mapping_host: member_offset(btf, "address_space", "host", 8)?,
        inode_i_mode: member_offset(btf, "inode", "i_mode", 2)?,
        inode_i_rdev: member_offset(btf, "inode", "i_rdev", 4)?,
        inode_i_sb: member_offset(btf, "inode", "i_sb", 8)?,
        sb_s_dev: member_offset(btf, "super_block", "s_dev", 4)?,
        task_pid: member_offset(btf, "task_struct", "pid", 4)?,
        task_uninterruptible: task_uninterruptible(kernel)?,
        resolved: 1,
    })
}

impl Family for WritebackWait {
    fn name(&self) -> &'static str {
        "writeback waits"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.layout = Some(folio_wait_layout(kernel));
    }

    fn gap(&self, _probe: &ProbeSpec) -> Option<String> {
        gap_of(&self.layout)
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(layout)) = &self.layout {
            loader.override_global(globals::FOLIO_WAIT_LAYOUT, layout, true);
        }
    }

    fn describe(&self) -> Vec<String> {
        match &self.layout {
            Some(Ok(l)) => vec![format!(
                "TASK_UNINTERRUPTIBLE (from the sched_switch format): {:#x}",
                l.task_uninterruptible
            )],
            _ => Vec::new(),
        }
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        let labels: KeyLabels<u32> =
            Box::new(|dev: &u32| Some(vec![("device", devices::label_for_kernel_dev(*dev))]));
        vec![Box::new(Log2HistCollector::take(
            ebpf,
            WRITEBACK_WAIT,
            FAMILIES,
            &ctx.map_errors,
            labels,
        ))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine with tracefs and BTF, the layout resolves and TASK_UNINTERRUPTIBLE is one bit.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(kernel) = KernelInfo::discover() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        let mut family = WritebackWait::default();
        family.resolve(&kernel);
        let Some(Ok(layout)) = family.layout else {
            panic!("unresolved: {:?}", family.layout);
        };
        assert!(layout.task_uninterruptible.is_power_of_two());
        // `address_space.host` is the first member, so its offset may well be 0.
        assert!(layout.task_pid > 0 && layout.inode_i_sb > 0);
    }
}
