//! Collectors of the sync-call family: latency histograms and sync_file_range call counts.

use std::collections::BTreeMap;

use aya::{
    Ebpf,
    maps::{MapData, PerCpuHashMap},
};
use probe_common::{
    hist::Log2Hist,
    sync_call::{SfrKey, SyncKey, SyncSyscall, sfr_flags_label},
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use crate::{
    families::CollectorContext,
    kernel::devices,
    metrics::{MapErrors, describe, proto::MetricBuilder, read_per_cpu_hash},
};

/// Map names in the eBPF object.
const SYNC_CALL_LATENCY: &str = "SYNC_CALL_LATENCY";
const SFR_CALLS: &str = "SFR_CALLS";

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
    let mut take = |name: &'static str| {
        ctx.map_errors.register(name);
        ebpf.take_map(name)
    };
    let latency = take(SYNC_CALL_LATENCY).and_then(|m| PerCpuHashMap::try_from(m).ok());
    let sfr = take(SFR_CALLS).and_then(|m| PerCpuHashMap::try_from(m).ok());
    vec![Box::new(SyncCollector {
        latency,
        sfr,
        errors: ctx.map_errors.clone(),
        descs: describe(FAMILIES),
    })]
}

struct SyncCollector {
    latency: Option<PerCpuHashMap<MapData, SyncKey, Log2Hist>>,
    sfr: Option<PerCpuHashMap<MapData, SfrKey, u64>>,
    errors: MapErrors,
    descs: Vec<Desc>,
}

impl SyncCollector {
    fn latency(&self) -> Option<MetricFamily> {
        let entries = read_per_cpu_hash(
            SYNC_CALL_LATENCY,
            self.latency.as_ref(),
            &self.errors,
            |acc: &mut Log2Hist, v| acc.merge(v),
            Log2Hist::ZERO,
        )?;
        let mut family = MetricBuilder::histogram(FAMILIES[0].0, FAMILIES);
        for (key, hist) in entries {
            let Some(syscall) = SyncSyscall::from_raw(key.syscall) else {
                continue;
            };
            let device = if syscall == SyncSyscall::Sync {
                "all".to_owned()
            } else {
                devices::label_for_kernel_dev(key.dev)
            };
            family.add_log2_histogram(
                &[("syscall", syscall.label()), ("device", device.as_str())],
                &hist,
            );
        }
        family.finish()
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
