//! Journal commits: ext4's jbd2 commits and XFS log writes, as
//! `wbscope_journal_commit_duration_seconds{device,fs}`.

use aya::{Ebpf, EbpfLoader};
use probe_common::journal::{JOURNAL_FMT, JournalFormat, JournalKey, JournalKind};
use prometheus::core::Collector;

use super::{CollectorContext, Family, KernelInfo, gap_of};
use crate::{
    kernel::{devices, layout::field_offset, mounts},
    metrics::hist_collector::Log2HistCollector,
    probes::ProbeSpec,
};

const PROBES: &[ProbeSpec] = &[
    ProbeSpec::tracepoint("jbd2_start_commit", "jbd2", "jbd2_start_commit"),
    ProbeSpec::tracepoint("jbd2_end_commit", "jbd2", "jbd2_end_commit"),
    ProbeSpec::tracepoint("xlog_iclog_sync", "xfs", "xlog_iclog_sync"),
    ProbeSpec::tracepoint("xlog_iclog_sync_done", "xfs", "xlog_iclog_sync_done"),
];

const JOURNAL_COMMIT_LATENCY: &str = "JOURNAL_COMMIT_LATENCY";

/// The journal family.
#[derive(Default)]
pub struct Journal {
    /// (dev, tid) offsets of the jbd2 commit events, or why unavailable.
    jbd2: Option<Result<(u32, u32), String>>,
    /// (dev, lsn) offsets of the XFS iclog events, or why unavailable.
    xlog: Option<Result<(u32, u32), String>>,
    /// The resolved parts as the probes' global (zero where unresolved).
    format: JournalFormat,
}

/// Offsets of (`dev`, `id_field`) in `category/events`, which must agree across the pair.
fn pair_offsets(
    kernel: &KernelInfo,
    category: &str,
    events: [&str; 2],
    id_field: &str,
    id_size: u32,
) -> Result<(u32, u32), String> {
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
                return Err(format!(
                    "{category}/{event} layout differs from {category}/{}",
                    events[0]
                ));
            }
            Some(_) => {}
        }
    }
    first.ok_or_else(|| "no events".into())
}

impl Family for Journal {
    fn name(&self) -> &'static str {
        "journal"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.jbd2 = Some(pair_offsets(
            kernel,
            "jbd2",
            ["jbd2_start_commit", "jbd2_end_commit"],
            "transaction",
            4,
        ));
        self.xlog = Some(pair_offsets(
            kernel,
            "xfs",
            ["xlog_iclog_sync", "xlog_iclog_sync_done"],
            "lsn",
            8,
        ));
        let (jbd2_dev, jbd2_tid) = match &self.jbd2 {
            Some(Ok(pair)) => *pair,
            _ => (0, 0),
        };
        let (xlog_dev, xlog_lsn) = match &self.xlog {
            Some(Ok(pair)) => *pair,
            _ => (0, 0),
        };
        self.format = JournalFormat {
            jbd2_dev,
            jbd2_tid,
            xlog_dev,
            xlog_lsn,
        };
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
        if let Some(Err(why)) = &self.xlog {
            lines.push(format!(
                "xfs log probes unavailable ({why}); the xfs module registers its tracepoints when it loads, so start wbscope after it (or `modprobe xfs` first)"
            ));
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
