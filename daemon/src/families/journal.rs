//! Journal commits: ext4's jbd2 commits and XFS log writes, as
//! `wbscope_journal_commit_duration_seconds{device,fs}`.

use crate::{families::Part, kernel::LayoutError};
use aya::{Ebpf, EbpfLoader};
use probe_common::journal::{JournalFormat, JournalKey, JournalKind, globals::JOURNAL_FMT};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, gap_of};
use crate::{
    kernel::{
        devices,
        layout::{field_offset, member_offset},
        mounts,
    },
    metrics::hist_collector::Log2HistCollector,
    probes::ProbeSpec,
};

const PROBES: &[ProbeSpec] = &[
    // BTF tracepoints: no trace record is built. Same prototype `(journal_t *, transaction_t *)`
    // on every kernel with BTF (checked in `jbd2_layout`).
    ProbeSpec::btf_tracepoint("jbd2_start_commit", "jbd2_start_commit"),
    ProbeSpec::btf_tracepoint("jbd2_end_commit", "jbd2_end_commit"),
    ProbeSpec::tracepoint("xlog_iclog_sync", "xfs", "xlog_iclog_sync"),
    ProbeSpec::tracepoint("xlog_iclog_sync_done", "xfs", "xlog_iclog_sync_done"),
];

use probe_common::journal::maps::JOURNAL_COMMIT_LATENCY;

/// The journal family.
#[derive(Default)]
pub struct Journal {
    /// Where the jbd2 commit probes find (dev, tid), or why unavailable.
    jbd2: Part<Jbd2Layout>,
    /// (dev, lsn) offsets of the XFS iclog events, or why unavailable.
    xlog: Part<(u32, u32)>,
    /// The resolved parts as the probes' global (zero where unresolved).
    format: JournalFormat,
    /// Whether the xfs module's tracepoints are registered at all (it is loaded).
    xfs_loaded: bool,
}

/// The jbd2 part of [`JournalFormat`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Jbd2Layout {
    j_fs_dev: u32,
    bd_dev: u32,
    t_tid: u32,
}

/// The members behind `journal->j_fs_dev->bd_dev` and `transaction->t_tid`, from BTF, once the
/// `btf_trace_jbd2_{start,end}_commit` prototypes are `(journal_t *, transaction_t *)`: the
/// probes read arguments 0 and 1 (the verifier accepts only constant context offsets).
fn jbd2_layout(kernel: &KernelInfo) -> Result<Jbd2Layout, LayoutError> {
    let btf = kernel.btf()?;
    for event in ["jbd2_start_commit", "jbd2_end_commit"] {
        let arg = |s: &str| btf.tp_btf_arg_index(event, s);
        let (journal, transaction) = (arg("journal_s")?, arg("transaction_s")?);
        if (journal, transaction) != (0, 1) {
            return Err(LayoutError::prototype(
                event,
                format!(
                    ": journal_t * is argument {journal} and transaction_t * {transaction}, \
                     expected 0 and 1"
                ),
            ));
        }
    }
    Ok(Jbd2Layout {
        j_fs_dev: member_offset(btf, "journal_s", "j_fs_dev", 8)?,
        bd_dev: member_offset(btf, "block_device", "bd_dev", 4)?,
        t_tid: member_offset(btf, "transaction_s", "t_tid", 4)?,
    })
}

/// Offsets of (`dev`, `id_field`) in `category/events`, which must agree across the pair.
fn pair_offsets(
    kernel: &KernelInfo,
    category: &str,
    events: [&str; 2],
    id_field: &str,
    id_size: u32,
) -> Result<(u32, u32), LayoutError> {
    let mut first = None;
    for event in events {
        let format = kernel.event_format(category, event)?;
        let this = (
            field_offset(&format, "dev", |n| n == 4)?,
            field_offset(&format, id_field, |n| n == id_size)?,
        );
        match first {
            None => first = Some(this),
            Some(f) if f != this => {
                return Err(LayoutError::LayoutsDiffer {
                    event: format!("{category}/{event}"),
                    reference: format!("{category}/{}", events[0]),
                });
            }
            Some(_) => {}
        }
    }
    first.ok_or_else(|| LayoutError::Unhandled("no events".into()))
}

impl Family for Journal {
    fn name(&self) -> &'static str {
        "journal"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.jbd2 = Some(jbd2_layout(kernel));
        self.xfs_loaded = kernel.tracefs.event_exists("xfs", "xfs_file_fsync");
        self.xlog = Some(pair_offsets(
            kernel,
            "xfs",
            ["xlog_iclog_sync", "xlog_iclog_sync_done"],
            "lsn",
            8,
        ));
        let mut format = JournalFormat::default();
        if let Some(Ok(j)) = &self.jbd2 {
            format.journal_j_fs_dev = j.j_fs_dev;
            format.bdev_bd_dev = j.bd_dev;
            format.transaction_t_tid = j.t_tid;
            format.jbd2_resolved = 1;
        }
        if let Some(Ok((dev, lsn))) = &self.xlog {
            format.xlog_dev = *dev;
            format.xlog_lsn = *lsn;
        }
        self.format = format;
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        if probe.program.starts_with("jbd2") {
            gap_of(&self.jbd2)
        } else {
            gap_of(&self.xlog)
        }
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader.override_global(JOURNAL_FMT, &self.format, true);
    }

    fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.xlog {
            Some(Err(_)) if self.xfs_loaded => lines.push(
                "xfs log probes unavailable: this kernel's xfs has no xlog_iclog_sync \
                 tracepoints"
                    .to_owned(),
            ),
            Some(Err(why)) => lines.push(format!(
                "xfs log probes unavailable ({why}); the xfs module registers its tracepoints \
                 when it loads, so start wbscope after it (or `modprobe xfs` first)"
            )),
            _ => {}
        }
        lines
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        vec![Box::new(Log2HistCollector::take(
            ebpf,
            JOURNAL_COMMIT_LATENCY,
            FAMILIES,
            &ctx.map_errors,
            Box::new(commit_labels),
        ))]
    }
}

const FAMILIES: &[(&str, &str)] = &[(
    "wbscope_journal_commit_duration_seconds",
    "Journal commit time: jbd2 start_commit to end_commit (ext4), and for xfs the log write (xlog_iclog_sync to xlog_iclog_sync_done) that log forces wait for.",
)];

/// `device` and `fs` for a commit key: the filesystem type mounted from the device, or the
/// journal's own name when it is not mounted any more.
fn commit_labels(key: &JournalKey) -> Option<Vec<(&'static str, String)>> {
    let (major, minor) = devices::split_kernel_dev(key.dev);
    let table = mounts::current();
    let fs = match (
        mounts::fstype_of(&table, major, minor),
        JournalKind::from_raw(key.kind)?,
    ) {
        (Some(fs), _) => fs.to_owned(),
        (None, JournalKind::Jbd2) => "jbd2".to_owned(),
        (None, JournalKind::XfsLog) => "xfs".to_owned(),
    };
    Some(vec![
        ("device", devices::label_for_kernel_dev(key.dev)),
        ("fs", fs),
    ])
}
