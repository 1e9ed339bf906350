//! Collectors of the sync-call family: latency histograms and sync_file_range call counts.

use std::{collections::BTreeMap, sync::Mutex};

use aya::{
    Ebpf,
    maps::{MapData, PerCpuHashMap},
};
use probe_common::{
    hist::Log2Hist,
    sync_calls::{SfrKey, SyncKey, SyncSyscall, sfr_flags_label},
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::anonymous::{Disposition, Folded, PSEUDO_DEVICE, disposition};
use crate::{
    families::CollectorContext,
    kernel::{devices, mounts},
    metrics::{
        MapErrors, ScrapeErrors, Slotted, describe, proto::MetricBuilder, read_per_cpu_hash,
    },
    probes::map_sizes::{SYNC_CALL_LATENCY, SYNC_CALL_LATENCY_ANON},
};

// The object names its maps after these (checked by `probes::object_names`).
use probe_common::sync_calls::maps::{SFR_CALLS, SYNC_CALL_LATENCY_SLOTS};

/// The family name in `wbscope_scrape_errors_total`.
const SCRAPE_FAMILY: &str = "sync_calls";

type LatencyMap = PerCpuHashMap<MapData, SyncKey, Log2Hist>;

const FAMILIES: &[(&str, &str); 2] = &[
    (
        "wbscope_sync_call_duration_seconds",
        "Latency of sync-family calls by the device of the file's filesystem (`all` for sync(2)). \
         msync counts MS_SYNC calls only; io_uring requests are timed from submission to completion.",
    ),
    (
        "wbscope_sync_file_range_calls_total",
        "sync_file_range(2) system calls by device and flags (wait_before+write+wait_after order; \
         io_uring requests are in the duration histogram as io_uring_sync_file_range).",
    ),
];

/// The family's collectors, taking its maps out of `ebpf`.
pub fn collectors(ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
    ctx.map_errors.register(SYNC_CALL_LATENCY);
    let latency = Slotted::take(ebpf, SYNC_CALL_LATENCY_SLOTS, SYNC_CALL_LATENCY);
    let mut take = |name: &'static str| {
        ctx.map_errors.register(name);
        ebpf.take_map(name)
    };
    let anon = take(SYNC_CALL_LATENCY_ANON).and_then(|m| PerCpuHashMap::try_from(m).ok());
    let sfr = take(SFR_CALLS).and_then(|m| PerCpuHashMap::try_from(m).ok());
    ctx.scrape_errors.register(SCRAPE_FAMILY);
    vec![Box::new(SyncCollector {
        latency: Mutex::new(latency),
        anon: Mutex::new((anon, Folded::default())),
        sfr,
        errors: ctx.map_errors.clone(),
        scrape_errors: ctx.scrape_errors.clone(),
        descs: describe(FAMILIES),
    })]
}

struct SyncCollector {
    /// Block devices (and sync(2), unknown devices), slots in front of a hash. Locked: keys
    /// of removed devices are deleted from the hash at scrape time; a slot a removed device
    /// holds keeps its counts (skipped in the output) and goes on from them if the same device
    /// number comes back, which a counter may do.
    latency: Mutex<Slotted<SyncKey, Log2Hist>>,
    /// Anonymous superblocks, with what was folded into `device="pseudo"` so far.
    anon: Mutex<(Option<LatencyMap>, Folded)>,
    sfr: Option<PerCpuHashMap<MapData, SfrKey, u64>>,
    errors: MapErrors,
    scrape_errors: ScrapeErrors,
    descs: Vec<Desc>,
}

fn read_latency(
    name: &'static str,
    map: Option<&LatencyMap>,
    errors: &MapErrors,
) -> Option<Vec<(SyncKey, Log2Hist)>> {
    read_per_cpu_hash(
        name,
        map,
        errors,
        |acc: &mut Log2Hist, v| acc.merge(v),
        Log2Hist::ZERO,
    )
}

/// Removes `key` from `map`. An event recorded on another CPU between our read and this
/// delete (microseconds) is the only count that can be lost.
fn forget(map: Option<&mut LatencyMap>, key: &SyncKey) {
    if let Some(map) = map {
        let _ = map.remove(key);
    }
}

impl SyncCollector {
    fn latency(&self) -> Option<MetricFamily> {
        let mut family = MetricBuilder::histogram(FAMILIES[0].0, FAMILIES);
        self.block_latency(&mut family);
        self.anonymous_latency(&mut family);
        family.finish()
    }

    /// Block-device series; keys of devices that no longer exist are removed, so their series
    /// disappear.
    fn block_latency(&self, family: &mut MetricBuilder) {
        let Ok(mut map) = self.latency.lock() else {
            return;
        };
        let Some(entries) = map.read(&self.errors, |acc, v| acc.merge(v), Log2Hist::ZERO) else {
            return;
        };
        for (key, hist) in entries {
            let Some(syscall) = SyncSyscall::from_raw(key.syscall) else {
                continue;
            };
            let device = if syscall == SyncSyscall::Sync {
                "all".to_owned()
            } else {
                let (major, minor) = devices::split_kernel_dev(key.dev);
                if key.dev != 0 && !devices::block_device_exists(major, minor) {
                    forget(map.map.as_mut(), &key);
                    continue;
                }
                devices::label_for_kernel_dev(key.dev)
            };
            family.add_log2_histogram(
                &[("syscall", syscall.label()), ("device", device.as_str())],
                &hist,
            );
        }
    }

    /// Anonymous-superblock series: writeback filesystems by device, the rest folded (see
    /// [`super::anonymous`]).
    fn anonymous_latency(&self, family: &mut MetricBuilder) {
        let Ok(mut guard) = self.anon.lock() else {
            return;
        };
        let (map, folded) = &mut *guard;
        let table = match mounts::read() {
            Ok(table) => Some(table),
            Err(err) => {
                // Without the mount table nothing is folded or removed this time.
                self.scrape_errors
                    .count(SCRAPE_FAMILY, mounts::SOURCE, &err);
                None
            }
        };
        if let Some(entries) = read_latency(SYNC_CALL_LATENCY_ANON, map.as_ref(), &self.errors) {
            for (key, hist) in entries {
                let Some(syscall) = SyncSyscall::from_raw(key.syscall) else {
                    continue;
                };
                let (major, minor) = devices::split_kernel_dev(key.dev);
                let Some(table) = &table else {
                    continue;
                };
                match disposition(table, major, minor) {
                    Disposition::Own => {
                        let device = devices::label_for_kernel_dev(key.dev);
                        family.add_log2_histogram(
                            &[("syscall", syscall.label()), ("device", device.as_str())],
                            &hist,
                        );
                    }
                    Disposition::Fold => {
                        folded.add(key.syscall, &hist);
                        forget(map.as_mut(), &key);
                    }
                }
            }
        }
        for (raw, hist) in folded.iter() {
            if let Some(syscall) = SyncSyscall::from_raw(raw) {
                family.add_log2_histogram(
                    &[("syscall", syscall.label()), ("device", PSEUDO_DEVICE)],
                    hist,
                );
            }
        }
    }

    fn sfr_calls(&self) -> Option<MetricFamily> {
        let entries = read_per_cpu_hash(
            SFR_CALLS,
            self.sfr.as_ref(),
            &self.errors,
            |acc: &mut u64, v| *acc = acc.wrapping_add(*v),
            0,
        )?;
        // Every raw value with unknown bits shares the `invalid` label: sum them into one series.
        let mut series: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
        for (key, count) in entries {
            let labels = (
                devices::label_for_kernel_dev(key.dev),
                sfr_flags_label(key.flags),
            );
            let total = series.entry(labels).or_insert(0);
            *total = total.wrapping_add(count);
        }
        let mut family = MetricBuilder::counter(FAMILIES[1].0, FAMILIES);
        for ((device, flags), count) in &series {
            family.add_counter(
                &[("device", device.as_str()), ("flags", flags)],
                *count as f64,
            );
        }
        family.finish()
    }
}

impl Collector for SyncCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        [self.latency(), self.sfr_calls()]
            .into_iter()
            .flatten()
            .collect()
    }
}
