//! Writeback submissions: writepages passes by device, sync mode and caller, from
//! `tp_btf/ext4_writepages_result` (ext4) and `tp_btf/wbc_writepage` (filesystems that iterate
//! with `writeback_iter()`: xfs and other iomap filesystems, block devices), with the flusher
//! recognised through `writeback_single_inode_start` / `writeback_single_inode`. Exports
//! `wbscope_writeback_submissions_total` and `wbscope_writeback_submitted_bytes_total`.

use crate::{families::Part, kernel::LayoutError};
use std::collections::BTreeMap;

use aya::{Ebpf, EbpfLoader};
use probe_common::submissions::{
    Ext4WritepagesResultFormat, SubmitKey, SubmitStats, WbCaller, WbcLayout, globals,
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{CollectorContext, Family, KernelInfo, gap_of, writeback::sync_mode_label};
use crate::{
    kernel::{devices, layout::member_offset},
    metrics::{MapErrors, Slotted, describe, proto::MetricBuilder},
    probes::ProbeSpec,
};

// BTF tracepoints: no trace record is built for these per-inode / per-pass events.
const PROBES: &[ProbeSpec] = &[
    ProbeSpec::btf_tracepoint(
        "writeback_single_inode_start",
        "writeback_single_inode_start",
    ),
    ProbeSpec::btf_tracepoint("writeback_single_inode", "writeback_single_inode"),
    ProbeSpec::btf_tracepoint("ext4_writepages_result", "ext4_writepages_result"),
    ProbeSpec::btf_tracepoint("wbc_writepage", "wbc_writepage"),
];

// The object names its maps after these (checked by `probes::object_names`).
use probe_common::submissions::maps::{WB_SUBMISSION_SLOTS, WB_SUBMISSIONS};

/// The writeback-submissions family.
#[derive(Default)]
pub struct Submissions {
    ext4: Part<Ext4WritepagesResultFormat>,
    wbc: Part<WbcLayout>,
    /// Only `task_mm`, for the flusher-inode probes on kernels where `wbc_layout` fails (before
    /// 6.10 the folio batch is on write_cache_pages' stack, not in `writeback_control`).
    flusher: Part<WbcLayout>,
}

/// `tp_btf/ext4_writepages_result(struct inode *, struct writeback_control *, int ret,
/// int pages_written)`: the probe reads arguments 0, 1 and 3 by position, so the prototype must
/// be exactly that (checked in BTF), and the member behind the classic record's `sync_mode`
/// (`wbc->sync_mode`); its `dev` (`inode->i_sb->s_dev`) is the shared inode → device layout's.
fn ext4_format(kernel: &KernelInfo) -> Result<Ext4WritepagesResultFormat, LayoutError> {
    const EVENT: &str = "ext4_writepages_result";
    let btf = kernel.btf()?;
    let arg = |s: &str| btf.tp_btf_arg_index(EVENT, s);
    let count = btf.tp_btf_arg_count(EVENT)?;
    let (inode, wbc) = (arg("inode")?, arg("writeback_control")?);
    if (inode, wbc, count) != (0, 1, 4) {
        return Err(LayoutError::prototype(
            EVENT,
            format!(": unexpected prototype (inode at {inode}, wbc at {wbc}, {count} arguments)"),
        ));
    }
    // The inode's device comes from the shared inode → device layout, which must have resolved.
    kernel.inode_dev()?;
    Ok(Ext4WritepagesResultFormat {
        wbc_sync_mode: member_offset(btf, "writeback_control", "sync_mode", 4)?,
        resolved: 1,
    })
}

fn wbc_layout(kernel: &KernelInfo) -> Result<WbcLayout, LayoutError> {
    let btf = kernel.btf()?;
    // `folios` is an array of pointers: its size is the whole array.
    let folios_size = btf.member_size("folio_batch", "folios")?;
    if folios_size == 0 || folios_size % 8 != 0 {
        return Err(LayoutError::Unhandled(format!(
            "folio_batch.folios has size {folios_size}"
        )));
    }
    Ok(WbcLayout {
        nr_to_write: member_offset(btf, "writeback_control", "nr_to_write", 8)?,
        sync_mode: member_offset(btf, "writeback_control", "sync_mode", 4)?,
        // Since 6.10 (writeback_iter); older kernels keep the batch on write_cache_pages' stack.
        fbatch: btf.member_offset("writeback_control", "fbatch")?,
        fbatch_i: member_offset(btf, "folio_batch", "i", 1)?,
        fbatch_folios: btf.member_offset("folio_batch", "folios")?,
        fbatch_len: folios_size / 8,
        folio_mapping: member_offset(btf, "folio", "mapping", 8)?,
        mapping_host: member_offset(btf, "address_space", "host", 8)?,
        task_mm: kernel.task_mm()?,
        folio_flags: btf.member_offset("folio", "flags")?,
        // Optional: without it, sizes come from nr_to_write deltas (see the probe). Older
        // kernels (6.12 among them) name the same count `_folio_nr_pages`.
        folio_nr_pages: member_offset(btf, "folio", "_nr_pages", 4)
            .or_else(|_| member_offset(btf, "folio", "_folio_nr_pages", 4))
            .unwrap_or(0),
        pg_head: btf
            .enum_value("pageflags", "PG_head")
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .filter(|bit| *bit < 64)
            .unwrap_or(0),
        resolved: 1,
    })
    .map(|mut l| {
        if l.pg_head == 0 {
            l.folio_nr_pages = 0;
        }
        l
    })
}

/// The layout with only `task_mm` set: `fbatch_len` 0 makes `wbc_writepage` find no folio, and
/// that probe is skipped anyway when the full layout is not resolved.
fn flusher_layout(kernel: &KernelInfo) -> Result<WbcLayout, LayoutError> {
    Ok(WbcLayout {
        nr_to_write: 0,
        sync_mode: 0,
        fbatch: 0,
        fbatch_i: 0,
        fbatch_folios: 0,
        fbatch_len: 0,
        folio_mapping: 0,
        mapping_host: 0,
        task_mm: kernel.task_mm()?,
        folio_flags: 0,
        folio_nr_pages: 0,
        pg_head: 0,
        resolved: 1,
    })
}

impl Family for Submissions {
    fn name(&self) -> &'static str {
        "writeback submissions"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.ext4 = Some(ext4_format(kernel));
        self.wbc = Some(wbc_layout(kernel));
        self.flusher = Some(flusher_layout(kernel));
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        match probe.program {
            "ext4_writepages_result" => gap_of(&self.ext4),
            "wbc_writepage" => gap_of(&self.wbc),
            // The flusher-inode probes need only task_struct.mm.
            _ => gap_of(&self.flusher),
        }
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(f)) = &self.ext4 {
            loader.override_global(globals::EXT4_WP_RESULT_FMT, f, true);
        }
        let layout = match (&self.wbc, &self.flusher) {
            (Some(Ok(full)), _) => Some(full),
            (_, Some(Ok(flusher))) => Some(flusher),
            _ => None,
        };
        if let Some(l) = layout {
            loader.override_global(globals::WBC_LAYOUT, l, true);
        }
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        ctx.map_errors.register(WB_SUBMISSIONS);
        vec![Box::new(SubmissionCollector {
            maps: Slotted::take(ebpf, WB_SUBMISSION_SLOTS, WB_SUBMISSIONS),
            page_size: ctx.page_size,
            errors: ctx.map_errors.clone(),
            descs: describe(FAMILIES),
        })]
    }
}

const FAMILIES: &[(&str, &str); 2] = &[
    (
        "wbscope_writeback_submissions_total",
        "Writepages passes over an inode that submitted at least one folio, by sync mode and by \
         caller: the task's sync call, the flusher, an io_uring worker, or other. On ext4 a pass is \
         one ext4_writepages call; on filesystems using writeback_iter (xfs, block devices) it is a \
         run of wbc_writepage events of one task with the same writeback_control and inode. \
         sync(2) and syncfs(2) hand most of their writeback to the flusher, so it counts as flusher.",
    ),
    (
        "wbscope_writeback_submitted_bytes_total",
        "Bytes those passes submitted: ext4's pages_written, or the sizes of the folios handed to \
         writepages on writeback_iter filesystems, times the page size.",
    ),
];

struct SubmissionCollector {
    maps: Slotted<SubmitKey, SubmitStats>,
    page_size: u64,
    errors: MapErrors,
    descs: Vec<Desc>,
}

impl Collector for SubmissionCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(entries) = self.maps.read(
            &self.errors,
            |acc: &mut SubmitStats, v| acc.merge(v),
            SubmitStats::ZERO,
        ) else {
            return Vec::new();
        };
        // Distinct raw keys can share labels (two devs without a name, unknown callers): merge.
        let mut series: BTreeMap<(String, String, &'static str), SubmitStats> = BTreeMap::new();
        for (key, stats) in entries {
            let caller = WbCaller::from_raw(key.caller.into()).unwrap_or(WbCaller::Other);
            let labels = (
                devices::label_for_kernel_dev(key.dev),
                sync_mode_label(key.sync_mode.into()),
                caller.label(),
            );
            series
                .entry(labels)
                .or_insert(SubmitStats::ZERO)
                .merge(&stats);
        }
        let [passes, bytes] = FAMILIES.map(|(name, _)| name);
        let mut passes = MetricBuilder::counter(passes, FAMILIES);
        let mut bytes = MetricBuilder::counter(bytes, FAMILIES);
        for ((device, sync_mode, caller), stats) in &series {
            let labels = [
                ("device", device.as_str()),
                ("sync_mode", sync_mode.as_str()),
                ("caller", *caller),
            ];
            passes.add_counter(&labels, stats.passes as f64);
            bytes.add_counter(&labels, (stats.pages * self.page_size) as f64);
        }
        [passes, bytes]
            .into_iter()
            .filter_map(MetricBuilder::finish)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine with tracefs and BTF, every probe's layout resolves.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(kernel) = KernelInfo::discover() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        let mut family = Submissions::default();
        family.resolve(&kernel);
        assert_eq!(family.gap(&PROBES[2]), None);
        if kernel.btf.is_ok() {
            let Some(Ok(l)) = &family.wbc else {
                panic!("{:?}", family.wbc)
            };
            assert_eq!(l.fbatch_len, 31, "PAGEVEC_SIZE on 6.x");
            assert!(l.folio_nr_pages > 0 && l.pg_head > 0, "{l:?}");
            for probe in PROBES {
                assert_eq!(family.gap(probe), None, "{}", probe.program);
            }
        }
    }
}
