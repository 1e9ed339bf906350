//! Turning the block maps into `wbscope_block_*` metric families at scrape time.
//!
//! Keys carry the raw `req_op` value; several raw ops share the `other` label, and the flag and
//! error metrics have no `sync` label, so values are summed per label set before export.

use std::collections::BTreeMap;

use probe_common::{
    block::{BioCounts, BioKey, BlockKey, FLAGS, RqCounts, RqStats},
    hist::Log2Hist,
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use crate::{
    kernel::devices,
    metrics::detail::Detail,
    metrics::{MapErrors, Slotted, describe, proto::MetricBuilder},
};

// The object names its maps after these (checked by `probes::object_names`).
pub use probe_common::block::maps::BLOCK_RQ_SLOTS as RQ_SLOTS;
pub use probe_common::block::maps::BLOCK_RQ_STATS as RQ_STATS;

const REQUESTS: &str = "wbscope_block_requests_total";
const BYTES: &str = "wbscope_block_request_bytes_total";
const FLAGS_TOTAL: &str = "wbscope_block_flags_total";
const LATENCY: &str = "wbscope_block_request_latency_seconds";
const TIME: &str = "wbscope_block_request_time_seconds_total";
const QUEUE: &str = "wbscope_block_queue_latency_seconds";
const ERRORS: &str = "wbscope_block_request_errors_total";

/// Names and help texts (documented in docs/metrics.md, generated from them).
const FAMILIES: &[(&str, &str)] = &[
    (
        REQUESTS,
        "Block requests issued to the driver (each block_rq_issue event; a requeued request counts \
         again when re-issued), by op and REQ_SYNC. Empty pre-flush writes that the kernel's flush \
         machinery completes without issuing are not counted, unlike in /sys/block/<dev>/stat.",
    ),
    (
        BYTES,
        "Bytes of the requests counted in wbscope_block_requests_total (data length at issue).",
    ),
    (
        FLAGS_TOTAL,
        "REQ_* flag counts: level=\"bio\" per bio at block_bio_queue (what the filesystem asked \
         for), level=\"request\" per request at issue (what reached the driver after flush \
         emulation).",
    ),
    (
        LATENCY,
        "Block request latency from issue to completion, each request once.",
    ),
    (
        TIME,
        "Issue-to-completion time of block requests summed, by op and REQ_SYNC (the latency \
         histogram's sum at every detail level): divided by the rate of \
         wbscope_block_requests_total, the mean latency of each kind of request.",
    ),
    (
        QUEUE,
        "Block request time from allocation (rq->start_time_ns, includes plugging and the I/O \
         scheduler) to issue.",
    ),
    (ERRORS, "Block requests completed with an error status."),
];

/// The family's maps; `None` when missing from the object (counted as a read error).
pub struct Maps {
    pub rq_stats: Slotted<BlockKey, RqStats>,
    pub bio_counts: super::bio_counts::BioCountMaps,
}

/// Everything read from the maps in one scrape, CPUs already summed.
#[derive(Default)]
pub struct Snapshot {
    pub rq_counts: Vec<(BlockKey, RqCounts)>,
    pub bio_counts: Vec<(BioKey, BioCounts)>,
    pub rq_latency: Vec<(BlockKey, Log2Hist)>,
    pub queue_latency: Vec<(BlockKey, Log2Hist)>,
}

/// Collector of the `wbscope_block_*` families.
pub struct BlockCollector {
    maps: Maps,
    op_labels: BTreeMap<u32, &'static str>,
    errors: MapErrors,
    descs: Vec<Desc>,
}

impl BlockCollector {
    pub fn new(maps: Maps, op_labels: BTreeMap<u32, &'static str>, errors: MapErrors) -> Self {
        BlockCollector {
            maps,
            op_labels,
            errors,
            descs: describe(FAMILIES),
        }
    }

    fn read(&self) -> Snapshot {
        let e = &self.errors;
        let rq_stats = self
            .maps
            .rq_stats
            .read(e, |acc: &mut RqStats, v| acc.merge(v), RqStats::ZERO)
            .unwrap_or_default();
        let mut snap = split(rq_stats);
        snap.bio_counts = super::bio_counts::read(
            &self.maps.bio_counts,
            e,
            super::bio_counts::Freshness::Scrape,
        )
        .unwrap_or_default();
        snap
    }
}

/// Splits the probes' combined request values into the three series sets. The probes create a
/// value for the first part they update, so a key's other parts may be empty: only parts that
/// hold something become series, which keeps every series' meaning (a request count series
/// exists once a request was issued or failed, a histogram once it holds a value).
fn split(values: Vec<(BlockKey, RqStats)>) -> Snapshot {
    let mut snap = Snapshot::default();
    for (key, v) in values {
        if v.counts.requests != 0 || v.counts.errors != 0 {
            snap.rq_counts.push((key, v.counts));
        }
        if v.latency.count() != 0 {
            snap.rq_latency.push((key, v.latency));
        }
        if v.queue.count() != 0 {
            snap.queue_latency
                .push((BlockKey { sync: 0, ..key }, v.queue));
        }
    }
    snap
}

impl Collector for BlockCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        build(
            &self.read(),
            &self.op_labels,
            &devices::label_for_kernel_dev,
            crate::metrics::detail::get(),
        )
    }
}

/// Label sets: (device, op, sync) and (device, op).
type RqLabels = (String, &'static str, &'static str);
type DevOp = (String, &'static str);

fn sync_label(sync: u16) -> &'static str {
    if sync != 0 { "true" } else { "false" }
}

/// Builds the metric families from a snapshot; `device` names a kernel dev_t. With
/// `Detail::Basic` (the fleet default, README "Series per device") the labels a device's
/// series multiply by are kept where they are cheap and dropped where they cost a histogram
/// each: request counts and the summed request time keep op and sync (their ratio is the mean
/// latency of each kind), but the request and queue latency histograms are by device only,
/// bytes by op (no `sync`), and flag counters are summed over ops (no `op`) and kept at the
/// request level only (no `level="bio"`).
pub fn build(
    snap: &Snapshot,
    op_labels: &BTreeMap<u32, &'static str>,
    device: &dyn Fn(u32) -> String,
    detail: Detail,
) -> Vec<MetricFamily> {
    // An empty value leaves the label out of the exposition.
    let full = detail == Detail::Full;
    let flag_op = |o: &'static str| if full { o } else { "" };
    let split = |o: &'static str, s: u16| if full { (o, sync_label(s)) } else { ("", "") };
    let queue_op = |o: &'static str| if full { o } else { "" };
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let mut dev = |d: u32| names.entry(d).or_insert_with(|| device(d)).clone();
    let op = |raw: u16| op_labels.get(&u32::from(raw)).copied().unwrap_or("other");

    let mut counts: BTreeMap<RqLabels, RqCounts> = BTreeMap::new();
    let mut rq_flags: BTreeMap<DevOp, RqCounts> = BTreeMap::new();
    for (k, v) in &snap.rq_counts {
        let (d, o) = (dev(k.dev), op(k.op));
        counts
            .entry((d.clone(), o, sync_label(k.sync)))
            .or_insert(RqCounts::ZERO)
            .merge(v);
        rq_flags.entry((d, o)).or_insert(RqCounts::ZERO).merge(v);
    }
    let mut bio_flags: BTreeMap<DevOp, BioCounts> = BTreeMap::new();
    for (k, v) in &snap.bio_counts {
        bio_flags
            .entry((dev(k.dev), op(u16::from(k.op))))
            .or_insert(BioCounts::ZERO)
            .merge(v);
    }
    let mut latency: BTreeMap<RqLabels, Log2Hist> = BTreeMap::new();
    let mut time: BTreeMap<RqLabels, u64> = BTreeMap::new();
    for (k, v) in &snap.rq_latency {
        let (d, o) = (dev(k.dev), op(k.op));
        *time.entry((d.clone(), o, sync_label(k.sync))).or_insert(0) += v.sum_ns;
        let (lo, ls) = split(o, k.sync);
        latency
            .entry((d, lo, ls))
            .or_insert(Log2Hist::ZERO)
            .merge(v);
    }
    let mut queue: BTreeMap<DevOp, Log2Hist> = BTreeMap::new();
    for (k, v) in &snap.queue_latency {
        queue
            .entry((dev(k.dev), queue_op(op(k.op))))
            .or_insert(Log2Hist::ZERO)
            .merge(v);
    }

    let mut requests = MetricBuilder::counter(REQUESTS, FAMILIES);
    let mut bytes = MetricBuilder::counter(BYTES, FAMILIES);
    let mut bytes_by: BTreeMap<RqLabels, u64> = BTreeMap::new();
    for ((d, o, s), c) in &counts {
        let labels = [("device", d.as_str()), ("op", *o), ("sync", *s)];
        requests.add_counter(&labels, c.requests as f64);
        let bytes_sync = if full { *s } else { "" };
        *bytes_by.entry((d.clone(), o, bytes_sync)).or_insert(0) += c.bytes;
    }
    for ((d, o, s), b) in &bytes_by {
        bytes.add_counter(
            &[("device", d.as_str()), ("op", *o), ("sync", *s)],
            *b as f64,
        );
    }
    let mut flags = MetricBuilder::counter(FLAGS_TOTAL, FAMILIES);
    let mut errors = MetricBuilder::counter(ERRORS, FAMILIES);
    let mut request_flags: BTreeMap<DevOp, [u64; FLAGS.len()]> = BTreeMap::new();
    for ((d, o), c) in &rq_flags {
        sum_flags(&mut request_flags, (d.clone(), flag_op(o)), &c.flags);
        errors.add_counter(&[("device", d.as_str()), ("op", *o)], c.errors as f64);
    }
    let mut bio_flag_sums: BTreeMap<DevOp, [u64; FLAGS.len()]> = BTreeMap::new();
    for ((d, o), c) in &bio_flags {
        sum_flags(&mut bio_flag_sums, (d.clone(), flag_op(o)), &c.flags);
    }
    for ((d, o), counts) in &request_flags {
        add_flags(&mut flags, d, o, "request", counts);
    }
    // Bio-level flags say what the filesystem asked for before merging; the request level is
    // what the device was sent, which is what a fleet's dashboards read.
    if full {
        for ((d, o), counts) in &bio_flag_sums {
            add_flags(&mut flags, d, o, "bio", counts);
        }
    }
    let mut latency_family = MetricBuilder::histogram(LATENCY, FAMILIES);
    for ((d, o, s), h) in &latency {
        latency_family.add_log2_histogram(&[("device", d.as_str()), ("op", *o), ("sync", *s)], h);
    }
    let mut time_family = MetricBuilder::counter(TIME, FAMILIES);
    for ((d, o, s), ns) in &time {
        time_family.add_counter(
            &[("device", d.as_str()), ("op", *o), ("sync", *s)],
            *ns as f64 / 1e9,
        );
    }
    let mut queue_family = MetricBuilder::histogram(QUEUE, FAMILIES);
    for ((d, o), h) in &queue {
        queue_family.add_log2_histogram(&[("device", d.as_str()), ("op", *o)], h);
    }
    [
        requests,
        bytes,
        flags,
        latency_family,
        time_family,
        queue_family,
        errors,
    ]
    .into_iter()
    .filter_map(MetricBuilder::finish)
    .collect()
}

/// Adds `counts` to the flag sums of `key`.
fn sum_flags(
    sums: &mut BTreeMap<DevOp, [u64; FLAGS.len()]>,
    key: DevOp,
    counts: &[u64; FLAGS.len()],
) {
    let sum = sums.entry(key).or_insert([0; FLAGS.len()]);
    for (s, c) in sum.iter_mut().zip(counts) {
        *s += c;
    }
}

/// One counter per flag the kernel has set on this device's requests (or bios) since start: a
/// flag never seen has no series (a missing series sums as 0, and most devices never see
/// most flags, which would otherwise cost 16 series each); no `op` label when `op` is empty
/// (summed over ops).
fn add_flags(
    family: &mut MetricBuilder,
    device: &str,
    op: &str,
    level: &str,
    counts: &[u64; FLAGS.len()],
) {
    for ((flag, _), n) in FLAGS.iter().zip(counts).filter(|(_, n)| **n > 0) {
        let labels = [
            ("device", device),
            ("op", op),
            ("flag", flag),
            ("level", level),
        ];
        let labels: Vec<(&str, &str)> = labels
            .into_iter()
            .filter(|(name, value)| *name != "op" || !value.is_empty())
            .collect();
        family.add_counter(&labels, *n as f64);
    }
}

#[cfg(test)]
mod tests;
