//! `NFS_WRITES` and `NFS_COMMITS` as Prometheus families.

use std::collections::BTreeMap;

use aya::maps::{MapData, PerCpuHashMap};
use probe_common::{
    hist::Log2Hist,
    nfs::{
        NfsCommitKey, NfsCommitStats, NfsWriteKey, NfsWriteStats,
        maps::{NFS_COMMITS, NFS_WRITES},
    },
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::labels::{Servers, pass_sync_mode_label, stable_label};
use crate::{
    kernel::devices,
    metrics::{MapErrors, describe, proto::MetricBuilder, read_per_cpu_hash},
};

pub const FAMILIES: &[(&str, &str); 7] = &[
    (
        "wbscope_nfs_write_requests_total",
        "NFS WRITE RPCs the client set up (nfs:nfs_initiate_write), by mount (device is the \
         superblock's MAJ:MIN, as for sync calls on NFS files; server from the mount source), by \
         the stability the client asked for (unstable: the server may cache the data until a \
         COMMIT; data_sync / file_sync: the server writes it before replying) and by the sync \
         mode of the writepages pass that issued it (all: fsync, sync, close and other \
         data-integrity writeback; none: background writeback; unknown: set up outside a pass).",
    ),
    (
        "wbscope_nfs_write_bytes_total",
        "Bytes the NFS WRITE RPCs carried (each request's count), by mount, requested stability and \
         the sync mode of the writepages pass that issued them.",
    ),
    (
        "wbscope_nfs_write_errors_total",
        "NFS WRITE RPCs that completed with an error (nfs:nfs_writeback_done with a negative \
         status), by mount, requested stability and sync mode.",
    ),
    (
        "wbscope_nfs_write_duration_seconds",
        "WRITE RPC time from nfs_initiate_write to nfs_writeback_done (the reply, or the error), \
         by mount and requested stability. file_sync WRITEs include the server's own write to \
         stable storage; unstable ones defer it to the COMMIT.",
    ),
    (
        "wbscope_nfs_commits_total",
        "NFS COMMIT RPCs the client sent (nfs:nfs_initiate_commit): each makes the mount's earlier \
         unstable WRITEs to one file durable on the server.",
    ),
    (
        "wbscope_nfs_commit_errors_total",
        "NFS COMMIT RPCs that completed with an error (nfs:nfs_commit_done with a negative status), \
         by mount.",
    ),
    (
        "wbscope_nfs_commit_duration_seconds",
        "COMMIT RPC time from nfs_initiate_commit to nfs_commit_done: how long the server took \
         to make the unstable data durable.",
    ),
];

/// Exports both maps.
pub struct NfsCollector {
    pub writes: Option<PerCpuHashMap<MapData, NfsWriteKey, NfsWriteStats>>,
    pub commits: Option<PerCpuHashMap<MapData, NfsCommitKey, NfsCommitStats>>,
    pub errors: MapErrors,
    pub descs: Vec<Desc>,
}

impl NfsCollector {
    pub fn new(
        writes: Option<PerCpuHashMap<MapData, NfsWriteKey, NfsWriteStats>>,
        commits: Option<PerCpuHashMap<MapData, NfsCommitKey, NfsCommitStats>>,
        errors: &MapErrors,
    ) -> NfsCollector {
        errors.register(NFS_WRITES);
        errors.register(NFS_COMMITS);
        NfsCollector {
            writes,
            commits,
            errors: errors.clone(),
            descs: describe(FAMILIES),
        }
    }
}

/// WRITE series: (device, server, stability, sync mode) → stats.
type WriteSeries = BTreeMap<(String, String, String, String), NfsWriteStats>;

impl Collector for NfsCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let servers = Servers::current();
        let [
            requests,
            bytes,
            errors,
            duration,
            commits,
            commit_errors,
            commit_duration,
        ] = FAMILIES.map(|(name, _)| name);
        let mut requests = MetricBuilder::counter(requests, FAMILIES);
        let mut bytes = MetricBuilder::counter(bytes, FAMILIES);
        let mut errors = MetricBuilder::counter(errors, FAMILIES);
        let mut duration = MetricBuilder::histogram(duration, FAMILIES);
        let mut commits = MetricBuilder::counter(commits, FAMILIES);
        let mut commit_errors = MetricBuilder::counter(commit_errors, FAMILIES);
        let mut commit_duration = MetricBuilder::histogram(commit_duration, FAMILIES);

        if let Some(entries) = read_per_cpu_hash(
            NFS_WRITES,
            self.writes.as_ref(),
            &self.errors,
            |acc: &mut NfsWriteStats, v| acc.merge(v),
            NfsWriteStats::ZERO,
        ) {
            let mut series = WriteSeries::new();
            for (key, stats) in entries {
                let labels = (
                    devices::label_for_kernel_dev(key.dev),
                    servers.of(key.dev),
                    stable_label(key.stable),
                    pass_sync_mode_label(key.sync_mode),
                );
                series
                    .entry(labels)
                    .or_insert(NfsWriteStats::ZERO)
                    .merge(&stats);
            }
            // The latency histogram leaves the sync mode out: the RPC's time is the server's.
            let mut latency: BTreeMap<(&str, &str, &str), Log2Hist> = BTreeMap::new();
            for ((device, server, stable, sync_mode), stats) in &series {
                let labels = [
                    ("device", device.as_str()),
                    ("server", server.as_str()),
                    ("stable", stable.as_str()),
                    ("sync_mode", sync_mode.as_str()),
                ];
                requests.add_counter(&labels, stats.requests as f64);
                bytes.add_counter(&labels, stats.bytes as f64);
                errors.add_counter(&labels, stats.errors as f64);
                latency
                    .entry((device, server, stable))
                    .or_insert(Log2Hist::ZERO)
                    .merge(&stats.latency);
            }
            for ((device, server, stable), hist) in &latency {
                duration.add_log2_histogram(
                    &[("device", device), ("server", server), ("stable", stable)],
                    hist,
                );
            }
        }

        if let Some(entries) = read_per_cpu_hash(
            NFS_COMMITS,
            self.commits.as_ref(),
            &self.errors,
            |acc: &mut NfsCommitStats, v| acc.merge(v),
            NfsCommitStats::ZERO,
        ) {
            let mut series: BTreeMap<(String, String), NfsCommitStats> = BTreeMap::new();
            for (key, stats) in entries {
                series
                    .entry((devices::label_for_kernel_dev(key.dev), servers.of(key.dev)))
                    .or_insert(NfsCommitStats::ZERO)
                    .merge(&stats);
            }
            for ((device, server), stats) in &series {
                let labels = [("device", device.as_str()), ("server", server.as_str())];
                commits.add_counter(&labels, stats.commits as f64);
                commit_errors.add_counter(&labels, stats.errors as f64);
                commit_duration.add_log2_histogram(&labels, &stats.latency);
            }
        }

        [
            requests,
            bytes,
            errors,
            duration,
            commits,
            commit_errors,
            commit_duration,
        ]
        .into_iter()
        .filter_map(MetricBuilder::finish)
        .collect()
    }
}
