//! The one-line verdict of a stall: where the caller waited, and behind whose writes.

use super::{SourceShare, StallContext};
use crate::families::stall_events::event::Stall;

/// Where the time went, by the largest part of the breakdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    WritebackWait,
    Throttling,
    Journal,
    DeviceFlush,
    /// No part covers a tenth of the call: its own writeback and the rest.
    Own,
    /// A block request's time from issue to completion: the device itself.
    Device,
    /// An io_uring request with no breakdown: it ran in an io-wq worker, whose waits are not
    /// tied to the request.
    Unattributed,
}

impl Cause {
    /// The `cause` value in JSON, log records and `trace --summary`.
    pub fn label(self) -> &'static str {
        match self {
            Cause::WritebackWait => "writeback_wait",
            Cause::Throttling => "throttling",
            Cause::Journal => "journal_commit",
            Cause::DeviceFlush => "device_flush",
            Cause::Own => "own_work",
            Cause::Device => "device",
            Cause::Unattributed => "unattributed",
        }
    }

    fn phrase(self) -> &'static str {
        match self {
            Cause::WritebackWait => "waiting on writeback",
            Cause::Throttling => "throttled in balance_dirty_pages",
            Cause::Journal => "waiting on the journal commit",
            Cause::DeviceFlush => "waiting on device cache flushes",
            Cause::Own => "in its own work",
            Cause::Device => "in the device, from issue to completion",
            Cause::Unattributed => "in an io-wq worker (no breakdown)",
        }
    }
}

/// The dominant part of `s`'s breakdown and its nanoseconds: the thread's own writeback wait or
/// throttling if either covers half the call, else the largest part. Stall kinds that are themselves
/// one part (a throttling pause, a journal commit, a writeback wait) are that part.
pub fn cause(s: &Stall) -> (Cause, u64) {
    match s.kind.as_str() {
        "dirty_throttle" => return (Cause::Throttling, s.duration_ns),
        "journal_commit" => return (Cause::Journal, s.duration_ns),
        "writeback_wait" => return (Cause::WritebackWait, s.duration_ns),
        "block_request" => return (Cause::Device, s.duration_ns),
        _ => {}
    }
    let parts = [
        (Cause::WritebackWait, s.writeback_wait_ns),
        (Cause::Throttling, s.throttle_ns),
        (Cause::Journal, s.journal_ns),
        (Cause::DeviceFlush, s.flush_ns),
    ];
    if s.kind.starts_with("io_uring") && parts.iter().all(|(_, ns)| *ns == 0) {
        return (Cause::Unattributed, s.duration_ns);
    }
    // The thread's own sleeps (on pages under writeback, in balance_dirty_pages) are where it
    // certainly waited; the journal and flush clocks say a commit or flush of the device ran
    // meanwhile, which may overlap them. So an own sleep covering half the call wins.
    let own = [parts[0], parts[1]]
        .into_iter()
        .max_by_key(|(_, ns)| *ns)
        .filter(|(_, ns)| ns.saturating_mul(2) >= s.duration_ns);
    let (cause, ns) = own
        .or_else(|| parts.into_iter().max_by_key(|(_, ns)| *ns))
        .unwrap_or((Cause::Own, 0));
    let ns = ns.min(s.duration_ns);
    if ns * 10 < s.duration_ns {
        (Cause::Own, s.duration_ns - ns)
    } else {
        (cause, ns)
    }
}

fn secs(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.1}s", ns as f64 / 1e9)
    } else {
        format!("{:.0}ms", ns as f64 / 1e6)
    }
}

/// Bytes as `1.2 GiB`, `340.0 MiB`, `12 KiB`.
pub fn bytes(b: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = b as f64;
    if f >= KIB * KIB * KIB {
        format!("{:.1} GiB", f / (KIB * KIB * KIB))
    } else if f >= KIB * KIB {
        format!("{:.1} MiB", f / (KIB * KIB))
    } else {
        format!("{:.0} KiB", f / KIB)
    }
}

/// The source that wrote most, described with who queued its flusher work if known:
/// `flusher work none:sync queued by sync[4243]`.
pub fn dominant(ctx: &StallContext) -> Option<(String, &SourceShare)> {
    described(ctx.sources.first()?, ctx)
}

/// The largest source of the writes under way when the stall began (`backlog`), described as
/// [`dominant`] describes the window's.
pub fn dominant_backlog(ctx: &StallContext) -> Option<(String, &SourceShare)> {
    described(ctx.backlog.first()?, ctx)
}

fn described<'a>(top: &'a SourceShare, ctx: &StallContext) -> Option<(String, &'a SourceShare)> {
    let mut text = top.describe();
    if top.source == "flusher"
        && let Some(w) = ctx
            .flusher_work
            .iter()
            .filter(|w| {
                w.sync_mode == top.sync_mode && w.reason == top.reason && w.queued_by_pid != 0
            })
            .max_by_key(|w| w.bytes)
    {
        text.push_str(&format!(
            " queued by {}[{}]",
            w.queued_by_comm, w.queued_by_pid
        ));
    }
    Some((text, top))
}

/// `fsync 6.2s loop5 dd[4242]: 5.9s waiting on writeback; device wrote 1.2 GiB meanwhile, 97%
/// for flusher work none:sync queued by sync[4243]`.
pub fn verdict(s: &Stall, ctx: Option<&StallContext>) -> String {
    let (cause, ns) = cause(s);
    let who = if s.tgid == 0 {
        String::new()
    } else {
        format!(" {}[{}]", s.comm, s.tgid)
    };
    let mut line = format!(
        "{} {} {}{who}: {} {}",
        s.kind,
        secs(s.duration_ns),
        s.device,
        secs(ns),
        cause.phrase()
    );
    let Some(ctx) = ctx else {
        return line;
    };
    if cause == Cause::Throttling
        && let (Some(dirty), Some(limit)) = (ctx.bdi_dirty_end_bytes, ctx.bdi_dirty_limit_bytes)
    {
        line.push_str(&format!(
            " (bdi dirty {}, limit {})",
            bytes(dirty.max(ctx.bdi_dirty_start_bytes.unwrap_or(0))),
            bytes(limit)
        ));
    }
    // Sleeping on pages under writeback is waiting behind whoever queued them, often before
    // the call began (a checkpoint's sync_file_range, sync's flusher pass).
    if cause == Cause::WritebackWait
        && let (Some(under_writeback), Some((text, top))) =
            (ctx.bdi_writeback_start_bytes, dominant_backlog(ctx))
    {
        line.push_str(&format!(
            "; {} under writeback when it began, {:.0}% queued for {text}",
            bytes(under_writeback),
            100.0 * top.share
        ));
    }
    match dominant(ctx) {
        Some((text, top)) => line.push_str(&format!(
            "; device wrote {} meanwhile, {:.0}% for {text}",
            bytes(ctx.device_written_bytes),
            100.0 * top.share
        )),
        None => line.push_str("; device wrote nothing meanwhile"),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::stall_events::context::WorkItem;

    fn stall() -> Stall {
        Stall {
            kind: "fsync".into(),
            device: "loop5".into(),
            pid: 4242,
            tgid: 4242,
            comm: "dd".into(),
            inode: 12,
            duration_ns: 6_200_000_000,
            writeback_wait_ns: 5_900_000_000,
            journal_ns: 1_000_000_000,
            flush_ns: 10_000_000,
            ..Stall::default()
        }
    }

    #[test]
    fn names_the_largest_part_and_the_dominant_source_with_its_queuer() {
        let ctx = StallContext {
            device_written_bytes: 1288 << 20,
            sources: vec![
                SourceShare {
                    source: "flusher".into(),
                    sync_mode: "none".into(),
                    reason: "sync".into(),
                    bytes: 1250 << 20,
                    share: 0.97,
                },
                SourceShare {
                    source: "fsync".into(),
                    bytes: 38 << 20,
                    share: 0.03,
                    ..SourceShare::default()
                },
            ],
            flusher_work: vec![
                WorkItem {
                    sync_mode: "none".into(),
                    reason: "sync".into(),
                    queued_by_pid: 4243,
                    queued_by_comm: "sync".into(),
                    bytes: 1 << 30,
                    ..WorkItem::default()
                },
                WorkItem {
                    sync_mode: "all".into(),
                    reason: "sync".into(),
                    queued_by_pid: 4243,
                    queued_by_comm: "sync".into(),
                    bytes: 1 << 20,
                    ..WorkItem::default()
                },
            ],
            ..StallContext::default()
        };
        assert_eq!(
            verdict(&stall(), Some(&ctx)),
            "fsync 6.2s loop5 dd[4242]: 5.9s waiting on writeback; device wrote 1.3 GiB \
             meanwhile, 97% for flusher work none:sync queued by sync[4243]"
        );
    }

    #[test]
    fn a_writeback_wait_names_who_queued_the_writes_under_way_when_it_began() {
        let ctx = StallContext {
            device_written_bytes: 2 << 20,
            sources: vec![SourceShare {
                source: "journal".into(),
                bytes: 2 << 20,
                share: 1.0,
                ..SourceShare::default()
            }],
            bdi_writeback_start_bytes: Some(96 << 20),
            backlog: vec![
                SourceShare {
                    source: "sync_file_range".into(),
                    bytes: 90 << 20,
                    share: 0.9,
                    ..SourceShare::default()
                },
                SourceShare {
                    source: "flusher".into(),
                    sync_mode: "none".into(),
                    reason: "background".into(),
                    bytes: 10 << 20,
                    share: 0.1,
                },
            ],
            ..StallContext::default()
        };
        assert_eq!(
            verdict(&stall(), Some(&ctx)),
            "fsync 6.2s loop5 dd[4242]: 5.9s waiting on writeback; 96.0 MiB under writeback \
             when it began, 90% queued for sync_file_range; device wrote 2.0 MiB meanwhile, \
             100% for journal"
        );
        // Other causes do not wait behind pages under writeback: no backlog clause.
        let mut journal = stall();
        journal.writeback_wait_ns = 0;
        assert!(!verdict(&journal, Some(&ctx)).contains("under writeback"));
    }

    #[test]
    fn own_sleeps_over_half_the_call_win_over_overlapping_device_clocks() {
        let mut s = stall();
        (s.writeback_wait_ns, s.journal_ns) = (3_200_000_000, 6_000_000_000);
        assert_eq!(cause(&s).0, Cause::WritebackWait);
        s.writeback_wait_ns = 3_000_000_000;
        assert_eq!(cause(&s).0, Cause::Journal);
    }

    #[test]
    fn small_parts_mean_own_work_and_throttling_shows_the_limit() {
        let mut s = stall();
        s.writeback_wait_ns = 100_000_000;
        s.journal_ns = 0;
        assert_eq!(cause(&s), (Cause::Own, 6_100_000_000));
        assert!(verdict(&s, None).ends_with("6.1s in its own work"));
        let mut u = stall();
        u.kind = "io_uring_fsync".into();
        (u.writeback_wait_ns, u.journal_ns, u.flush_ns) = (0, 0, 0);
        assert_eq!(cause(&u).0, Cause::Unattributed);
        u.kind = "block_request".into();
        assert_eq!(cause(&u), (Cause::Device, u.duration_ns));
        s.kind = "dirty_throttle".into();
        s.duration_ns = 200_000_000;
        let ctx = StallContext {
            bdi_dirty_start_bytes: Some(9 << 20),
            bdi_dirty_end_bytes: Some(7 << 20),
            bdi_dirty_limit_bytes: Some(8 << 20),
            ..StallContext::default()
        };
        assert_eq!(
            verdict(&s, Some(&ctx)),
            "dirty_throttle 200ms loop5 dd[4242]: 200ms throttled in balance_dirty_pages (bdi \
             dirty 9.0 MiB, limit 8.0 MiB); device wrote nothing meanwhile"
        );
    }
}
