//! What the stall context is computed from: periodic samples of the per-source device-write
//! counters and of the bdis' dirty state, and the flusher's executed work items, kept for
//! [`HISTORY_NS`].

use std::{
    collections::{BTreeMap, VecDeque},
    path::PathBuf,
    sync::{Arc, Mutex},
};

use aya::maps::{HashMap, MapData, RingBuf};
use probe_common::flusher_work::WorkRecord;

use super::{SourceShare, StallContext, WorkItem};
use crate::{
    families::{
        device_writes::{DeviceWriteReader, SourceLabels},
        dirty_memory::parse::byte_values,
        writeback::{bdi_name, sync_mode_label},
    },
    kernel::{debugfs, devices},
    stalls::event::{monotonic_now_ns, monotonic_to_unix},
};

/// How far back samples and work items are kept: a stall longer than this gets a window that
/// starts at the oldest sample.
pub const HISTORY_NS: u64 = 120_000_000_000;

/// Work items kept at most (sync over many filesystems queues one per superblock and bdi).
const MAX_WORKS: usize = 4096;

/// One bdi's state in a sample (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct BdiState {
    dirty: u64,
    writeback: u64,
    limit: u64,
}

struct Sample {
    mono_ns: u64,
    /// Bytes since load by (device, source, sync mode, reason).
    writes: BTreeMap<SourceLabels, u64>,
    /// By device label.
    bdis: BTreeMap<String, BdiState>,
}

#[derive(Default)]
struct Inner {
    samples: VecDeque<Sample>,
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

    /// Reads the counters and the active devices' bdi stats once and keeps the sample.
    pub fn sample(&self) {
        let Some(sample) = self.read() else {
            return;
        };
        if let Ok(mut inner) = self.inner.lock() {
            let oldest = sample.mono_ns.saturating_sub(HISTORY_NS);
            while inner.samples.front().is_some_and(|s| s.mono_ns < oldest) {
                inner.samples.pop_front();
            }
            inner.samples.push_back(sample);
        }
    }

    fn read(&self) -> Option<Sample> {
        let series = self.reader.as_ref()?.read()?;
        let mono_ns = monotonic_now_ns();
        let writes: BTreeMap<SourceLabels, u64> =
            series.into_iter().map(|(k, v)| (k, v.bytes)).collect();
        let active: std::collections::BTreeSet<&str> =
            writes.keys().map(|k| k.0.as_str()).collect();
        let mut bdis = BTreeMap::new();
        // Only the bdis of devices that wrote since load: a host with hundreds of bdis (one per
        // FUSE or NFS mount) must not cost a file read each, ten times a second.
        if let Ok(dir) = std::fs::read_dir(&self.bdi_dir) {
            for entry in dir.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let label = devices::label_for_bdi(&name);
                if !active.contains(label.as_str()) {
                    continue;
                }
                if let Ok(text) = std::fs::read_to_string(entry.path().join("stats")) {
                    let v = byte_values(&text);
                    let get = |k: &str| v.get(k).copied().unwrap_or(0);
                    bdis.insert(
                        label,
                        BdiState {
                            dirty: get("BdiReclaimable"),
                            writeback: get("BdiWriteback"),
                            limit: get("BdiDirtyThresh"),
                        },
                    );
                }
            }
        }
        Some(Sample {
            mono_ns,
            writes,
            bdis,
        })
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
        let last = inner.samples.back()?;
        let b = last.bdis.get(device)?;
        Some(StallContext {
            window_start_unix_ns: monotonic_to_unix(last.mono_ns),
            window_end_unix_ns: monotonic_to_unix(last.mono_ns),
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
        let fresh = if fresh { self.read() } else { None };
        let running = self.running_items();
        let inner = self.inner.lock().ok()?;
        let start = inner
            .samples
            .iter()
            .rev()
            .find(|s| s.mono_ns <= start_mono)
            .or_else(|| inner.samples.front())?;
        let end = fresh.as_ref().or_else(|| inner.samples.back())?;
        if end.mono_ns < start.mono_ns {
            return None;
        }
        let matches = |d: &str| device == "all" || d == device;
        let mut by_source: BTreeMap<(&'static str, &str, &str), u64> = BTreeMap::new();
        for (labels, after) in &end.writes {
            if !matches(&labels.0) {
                continue;
            }
            let before = start.writes.get(labels).copied().unwrap_or(0);
            let delta = after.saturating_sub(before);
            if delta > 0 {
                *by_source
                    .entry((labels.1, labels.2.as_str(), labels.3.as_str()))
                    .or_default() += delta;
            }
        }
        let total: u64 = by_source.values().sum();
        let mut sources: Vec<SourceShare> = by_source
            .into_iter()
            .map(|((source, sync_mode, reason), bytes)| SourceShare {
                source: source.to_owned(),
                sync_mode: sync_mode.to_owned(),
                reason: reason.to_owned(),
                bytes,
                share: bytes as f64 / total.max(1) as f64,
            })
            .collect();
        sources.sort_by_key(|s| std::cmp::Reverse(s.bytes));
        let bdi_start = start.bdis.get(device);
        let bdi_end = end.bdis.get(device);
        let window_end = end.mono_ns.max(end_mono);
        let flusher_work = inner
            .works
            .iter()
            .chain(running.iter())
            .filter(|(bdi, _, s, e)| matches(bdi) && *s <= window_end && *e >= start.mono_ns)
            .map(|(_, w, _, _)| w.clone())
            .collect();
        Some(StallContext {
            window_start_unix_ns: monotonic_to_unix(start.mono_ns),
            window_end_unix_ns: monotonic_to_unix(end.mono_ns),
            device_written_bytes: total,
            sources,
            bdi_dirty_start_bytes: bdi_start.map(|b| b.dirty),
            bdi_dirty_end_bytes: bdi_end.map(|b| b.dirty),
            bdi_writeback_start_bytes: bdi_start.map(|b| b.writeback),
            bdi_writeback_end_bytes: bdi_end.map(|b| b.writeback),
            bdi_dirty_limit_bytes: bdi_end.map(|b| b.limit),
            flusher_work,
        })
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
