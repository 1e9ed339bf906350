//! What the stall context is computed from: periodic samples of the per-source device-write
//! counters and of the bdis' dirty state, and the flusher's executed work items, kept for
//! [`HISTORY_NS`].

use std::{
    collections::{BTreeMap, VecDeque},
    path::PathBuf,
    sync::{Arc, Mutex},
};

use aya::maps::{HashMap, MapData, RingBuf};
use probe_common::{device_writes::DevWriteKey, flusher_work::WorkRecord};

use super::{SourceShare, StallContext, WorkItem};
use crate::{
    families::stall_events::event::{monotonic_now_ns, monotonic_to_unix},
    families::{
        device_writes::{DeviceWriteReader, raw_order},
        dirty_memory::parse::byte_values,
        writeback::{bdi_name, sync_mode_label},
    },
    kernel::{debugfs, devices, text_file},
};

/// How far back samples and work items are kept: a stall longer than this gets a window that
/// starts at the oldest sample.
pub const HISTORY_NS: u64 = 120_000_000_000;

/// Samples of the last this many ns keep the sampler's full resolution; older ones are kept
/// [`COARSE_NS`] apart. A stall is placed in the samples when its event arrives, so only the
/// window start of a stall longer than this is affected (it may start up to `COARSE_NS` early).
pub const FINE_NS: u64 = 10_000_000_000;

/// The spacing of samples older than [`FINE_NS`].
pub const COARSE_NS: u64 = 1_000_000_000;

/// Work items kept at most (sync over many filesystems queues one per superblock and bdi).
const MAX_WORKS: usize = 4096;

/// One bdi's state in a sample (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct BdiState {
    dirty: u64,
    writeback: u64,
    limit: u64,
}

/// Bytes since load by raw device-write key, sorted by key. Labels are made only for the keys a
/// context reports: labelling reads sysfs, and the sampler runs ten times a second.
type Writes = Vec<(DevWriteKey, u64)>;

/// By kernel `dev_t` of the device (its bdi is `bdi/MAJ:MIN` in debugfs).
type Bdis = BTreeMap<u32, BdiState>;

/// Values the sampler saw unchanged from `first_ns` to `last_ns` (CLOCK_MONOTONIC): an idle
/// host adds no sample, it only moves `last_ns`, so the history costs memory only while the
/// devices write.
struct Sample<T> {
    first_ns: u64,
    last_ns: u64,
    values: T,
}

/// Consecutive distinct samples of one kind, oldest first, kept for [`HISTORY_NS`].
struct Series<T>(VecDeque<Sample<T>>);

impl<T: PartialEq> Series<T> {
    fn push(&mut self, mono_ns: u64, values: T) {
        match self.0.back_mut() {
            Some(last) if last.values == values => last.last_ns = mono_ns,
            _ => self.0.push_back(Sample {
                first_ns: mono_ns,
                last_ns: mono_ns,
                values,
            }),
        }
        let oldest = mono_ns.saturating_sub(HISTORY_NS);
        while self.0.len() > 1 && self.0.front().is_some_and(|s| s.last_ns < oldest) {
            self.0.pop_front();
        }
        self.thin(mono_ns.saturating_sub(FINE_NS));
    }

    /// Keeps samples last seen before `horizon` at least [`COARSE_NS`] apart, dropping the later
    /// of two closer ones: a value asked for at a time whose sample went is the one before it,
    /// as of that one's time. While the devices write every sample differs, and ten a second
    /// for [`HISTORY_NS`] were the daemon's memory growth under load.
    fn thin(&mut self, horizon: u64) {
        let mut i = 1;
        while i < self.0.len() && self.0[i].last_ns < horizon {
            if self.0[i].first_ns.saturating_sub(self.0[i - 1].first_ns) < COARSE_NS {
                self.0.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// The values at `mono_ns` and the latest time at or before it they were seen; the oldest
    /// sample when none is that old.
    fn at(&self, mono_ns: u64) -> Option<(u64, &T)> {
        let s = &self.0[self.index_at(mono_ns)?];
        Some((s.last_ns.min(mono_ns).max(s.first_ns), &s.values))
    }

    /// The index of the sample [`Series::at`] chooses.
    fn index_at(&self, mono_ns: u64) -> Option<usize> {
        if self.0.is_empty() {
            return None;
        }
        Some(
            self.0
                .iter()
                .rposition(|s| s.first_ns <= mono_ns)
                .unwrap_or(0),
        )
    }

    fn latest(&self) -> Option<(u64, &T)> {
        self.0.back().map(|s| (s.last_ns, &s.values))
    }
}

impl<T> Default for Series<T> {
    fn default() -> Self {
        Series(VecDeque::new())
    }
}

/// How often the bdis are read while the devices write nothing (their dirty bytes can still
/// change: pages are dirtied without I/O).
const IDLE_BDI_INTERVAL_NS: u64 = 1_000_000_000;

#[derive(Default)]
struct Inner {
    writes: Series<Writes>,
    bdis: Series<Bdis>,
    /// When the bdis were last read.
    bdis_read_ns: u64,
    works: VecDeque<(String, WorkItem, u64, u64)>,
}

/// Samples and work items, shared by the sampler, the work drain and the stall pipeline.
pub struct History {
    reader: Option<Arc<DeviceWriteReader>>,
    bdi_dir: PathBuf,
    reasons: BTreeMap<u32, String>,
    page_size: u64,
    inner: Mutex<Inner>,
    /// The kernel's `RUNNING_WORK` (flusher tid → item so far): items still running when a
    /// stall ends have no record yet.
    running: Mutex<Option<HashMap<MapData, u32, WorkRecord>>>,
}

impl History {
    pub fn new(
        reader: Option<Arc<DeviceWriteReader>>,
        reasons: BTreeMap<u32, String>,
        page_size: u64,
    ) -> History {
        History {
            reader,
            bdi_dir: PathBuf::from(debugfs::DEFAULT_ROOT).join("bdi"),
            reasons,
            page_size,
            inner: Mutex::new(Inner::default()),
            running: Mutex::new(None),
        }
    }

    /// Takes the running-items map out of the object (the stall service does, at start).
    pub fn take_running(&self, ebpf: &mut aya::Ebpf) {
        let map = ebpf
            .take_map(probe_common::flusher_work::maps::RUNNING_WORK)
            .and_then(|m| HashMap::try_from(m).ok());
        if let Ok(mut running) = self.running.lock() {
            *running = map;
        }
    }

    /// Items the flusher is executing now, as (bdi, item, start, end = now).
    fn running_items(&self) -> Vec<(String, WorkItem, u64, u64)> {
        let Ok(running) = self.running.lock() else {
            return Vec::new();
        };
        let Some(map) = running.as_ref() else {
            return Vec::new();
        };
        let now = monotonic_now_ns();
        map.iter()
            .flatten()
            .map(|(_, mut r)| {
                r.end_ns = now;
                self.item(&r, true)
            })
            .collect()
    }

    fn item(&self, r: &WorkRecord, running: bool) -> (String, WorkItem, u64, u64) {
        let bdi = devices::label_for_bdi(&bdi_name(&r.id.key));
        let item = WorkItem {
            sync_mode: sync_mode_label(r.id.key.sync_mode),
            reason: self
                .reasons
                .get(&r.id.key.reason)
                .cloned()
                .unwrap_or_else(|| r.id.key.reason.to_string()),
            queued_by_pid: r.queuer.tgid,
            queued_by_comm: comm(&r.queuer.comm),
            start_unix_ns: monotonic_to_unix(r.start_ns),
            end_unix_ns: if running {
                0
            } else {
                monotonic_to_unix(r.end_ns)
            },
            bytes: r.pages * self.page_size,
        };
        (bdi, item, r.start_ns, r.end_ns)
    }

    /// Reads the counters, and the writing devices' bdi stats when the counters moved (or once
    /// a second when they did not), and keeps what changed. True when the counters moved.
    pub fn sample(&self) -> bool {
        let Some(writes) = self.read_writes() else {
            return false;
        };
        let mono_ns = monotonic_now_ns();
        let (moved, bdis_due) = match self.inner.lock() {
            Ok(inner) => (
                inner
                    .writes
                    .latest()
                    .is_none_or(|(_, last)| *last != writes),
                mono_ns.saturating_sub(inner.bdis_read_ns) >= IDLE_BDI_INTERVAL_NS,
            ),
            Err(_) => return false,
        };
        // Read outside the lock: debugfs reads take tens of microseconds each.
        let bdis = (moved || bdis_due).then(|| self.read_bdis(&writes));
        if let Ok(mut inner) = self.inner.lock() {
            inner.writes.push(mono_ns, writes);
            if let Some(bdis) = bdis {
                inner.bdis.push(mono_ns, bdis);
                inner.bdis_read_ns = mono_ns;
            }
        }
        moved
    }

    fn read_writes(&self) -> Option<Writes> {
        self.reader.as_ref()?.read_bytes()
    }

    /// The bdi stats of the devices that wrote since load: a host with hundreds of bdis (one
    /// per FUSE or NFS mount) must not cost a file read each, ten times a second. A partition
    /// has no bdi of its own and is skipped.
    fn read_bdis(&self, writes: &Writes) -> Bdis {
        let devs: std::collections::BTreeSet<u32> = writes.iter().map(|(k, _)| k.dev).collect();
        devs.into_iter()
            .filter(|dev| *dev != 0)
            .filter_map(|dev| {
                let (major, minor) = devices::split_kernel_dev(dev);
                let path = self.bdi_dir.join(format!("{major}:{minor}")).join("stats");
                let [dirty, writeback, limit] = text_file::with_text(&path, |t| {
                    byte_values(t, ["BdiReclaimable", "BdiWriteback", "BdiDirtyThresh"])
                })
                .ok()?;
                let state = BdiState {
                    dirty: dirty.unwrap_or(0),
                    writeback: writeback.unwrap_or(0),
                    limit: limit.unwrap_or(0),
                };
                Some((dev, state))
            })
            .collect()
    }

    /// Keeps one executed work item from the ring buffer.
    pub fn push_work(&self, r: &WorkRecord) {
        let entry = self.item(r, false);
        if let Ok(mut inner) = self.inner.lock() {
            if inner.works.len() >= MAX_WORKS {
                inner.works.pop_front();
            }
            inner.works.push_back(entry);
        }
    }

    /// The bdi part of a context only, from the latest sample (start and end alike).
    pub fn bdi_context(&self, device: &str) -> Option<StallContext> {
        let inner = self.inner.lock().ok()?;
        let (seen_ns, bdis) = inner.bdis.latest()?;
        let b = bdi_of(bdis, device)?;
        Some(StallContext {
            window_start_unix_ns: monotonic_to_unix(seen_ns),
            window_end_unix_ns: monotonic_to_unix(seen_ns),
            bdi_dirty_start_bytes: Some(b.dirty),
            bdi_dirty_end_bytes: Some(b.dirty),
            bdi_writeback_start_bytes: Some(b.writeback),
            bdi_writeback_end_bytes: Some(b.writeback),
            bdi_dirty_limit_bytes: Some(b.limit),
            ..StallContext::default()
        })
    }

    /// The context of a stall on `device` (a device label, or `all`) that ran from `start_mono`
    /// to `end_mono` (CLOCK_MONOTONIC ns). With `fresh`, the window ends at a sample taken now.
    pub fn context(
        &self,
        device: &str,
        start_mono: u64,
        end_mono: u64,
        fresh: bool,
    ) -> Option<StallContext> {
        let reader = self.reader.as_ref()?;
        let fresh = if fresh {
            self.read_writes().map(|w| {
                let bdis = self.read_bdis(&w);
                (monotonic_now_ns(), w, bdis)
            })
        } else {
            None
        };
        let running = self.running_items();
        let inner = self.inner.lock().ok()?;
        let (start_ns, start_writes) = inner.writes.at(start_mono)?;
        let (end_ns, end_writes, end_bdis) = match &fresh {
            Some((ns, w, b)) => (*ns, w, Some(b)),
            None => {
                let (ns, w) = inner.writes.latest()?;
                (ns, w, inner.bdis.latest().map(|(_, b)| b))
            }
        };
        if end_ns < start_ns {
            return None;
        }
        let mut labeller = Labeller::new(reader, device);
        let by_source = labeller.queued(start_writes, end_writes);
        let total: u64 = by_source.values().sum();
        let sources = shares(by_source);
        let bdi_start = inner
            .bdis
            .at(start_mono)
            .and_then(|(_, b)| bdi_of(b, device));
        let bdi_end = end_bdis.and_then(|b| bdi_of(b, device));
        let backlog = match bdi_start.map(|b| b.writeback) {
            Some(under_writeback) if under_writeback > 0 => {
                backlog(&inner.writes, start_mono, under_writeback, &mut labeller)
            }
            _ => Vec::new(),
        };
        let window_end = end_ns.max(end_mono);
        let matches = |d: &str| device == "all" || d == device;
        let flusher_work = inner
            .works
            .iter()
            .chain(running.iter())
            .filter(|(bdi, _, s, e)| matches(bdi) && *s <= window_end && *e >= start_ns)
            .map(|(_, w, _, _)| w.clone())
            .collect();
        Some(StallContext {
            window_start_unix_ns: monotonic_to_unix(start_ns),
            window_end_unix_ns: monotonic_to_unix(end_ns),
            device_written_bytes: total,
            sources,
            bdi_dirty_start_bytes: bdi_start.map(|b| b.dirty),
            bdi_dirty_end_bytes: bdi_end.map(|b| b.dirty),
            bdi_writeback_start_bytes: bdi_start.map(|b| b.writeback),
            bdi_writeback_end_bytes: bdi_end.map(|b| b.writeback),
            bdi_dirty_limit_bytes: bdi_end.map(|b| b.limit),
            flusher_work,
            backlog,
        })
    }
}

/// How far before a stall the writes under way at its start are looked for.
const BACKLOG_LOOKBACK_NS: u64 = 30_000_000_000;

/// Who queued the `under_writeback` bytes the device's bdi had under writeback when a stall
/// began at `start_mono`: the most recent writes before it, interval by interval backwards,
/// until they add up to that much (or [`BACKLOG_LOOKBACK_NS`] is reached). A caller that sleeps
/// on pages under writeback waits behind these, though they were queued before its window.
fn backlog(
    writes: &Series<Writes>,
    start_mono: u64,
    under_writeback: u64,
    labeller: &mut Labeller<'_>,
) -> Vec<SourceShare> {
    let Some(mut i) = writes.index_at(start_mono) else {
        return Vec::new();
    };
    let mut by_source: BTreeMap<(&'static str, String, String), u64> = BTreeMap::new();
    let mut found = 0;
    while i > 0 && found < under_writeback {
        let (earlier, later) = (&writes.0[i - 1], &writes.0[i]);
        if start_mono.saturating_sub(later.first_ns) > BACKLOG_LOOKBACK_NS {
            break;
        }
        for (source, bytes) in labeller.queued(&earlier.values, &later.values) {
            found += bytes;
            *by_source.entry(source).or_default() += bytes;
        }
        i -= 1;
    }
    shares(by_source)
}

type SourceKey = (&'static str, String, String);

/// Labels the keys of one stall's device, reading each device's name from sysfs once.
struct Labeller<'a> {
    reader: &'a DeviceWriteReader,
    device: &'a str,
    matches: BTreeMap<u32, bool>,
}

impl<'a> Labeller<'a> {
    fn new(reader: &'a DeviceWriteReader, device: &'a str) -> Self {
        Labeller {
            reader,
            device,
            matches: BTreeMap::new(),
        }
    }

    /// Bytes queued on the device between two samples, by (source, sync mode, reason).
    fn queued(&mut self, before: &Writes, after: &Writes) -> BTreeMap<SourceKey, u64> {
        let mut by_source = BTreeMap::new();
        for (key, total) in after {
            // Samples are sorted by key (`DeviceWriteReader::read_bytes`).
            let earlier = before
                .binary_search_by_key(&raw_order(key), |(k, _)| raw_order(k))
                .map_or(0, |i| before[i].1);
            let delta = total.saturating_sub(earlier);
            if delta == 0 || !self.on_device(key.dev) {
                continue;
            }
            let (_, source, sync_mode, reason) = self.reader.labels(key);
            *by_source.entry((source, sync_mode, reason)).or_default() += delta;
        }
        by_source
    }

    fn on_device(&mut self, dev: u32) -> bool {
        let device = self.device;
        *self
            .matches
            .entry(dev)
            .or_insert_with(|| device == "all" || devices::label_for_kernel_dev(dev) == device)
    }
}

/// Each source's bytes and share, largest first.
fn shares(by_source: BTreeMap<SourceKey, u64>) -> Vec<SourceShare> {
    let total: u64 = by_source.values().sum();
    let mut sources: Vec<SourceShare> = by_source
        .into_iter()
        .map(|((source, sync_mode, reason), bytes)| SourceShare {
            source: source.to_owned(),
            sync_mode,
            reason,
            bytes,
            share: bytes as f64 / total.max(1) as f64,
        })
        .collect();
    sources.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    sources
}

/// The state of the bdi of the device labelled `device` (a whole disk: partitions have none).
fn bdi_of(bdis: &Bdis, device: &str) -> Option<BdiState> {
    bdis.iter()
        .find(|(dev, _)| devices::label_for_kernel_dev(**dev) == device)
        .map(|(_, b)| *b)
}

/// Samples `history` every [`super::SAMPLE_INTERVAL`] while the devices write, every
/// [`super::IDLE_SAMPLE_INTERVAL`] once they have written nothing for [`IDLE_AFTER`] samples and
/// every [`super::LONG_IDLE_SAMPLE_INTERVAL`] after [`LONG_IDLE_AFTER`], on a
/// thread of its own until the history is dropped. A plain thread, not a runtime task: the map
/// and debugfs reads are blocking system calls that must never hold up the two runtime threads
/// serving /metrics, and a sleeping thread costs one wake-up per sample where a task handed to
/// the blocking pool costs a timer, an epoll wake-up and two thread hand-offs.
pub fn spawn_sampler(history: &Arc<History>) {
    let history = Arc::downgrade(history);
    let spawned = std::thread::Builder::new()
        .name("wbscope-sampler".into())
        .spawn(move || {
            let mut unchanged = 0u32;
            while let Some(history) = history.upgrade() {
                unchanged = if history.sample() {
                    0
                } else {
                    unchanged.saturating_add(1)
                };
                drop(history);
                std::thread::sleep(next_interval(unchanged));
            }
        });
    if let Err(err) = spawned {
        tracing::warn!(
            "stall context sampler not started (no device writes in stall context): {err}"
        );
    }
}

/// Samples in a row with unchanged counters after which the sampler slows down: a second.
const IDLE_AFTER: u32 = 10;

/// Samples in a row with unchanged counters after which it slows down again: half a minute (a
/// second at the fast pace, then 58 at the idle one).
const LONG_IDLE_AFTER: u32 = IDLE_AFTER + 58;

/// The pause before the next sample after `unchanged` samples in a row saw no new writes.
fn next_interval(unchanged: u32) -> std::time::Duration {
    if unchanged >= LONG_IDLE_AFTER {
        super::LONG_IDLE_SAMPLE_INTERVAL
    } else if unchanged >= IDLE_AFTER {
        super::IDLE_SAMPLE_INTERVAL
    } else {
        super::SAMPLE_INTERVAL
    }
}

fn comm(raw: &[u8; 16]) -> String {
    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// Takes the work-record ring out of the object.
pub fn take_work_ring(ebpf: &mut aya::Ebpf) -> Option<RingBuf<MapData>> {
    ebpf.take_map(probe_common::flusher_work::maps::WORK_RECORDS)
        .and_then(|m| RingBuf::try_from(m).ok())
}

/// Moves every work record into `history` as it arrives; returns on a polling error.
pub async fn drain_works(ring: RingBuf<MapData>, history: Arc<History>) -> std::io::Error {
    use tokio::io::unix::AsyncFd;
    // SAFETY: as in `source::drain`: the ring buffer owns its map fd for its whole life; the
    // AsyncFd owns the ring buffer, so the fd outlives the registration.
    let registered =
        unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) };
    let mut ring = match registered {
        Ok(r) => r,
        Err(err) => return err.into(),
    };
    loop {
        let mut guard = match ring.readable_mut().await {
            Ok(g) => g,
            Err(err) => return err,
        };
        let ring = guard.get_inner_mut();
        while let Some(item) = ring.next() {
            if item.len() >= std::mem::size_of::<WorkRecord>() {
                // SAFETY: the length is checked; WorkRecord is plain integers (any bit pattern
                // is valid) and read_unaligned has no alignment requirement.
                let r: WorkRecord = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                history.push_work(&r);
            }
        }
        guard.clear_ready();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_slows_down_only_after_a_second_without_writes() {
        assert_eq!(next_interval(0), super::super::SAMPLE_INTERVAL);
        assert_eq!(next_interval(IDLE_AFTER - 1), super::super::SAMPLE_INTERVAL);
        assert_eq!(
            next_interval(IDLE_AFTER),
            super::super::IDLE_SAMPLE_INTERVAL
        );
        assert!(super::super::IDLE_SAMPLE_INTERVAL > super::super::SAMPLE_INTERVAL);
        assert_eq!(
            next_interval(LONG_IDLE_AFTER - 1),
            super::super::IDLE_SAMPLE_INTERVAL
        );
        assert_eq!(
            next_interval(LONG_IDLE_AFTER),
            super::super::LONG_IDLE_SAMPLE_INTERVAL
        );
        // Half a minute of unchanged samples before the slowest pace.
        let spell = super::super::SAMPLE_INTERVAL * IDLE_AFTER
            + super::super::IDLE_SAMPLE_INTERVAL * (LONG_IDLE_AFTER - IDLE_AFTER);
        assert_eq!(spell, std::time::Duration::from_secs(30));
    }

    #[test]
    fn unchanged_values_extend_the_last_sample_instead_of_adding_one() {
        let mut s: Series<u32> = Series::default();
        for t in [100, 200, 300] {
            s.push(t, 7);
        }
        s.push(400, 8);
        assert_eq!(s.0.len(), 2);
        assert_eq!((s.0[0].first_ns, s.0[0].last_ns), (100, 300));
        assert_eq!(s.latest(), Some((400, &8)));
    }

    #[test]
    fn the_value_at_a_time_is_the_latest_seen_at_or_before_it() {
        let mut s: Series<u32> = Series::default();
        for (t, v) in [(100, 1), (200, 1), (300, 2), (400, 3)] {
            s.push(t, v);
        }
        // Seen unchanged across 150: exact at 150.
        assert_eq!(s.at(150), Some((150, &1)));
        // Between the last sight of 1 (200) and the first of 2 (300): 1, as of 200.
        assert_eq!(s.at(250), Some((200, &1)));
        assert_eq!(s.at(300), Some((300, &2)));
        // Older than every sample: the oldest, as of its first sight.
        assert_eq!(s.at(50), Some((100, &1)));
    }

    #[test]
    fn old_samples_are_thinned_to_a_second_apart_and_recent_ones_kept() {
        let mut s: Series<u64> = Series::default();
        let step = 100_000_000;
        let end = 60_000_000_000;
        // A value that changes at every sample, ten times a second for a minute.
        for t in (step..=end).step_by(step as usize) {
            s.push(t, t);
        }
        let recent = s.0.iter().filter(|x| x.first_ns >= end - FINE_NS).count();
        assert!(recent >= 100, "{recent} recent samples");
        assert!(s.0.len() <= 100 + 55, "{} samples kept", s.0.len());
        for pair in s.0.iter().collect::<Vec<_>>().windows(2) {
            if pair[1].last_ns < end - FINE_NS {
                assert!(pair[1].first_ns - pair[0].first_ns >= COARSE_NS);
            }
        }
        // An old time gets a value seen at or before it, at most a second (plus one step) early.
        let t = 20_050_000_000;
        let (seen, v) = s.at(t).expect("a sample");
        assert!(seen <= t && t - seen <= COARSE_NS + step, "seen {seen}");
        assert_eq!(*v, seen);
        // A recent time is exact to the step.
        let t = end - 2_050_000_000;
        let (seen, _) = s.at(t).expect("a sample");
        assert!(t - seen < step, "seen {seen}");
    }

    #[test]
    fn samples_older_than_the_history_go_but_the_last_stays() {
        let mut s: Series<u32> = Series::default();
        s.push(1, 1);
        s.push(2, 2);
        s.push(HISTORY_NS + 10, 3);
        assert_eq!(s.0.len(), 1);
        // An idle host keeps its one sample however old it is.
        s.push(3 * HISTORY_NS, 3);
        assert_eq!(s.0.len(), 1);
        assert_eq!(s.at(0), Some((HISTORY_NS + 10, &3)));
    }
}
