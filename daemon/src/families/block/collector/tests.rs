use super::*;
use prometheus::proto::MetricFamily;

const DEV: u32 = (7 << 20) | 3;

fn key(op: u16, sync: u16) -> BlockKey {
    BlockKey { dev: DEV, op, sync }
}

/// A bio key of op `op` attributed to raw write source `source`.
fn bio_key(op: u8, source: u8) -> BioKey {
    BioKey {
        dev: DEV,
        op,
        source,
        sync_mode: probe_common::device_writes::NO_WORK,
        reason: probe_common::device_writes::NO_WORK,
    }
}

fn counts(requests: u64, bytes: u64, errors: u64, flags: &[usize]) -> RqCounts {
    let mut c = RqCounts::ZERO;
    c.requests = requests;
    c.bytes = bytes;
    c.errors = errors;
    for f in flags {
        c.flags[*f] = requests;
    }
    c
}

fn labels() -> BTreeMap<u32, &'static str> {
    [
        (0, "read"),
        (1, "write"),
        (2, "flush"),
        (3, "discard"),
        (9, "write_zeroes"),
    ]
    .into_iter()
    .collect()
}

/// The value of the sample of `family` whose labels include all of `want`.
fn value(families: &[MetricFamily], family: &str, want: &[(&str, &str)]) -> Option<f64> {
    let f = families.iter().find(|f| f.name() == family)?;
    f.get_metric()
        .iter()
        .find(|m| {
            want.iter().all(|(n, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *n && l.value() == *v)
            })
        })
        .map(|m| match f.get_field_type() {
            prometheus::proto::MetricType::HISTOGRAM => m.get_histogram().get_sample_count() as f64,
            _ => m.get_counter().value(),
        })
}

#[test]
fn sums_sync_away_and_folds_unknown_ops_into_other() {
    let mut lat = Log2Hist::ZERO;
    lat.record(50_000);
    let snap = Snapshot {
        rq_counts: vec![
            (key(1, 1), counts(2, 8192, 0, &[0, 4])),
            (key(1, 0), counts(1, 4096, 1, &[])),
            (key(34, 0), counts(1, 0, 0, &[])),
            (key(35, 0), counts(2, 0, 0, &[])),
        ],
        // One (device, op) under two device-writes attributions: the bio series add them up.
        bio_counts: vec![
            (bio_key(1, 2), {
                let mut b = BioCounts::ZERO;
                b.bios = 2;
                b.flags[2] = 1; // fua
                b
            }),
            (bio_key(1, 10), {
                let mut b = BioCounts::ZERO;
                b.bios = 1;
                b.flags[3] = 1; // preflush
                b
            }),
        ],
        rq_latency: vec![(key(1, 1), lat), (key(1, 1), lat)],
        queue_latency: vec![(key(1, 0), lat)],
    };
    let families = build(
        &snap,
        &labels(),
        &|d| format!("loop{}", d & 0xfffff),
        Detail::Full,
    );
    let w = [("device", "loop3"), ("op", "write")];
    let sync = |s| [w[0], w[1], ("sync", s)];
    assert_eq!(value(&families, REQUESTS, &sync("true")), Some(2.0));
    assert_eq!(value(&families, REQUESTS, &sync("false")), Some(1.0));
    assert_eq!(value(&families, BYTES, &sync("true")), Some(8192.0));
    assert_eq!(
        value(&families, REQUESTS, &[("op", "other"), ("sync", "false")]),
        Some(3.0)
    );
    let flag = |f, level| [w[0], w[1], ("flag", f), ("level", level)];
    assert_eq!(
        value(&families, FLAGS_TOTAL, &flag("sync", "request")),
        Some(2.0)
    );
    assert_eq!(
        value(&families, FLAGS_TOTAL, &flag("idle", "request")),
        Some(2.0)
    );
    // A flag never set has no series (it sums as 0).
    assert_eq!(
        value(&families, FLAGS_TOTAL, &flag("meta", "request")),
        None
    );
    assert_eq!(
        value(&families, FLAGS_TOTAL, &flag("fua", "bio")),
        Some(1.0)
    );
    assert_eq!(
        value(&families, FLAGS_TOTAL, &flag("preflush", "bio")),
        Some(1.0)
    );
    assert_eq!(value(&families, ERRORS, &w), Some(1.0));
    assert_eq!(value(&families, LATENCY, &sync("true")), Some(2.0));
    assert_eq!(value(&families, QUEUE, &w), Some(1.0));
}

#[test]
fn empty_maps_give_no_families() {
    let families = build(
        &Snapshot::default(),
        &labels(),
        &|d| d.to_string(),
        Detail::Full,
    );
    assert!(families.is_empty());
}

fn keys<V>(values: &[(BlockKey, V)]) -> Vec<BlockKey> {
    values.iter().map(|(k, _)| *k).collect()
}

#[test]
fn split_exports_only_parts_that_hold_something() {
    let mut queued = RqStats::ZERO;
    queued.counts = counts(2, 8192, 0, &[0]);
    queued.queue.record(3_000);
    queued.queue.record(5_000);
    // Created by a completion whose issue was not seen: latency only.
    let mut completed = RqStats::ZERO;
    completed.latency.record(50_000);
    // A failed request whose issue was not seen and whose issue time is unknown.
    let mut failed = RqStats::ZERO;
    failed.counts.errors = 1;
    let snap = split(vec![
        (key(1, 1), queued),
        (key(0, 0), completed),
        (key(2, 0), failed),
        (key(3, 0), RqStats::ZERO),
    ]);
    assert_eq!(keys(&snap.rq_counts), [key(1, 1), key(2, 0)]);
    assert_eq!(keys(&snap.rq_latency), [key(0, 0)]);
    // Queue latency has no sync label: its key drops REQ_SYNC.
    assert_eq!(keys(&snap.queue_latency), [key(1, 0)]);
    assert_eq!(snap.queue_latency[0].1.count(), 2);
    assert!(snap.bio_counts.is_empty());
}

#[test]
fn basic_detail_sums_flags_over_ops_and_keeps_op_elsewhere() {
    let snap = Snapshot {
        rq_counts: vec![
            (key(1, 1), counts(2, 8192, 0, &[0])),
            (key(0, 1), counts(3, 4096, 1, &[0])),
        ],
        ..Snapshot::default()
    };
    let families = build(&snap, &labels(), &|_| "loop3".into(), Detail::Basic);
    let flags = families
        .iter()
        .find(|f| f.name() == FLAGS_TOTAL)
        .expect("flags family");
    assert!(
        flags
            .get_metric()
            .iter()
            .all(|m| m.get_label().iter().all(|l| l.name() != "op")),
        "op label kept on flags"
    );
    // sync (flag 0) of the write's 2 and the read's 3 requests.
    let want = [("device", "loop3"), ("flag", "sync"), ("level", "request")];
    assert_eq!(value(&families, FLAGS_TOTAL, &want), Some(5.0));
    // Requests and errors keep their op.
    let read = [("device", "loop3"), ("op", "read")];
    assert_eq!(value(&families, ERRORS, &read), Some(1.0));
    assert_eq!(value(&families, REQUESTS, &read), Some(3.0));
}

#[test]
fn basic_detail_exports_latency_by_device_and_keeps_op_and_sync_on_the_summed_time() {
    let mut lat = Log2Hist::ZERO;
    lat.record(50_000);
    let snap = Snapshot {
        rq_counts: vec![
            (key(1, 1), counts(2, 8192, 0, &[])),
            (key(1, 0), counts(1, 4096, 0, &[])),
        ],
        rq_latency: vec![(key(1, 1), lat), (key(1, 0), lat)],
        queue_latency: vec![(key(1, 1), lat), (key(0, 0), lat)],
        ..Snapshot::default()
    };
    let families = build(&snap, &labels(), &|_| "loop3".into(), Detail::Basic);
    let labels_of = |name: &str| -> Vec<Vec<String>> {
        let f = families.iter().find(|f| f.name() == name).expect(name);
        f.get_metric()
            .iter()
            .map(|m| m.get_label().iter().map(|l| l.name().to_owned()).collect())
            .collect()
    };
    assert_eq!(labels_of(LATENCY), [["device"]]);
    assert_eq!(
        labels_of(TIME).len(),
        2,
        "the summed time keeps op and sync"
    );
    assert_eq!(labels_of(QUEUE), [["device"]]);
    assert_eq!(labels_of(BYTES), [["device", "op"]]);
    assert_eq!(labels_of(REQUESTS).len(), 2, "requests keep op and sync");
    let write = [("device", "loop3"), ("op", "write")];
    assert_eq!(value(&families, LATENCY, &[("device", "loop3")]), Some(2.0));
    let sync_write = [("device", "loop3"), ("op", "write"), ("sync", "true")];
    assert_eq!(value(&families, TIME, &sync_write), Some(50e-6));
    assert_eq!(value(&families, QUEUE, &[("device", "loop3")]), Some(2.0));
    assert_eq!(value(&families, BYTES, &write), Some(12288.0));
}
