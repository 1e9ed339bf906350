//! From two snapshots to what `wbscope top` shows: counter deltas as rates, histogram deltas as
//! quantiles of the last interval, gauges as they are, processes sorted.

use std::collections::{BTreeMap, HashMap};

pub use super::ranking::{ProcessRow, SortKey};
use super::{expo::Sample, hist::Buckets, ranking, source::Snapshot};
use crate::families::stall_events::event::Stall;

/// One device's line. Rates and quantiles are `None` before a second snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceRow {
    pub device: String,
    pub dirty_bytes: Option<f64>,
    pub writeback_bytes: Option<f64>,
    /// Bytes of write requests issued to the device per second.
    pub write_bps: Option<f64>,
    /// The kernel's write bandwidth estimate for the bdi.
    pub bdi_bps: Option<f64>,
    pub sync_calls_per_s: Option<f64>,
    /// Sync-call latency quantiles over the interval, all calls on the device, seconds.
    pub sync_p50: Option<f64>,
    pub sync_p99: Option<f64>,
}

/// Flusher work of one (device, sync mode, reason) over the interval.
#[derive(Clone, Debug, PartialEq)]
pub struct FlusherRow {
    pub device: String,
    pub sync_mode: String,
    pub reason: String,
    pub works_per_s: f64,
    pub bytes_per_s: f64,
}

/// Block requests of one (device, op, sync) over the interval. With the default
/// `[metrics] detail = basic` the latency histogram is per device: its row has an empty `op`
/// and `sync` and the percentiles, and the (device, op, sync) rows have the mean latency from
/// the summed request time; with `full` every row has both.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyRow {
    pub device: String,
    pub op: String,
    pub sync: String,
    pub requests_per_s: f64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub mean: Option<f64>,
}

/// Everything one frame shows.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// Seconds between the two snapshots; `None` on the first frame.
    pub interval_s: Option<f64>,
    pub devices: Vec<DeviceRow>,
    /// Devices with nothing to show, left out of `devices`.
    pub idle_devices: usize,
    pub flusher: Vec<FlusherRow>,
    pub latency: Vec<LatencyRow>,
    pub processes: Vec<ProcessRow>,
    pub stalls: Vec<Stall>,
    pub notes: Vec<String>,
}

/// Which device column a sample feeds.
enum Slot {
    Dirty,
    Writeback,
    BdiBps,
    WriteBps,
    SyncCalls,
}

/// Series identity: name and labels in exposition order.
type SeriesKey = (String, Vec<(String, String)>);

fn key(s: &Sample) -> SeriesKey {
    (s.name.clone(), s.labels.clone())
}

/// Counter deltas between two snapshots (`None` before a second one).
struct Deltas<'a> {
    cur: &'a [Sample],
    prev: Option<HashMap<SeriesKey, f64>>,
    secs: f64,
}

impl<'a> Deltas<'a> {
    fn new(prev: Option<&Snapshot>, cur: &'a Snapshot) -> Deltas<'a> {
        let secs = prev.map_or(0.0, |p| cur.at.duration_since(p.at).as_secs_f64());
        Deltas {
            cur: &cur.samples,
            prev: prev
                .filter(|_| secs > 0.0)
                .map(|p| p.samples.iter().map(|s| (key(s), s.value)).collect()),
            secs,
        }
    }

    /// Increase of `s` since the previous snapshot: a series new since then started at 0; a
    /// decrease (a restarted daemon) counts as none.
    fn delta(&self, s: &Sample) -> Option<f64> {
        let prev = self.prev.as_ref()?;
        Some((s.value - prev.get(&key(s)).copied().unwrap_or(0.0)).max(0.0))
    }

    fn named(&self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.cur.iter().filter(move |s| s.name == name)
    }
}

fn label(s: &Sample, key: &str) -> String {
    s.label(key).unwrap_or_default().to_owned()
}

/// Histogram `<base>_bucket` deltas grouped by `group` (labels other than `le`).
fn bucket_deltas(
    d: &Deltas<'_>,
    base: &str,
    group: impl Fn(&Sample) -> String,
) -> BTreeMap<String, Buckets> {
    let name = format!("{base}_bucket");
    let mut out: BTreeMap<String, Buckets> = BTreeMap::new();
    for s in d.cur.iter().filter(|s| s.name == name) {
        let (Some(delta), Some(le)) = (d.delta(s), s.label("le")) else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::INFINITY)
        };
        out.entry(group(s)).or_default().add(le, delta);
    }
    out
}

/// What one frame shows, for `device` only when given.
pub fn build(prev: Option<&Snapshot>, cur: &Snapshot, device: Option<&str>, sort: SortKey) -> View {
    let d = Deltas::new(prev, cur);
    let wanted = |dev: &str| device.is_none_or(|want| want == dev);
    let rate = |delta: f64| delta / d.secs;
    let mut devices: BTreeMap<String, DeviceRow> = BTreeMap::new();
    for s in &cur.samples {
        let dev = label(s, "device");
        if dev == "all" || !wanted(&dev) {
            continue;
        }
        let delta = || d.delta(s).map(rate);
        let (slot, value) = match s.name.as_str() {
            "wbscope_bdi_dirty_bytes" => (Slot::Dirty, Some(s.value)),
            "wbscope_bdi_writeback_bytes" => (Slot::Writeback, Some(s.value)),
            "wbscope_bdi_write_bandwidth_bytes_per_second" => (Slot::BdiBps, Some(s.value)),
            "wbscope_block_request_bytes_total" if s.label("op") == Some("write") => {
                (Slot::WriteBps, delta())
            }
            "wbscope_sync_call_duration_seconds_count" => (Slot::SyncCalls, delta()),
            _ => continue,
        };
        let r = devices.entry(dev.clone()).or_insert_with(|| DeviceRow {
            device: dev,
            ..DeviceRow::default()
        });
        let field = match slot {
            Slot::Dirty => &mut r.dirty_bytes,
            Slot::Writeback => &mut r.writeback_bytes,
            Slot::BdiBps => &mut r.bdi_bps,
            Slot::WriteBps => &mut r.write_bps,
            Slot::SyncCalls => &mut r.sync_calls_per_s,
        };
        // Rates sum over the series of a device (sync flags, calls); gauges have one series.
        if let Some(v) = value {
            *field.get_or_insert(0.0) += v;
        }
    }
    for (dev, b) in bucket_deltas(&d, "wbscope_sync_call_duration_seconds", |s| {
        label(s, "device")
    }) {
        if let Some(r) = devices.get_mut(&dev) {
            r.sync_p50 = b.quantile(0.5);
            r.sync_p99 = b.quantile(0.99);
        }
    }
    let all = devices.len();
    let mut devices: Vec<DeviceRow> = devices
        .into_values()
        .filter(|r| device.is_some() || active(r))
        .collect();
    devices.sort_by(|a, b| {
        activity(b)
            .total_cmp(&activity(a))
            .then(a.device.cmp(&b.device))
    });
    View {
        interval_s: (d.prev.is_some()).then_some(d.secs),
        idle_devices: all - devices.len(),
        devices,
        flusher: flusher(&d, &wanted),
        latency: latency(&d, &wanted),
        processes: ranking::processes(prev, cur, d.secs, sort),
        stalls: cur
            .stalls
            .iter()
            .filter(|s| wanted(&s.device))
            .cloned()
            .collect(),
        notes: cur.notes.clone(),
    }
}

/// Every device the snapshot has series for (not `all`), sorted: what `d` cycles through.
pub fn device_names(s: &Snapshot) -> Vec<String> {
    let mut names: Vec<String> = s
        .samples
        .iter()
        .filter(|x| x.name.starts_with("wbscope_bdi_") || x.name.starts_with("wbscope_block_"))
        .filter_map(|x| x.label("device"))
        .filter(|d| *d != "all")
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

fn active(r: &DeviceRow) -> bool {
    let some = |v: Option<f64>| v.is_some_and(|v| v > 0.0);
    some(r.dirty_bytes) || some(r.writeback_bytes) || some(r.write_bps) || some(r.sync_calls_per_s)
}

/// Busiest first: bytes moving, then bytes waiting.
fn activity(r: &DeviceRow) -> f64 {
    r.write_bps.unwrap_or(0.0) * 1e3
        + r.sync_calls_per_s.unwrap_or(0.0) * 1e6
        + r.dirty_bytes.unwrap_or(0.0)
        + r.writeback_bytes.unwrap_or(0.0)
}

fn flusher(d: &Deltas<'_>, wanted: &dyn Fn(&str) -> bool) -> Vec<FlusherRow> {
    let mut rows: BTreeMap<(String, String, String), FlusherRow> = BTreeMap::new();
    let metrics = [
        "wbscope_writeback_work_total",
        "wbscope_writeback_written_bytes_total",
    ];
    for (i, name) in metrics.into_iter().enumerate() {
        for s in d.named(name).filter(|s| wanted(&label(s, "device"))) {
            let Some(delta) = d.delta(s).filter(|v| *v > 0.0) else {
                continue;
            };
            let k = (
                label(s, "device"),
                label(s, "sync_mode"),
                label(s, "reason"),
            );
            let r = rows.entry(k.clone()).or_insert_with(|| FlusherRow {
                device: k.0,
                sync_mode: k.1,
                reason: k.2,
                works_per_s: 0.0,
                bytes_per_s: 0.0,
            });
            *(if i == 0 {
                &mut r.works_per_s
            } else {
                &mut r.bytes_per_s
            }) += delta / d.secs;
        }
    }
    let mut rows: Vec<FlusherRow> = rows.into_values().collect();
    rows.sort_by(|a, b| {
        b.bytes_per_s
            .total_cmp(&a.bytes_per_s)
            .then(b.works_per_s.total_cmp(&a.works_per_s))
    });
    rows
}

fn latency(d: &Deltas<'_>, wanted: &dyn Fn(&str) -> bool) -> Vec<LatencyRow> {
    type Key = (String, String, String);
    let key_of = |s: &Sample| (label(s, "device"), label(s, "op"), label(s, "sync"));
    let group = |s: &Sample| {
        let (device, op, sync) = key_of(s);
        format!("{device}\t{op}\t{sync}")
    };
    let mut rows: BTreeMap<Key, LatencyRow> = BTreeMap::new();
    for (k, b) in bucket_deltas(d, "wbscope_block_request_latency_seconds", group) {
        let mut parts = k.split('\t').map(str::to_owned);
        let (Some(device), Some(op), Some(sync)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if b.total() <= 0.0 || !wanted(&device) {
            continue;
        }
        let r = latency_row(&mut rows, (device, op, sync));
        r.requests_per_s = b.total() / d.secs;
        r.p50 = b.quantile(0.5);
        r.p99 = b.quantile(0.99);
    }
    // Time and count of each (device, op, sync): the mean latency, at every detail level.
    let sums = |name: &str| -> BTreeMap<Key, f64> {
        let mut out = BTreeMap::new();
        for s in d.named(name).filter(|s| wanted(&label(s, "device"))) {
            if let Some(delta) = d.delta(s) {
                *out.entry(key_of(s)).or_insert(0.0) += delta;
            }
        }
        out
    };
    let time = sums("wbscope_block_request_time_seconds_total");
    let requests = sums("wbscope_block_requests_total");
    for (k, n) in requests.into_iter().filter(|(_, n)| *n > 0.0) {
        let Some(t) = time.get(&k) else {
            continue;
        };
        let r = latency_row(&mut rows, k);
        if r.p50.is_none() {
            r.requests_per_s = n / d.secs;
        }
        r.mean = Some(t / n);
    }
    let mut rows: Vec<LatencyRow> = rows.into_values().collect();
    rows.sort_by(|a, b| b.requests_per_s.total_cmp(&a.requests_per_s));
    rows
}

/// The row of `k`, empty at first.
fn latency_row(
    rows: &mut BTreeMap<(String, String, String), LatencyRow>,
    k: (String, String, String),
) -> &mut LatencyRow {
    rows.entry(k.clone()).or_insert_with(|| LatencyRow {
        device: k.0,
        op: k.1,
        sync: k.2,
        requests_per_s: 0.0,
        p50: None,
        p99: None,
        mean: None,
    })
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
