//! Waits on pages under writeback: `tp_btf/folio_wait_writeback` (`wait_on_page_writeback`
//! before 5.16) paired, where tracing programs have task storage, with the return of the
//! `folio_wait_bit()` it calls (fexit) where the kernel accepts fexit, else with the waiter's
//! wake-up (`tp_btf/sched_wakeup`); on older kernels with `tp_btf/sched_switch`. And
//! `wbscope_writeback_wait_duration_seconds{device}`.

use crate::{families::Part, kernel::LayoutError};
use aya::{Ebpf, EbpfLoader};
use probe_common::writeback_wait::{FolioWaitLayout, PrevStateSource, globals};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, gap_of};
use crate::{
    kernel::{
        btf::Btf,
        constants::{TaskState, task_uninterruptible},
        devices,
        layout::member_offset,
        task_access,
    },
    metrics::hist_collector::{KeyLabels, Log2HistCollector},
    probes::{FentryCompanion, ProbeSpec},
};

const PROBES: &[ProbeSpec] = &[
    // Called wait_on_page_writeback(page, mapping) before 5.16 (mm/page-writeback.c, at the
    // same place), with the mapping at the same position.
    ProbeSpec::btf_tracepoint_or(
        "folio_wait_writeback",
        "folio_wait_writeback",
        "wait_on_page_writeback",
    ),
    // The wait's end where tracing programs have task storage: fexit on the function the wait
    // sleeps in where the kernel allows it, else the waiter's wake-up (sched_wakeup runs about
    // 12 times per fio write+fsync, and only its I/O-sleep wake-ups do more than one load);
    // `probes.sync_call_hook` chooses between them as for the sync calls.
    ProbeSpec::btf_tracepoint("folio_wait_end", "sched_wakeup").with_fentry_pair(
        "folio_wait_bit_exit",
        true,
        &["folio_wait_bit", "wait_on_page_bit"],
        FentryCompanion {
            program: "folio_wait_bit_killable_exit",
            functions: &["folio_wait_bit_killable", "wait_on_page_bit_killable"],
        },
    ),
    // The wait's end where they have not (5.10): the waiter's next switch-in, with the pending
    // waits in a hash by thread id.
    ProbeSpec::btf_tracepoint("folio_wait_sched_switch", "sched_switch"),
];

// The object names its maps after these (checked by `probes::object_names`).
use probe_common::writeback_wait::maps::WRITEBACK_WAIT;

const FAMILIES: &[(&str, &str)] = &[(
    "wbscope_writeback_wait_duration_seconds",
    "Time tasks slept waiting on pages under writeback (folio_wait_writeback until the wait \
     returns, or where fexit is unavailable until the task's wake-up, or its next switch-in \
     before 5.13), by the device of the file's filesystem.",
)];

/// The writeback-wait family.
#[derive(Default)]
pub struct WritebackWait {
    layout: Part<FolioWaitLayout>,
    /// Where TASK_UNINTERRUPTIBLE's value came from (set with the layout).
    task_state_source: &'static str,
    prev_state: Part<PrevStateSource>,
    /// Why the fexit end cannot be used on this kernel, if it cannot.
    fexit_gap: Option<String>,
    /// Whether tracing programs have task storage here: it decides which of the two ends is
    /// attached (see [`PROBES`]).
    task_storage: bool,
}

/// The wait tracepoints by name, newest first; the mapping is argument #1 of each.
const WAIT_EVENTS: [&str; 2] = ["folio_wait_writeback", "wait_on_page_writeback"];

/// The mapping must be where the probe reads it, on whichever wait event this kernel has.
fn check_wait_prototype(btf: &Btf) -> Result<(), LayoutError> {
    let Some(event) = WAIT_EVENTS
        .into_iter()
        .find(|e| btf.has_type(&format!("btf_trace_{e}")))
    else {
        // The loader reports the missing hook.
        return Ok(());
    };
    match btf.tp_btf_arg_index(event, "address_space") {
        Ok(1) => Ok(()),
        Ok(n) => Err(LayoutError::prototype(
            event,
            format!(" has the mapping at argument #{n}, not #1"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Offsets from BTF plus TASK_UNINTERRUPTIBLE (see [`task_uninterruptible`]).
fn folio_wait_layout(kernel: &KernelInfo) -> Result<(FolioWaitLayout, TaskState), LayoutError> {
    let btf: &Btf = kernel.btf()?;
    check_wait_prototype(btf)?;
    let task_state = task_uninterruptible(kernel)?;
    // The waits are by device: the probe takes the mapping's inode to it with the shared inode
    // → device layout, which must have resolved.
    kernel.inode_dev()?;
    let (iowait_bit, _) = btf.bitfield("task_struct", "in_iowait")?;
    let layout = FolioWaitLayout {
        mapping_host: member_offset(btf, "address_space", "host", 8)?,
        task_pid: member_offset(btf, "task_struct", "pid", 4)?,
        task_uninterruptible: task_state.uninterruptible,
        resolved: 1,
        task_bpf_storage: member_offset(btf, "task_struct", "bpf_storage", 8).unwrap_or(0),
        task_nvcsw: member_offset(btf, "task_struct", "nvcsw", 8)?,
        task_in_iowait: iowait_bit / 8,
        in_iowait_mask: 1 << (iowait_bit % 8),
        // Only the fexit end needs it (`fexit_gap` says so when it is missing).
        pg_writeback: btf
            .enum_value("pageflags", "PG_writeback")
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        _reserved: 0,
    };
    Ok((layout, task_state))
}

/// Why the fexit end is unusable here: it keeps the wait in task storage (tracing programs have
/// it since 5.13) and matches the `PG_writeback` bit.
fn fexit_gap(
    kernel: &KernelInfo,
    layout: &Result<(FolioWaitLayout, TaskState), LayoutError>,
) -> Option<String> {
    if let Err(e) = kernel.btf() {
        return Some(e.to_string());
    }
    if !has_task_storage(kernel) {
        return Some(
            "the fexit end keeps the wait in task storage, which tracing programs lack on this \
             kernel (5.13+)"
                .to_owned(),
        );
    }
    match layout {
        Ok((l, _)) if l.pg_writeback == 0 => {
            Some("no PG_writeback in kernel BTF (enum pageflags)".to_owned())
        }
        _ => None,
    }
}

/// Whether tracing programs have task storage on this kernel (5.13+).
fn has_task_storage(kernel: &KernelInfo) -> bool {
    kernel
        .btf()
        .is_ok_and(|btf| task_access::current_task(btf).task_storage != 0)
}

impl Family for WritebackWait {
    fn name(&self) -> &'static str {
        "writeback waits"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        let resolved = folio_wait_layout(kernel);
        if let Ok((_, task_state)) = &resolved {
            self.task_state_source = task_state.source;
        }
        self.fexit_gap = fexit_gap(kernel, &resolved);
        self.task_storage = has_task_storage(kernel);
        self.layout = Some(resolved.map(|(layout, _)| layout));
        self.prev_state = Some(kernel.btf().and_then(task_access::prev_state_source));
    }

    fn replaced(&self, probe: &ProbeSpec) -> Option<String> {
        match (probe.program, self.task_storage) {
            ("folio_wait_end", false) => Some(
                "folio_wait_sched_switch ends the waits on this kernel (folio_wait_end keeps \
                 them in task storage, which tracing programs lack before 5.13)"
                    .to_owned(),
            ),
            ("folio_wait_sched_switch", true) => Some(
                "folio_wait_end ends the waits on this kernel (tracing programs have task \
                 storage)"
                    .to_owned(),
            ),
            _ => None,
        }
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        // Neither end measures anything without the tracepoint's layout; only the sched_switch
        // end reads the previous task's state.
        gap_of(&self.layout).or_else(|| {
            (probe.program == "folio_wait_sched_switch")
                .then(|| gap_of(&self.prev_state))
                .flatten()
        })
    }

    fn fentry_gap(&self, _probe: &ProbeSpec) -> Option<String> {
        self.fexit_gap.clone()
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        // The sched_switch end needs both; the other ends only the layout.
        if let Some(Ok(layout)) = &self.layout {
            loader.override_global(globals::FOLIO_WAIT_LAYOUT, layout, true);
        }
        if let Some(Ok(prev_state)) = &self.prev_state {
            loader.override_global(globals::PREV_STATE_SOURCE, prev_state, true);
        }
    }

    fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(Ok(l)) = &self.layout {
            lines.push(format!(
                "TASK_UNINTERRUPTIBLE ({}): {:#x}",
                self.task_state_source, l.task_uninterruptible
            ));
        }
        if let Some(Ok(source)) = &self.prev_state {
            lines.push(task_access::describe_prev_state(source));
        }
        lines
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

    /// Exactly one of the two ends applies on any kernel: the wake-up/fexit end where tracing
    /// programs have task storage, the sched_switch end where they have not; the other is
    /// reported as not needed, naming the one that does the work.
    #[test]
    fn one_wait_end_per_kind_of_kernel() {
        let [_, end, switch] = PROBES else {
            panic!("the family's probes changed: {PROBES:?}");
        };
        for task_storage in [true, false] {
            let family = WritebackWait {
                task_storage,
                ..WritebackWait::default()
            };
            let (needed, other, doer) = if task_storage {
                (end, switch, end.program)
            } else {
                (switch, end, switch.program)
            };
            assert_eq!(family.replaced(needed), None, "task storage {task_storage}");
            let why = family.replaced(other).expect("the other end is not needed");
            assert!(why.starts_with(doer), "task storage {task_storage}: {why}");
        }
    }

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
        assert_eq!(family.task_state_source, "from the sched_switch format");
        // `address_space.host` is the first member, so its offset may well be 0.
        assert!(layout.task_pid > 0);
    }
}
