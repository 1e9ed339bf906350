//! Sync-family system calls: `syscalls:sys_{enter,exit}_{fsync,fdatasync}`, and
//! `wbscope_sync_call_duration_seconds{syscall,device}`.

use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, PerCpuHashMap},
};
use probe_common::{
    hist::Log2Hist,
    layout::{SysEnterFdFormat, globals},
    sync_call::{SyncKey, SyncSyscall},
};
use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{CollectorContext, Family, KernelInfo};
use crate::{
    kernel::{devices, layout::field_offset},
    metrics::{MapErrors, describe, proto::MetricBuilder, read_per_cpu_hash},
    probes::ProbeSpec,
};

const PROBES: &[ProbeSpec] = &[
    ProbeSpec::tracepoint("sys_enter_fsync", "syscalls", "sys_enter_fsync"),
    ProbeSpec::tracepoint("sys_exit_fsync", "syscalls", "sys_exit_fsync"),
    ProbeSpec::tracepoint("sys_enter_fdatasync", "syscalls", "sys_enter_fdatasync"),
    ProbeSpec::tracepoint("sys_exit_fdatasync", "syscalls", "sys_exit_fdatasync"),
];

/// Map name in the eBPF object.
const SYNC_CALL_LATENCY: &str = "SYNC_CALL_LATENCY";

/// The sync-call family.
#[derive(Default)]
pub struct SyncCalls {
    fsync_enter: Option<Result<SysEnterFdFormat, String>>,
    fdatasync_enter: Option<Result<SysEnterFdFormat, String>>,
}

/// The `fd` offset of a `sys_enter_*` record. Syscall arguments are recorded as longs whatever
/// their C type.
fn sys_enter_fd(kernel: &KernelInfo, event: &str) -> Result<SysEnterFdFormat, String> {
    let format = kernel.event_format("syscalls", event)?;
    Ok(SysEnterFdFormat {
        fd: field_offset(&format, "fd", |n| n == 8)?,
        _reserved: 0,
    })
}

fn gap_of<T>(part: &Option<Result<T, String>>) -> Option<String> {
    match part {
        Some(Ok(_)) => None,
        Some(Err(why)) => Some(why.clone()),
        None => Some("layout not resolved".into()),
    }
}

impl Family for SyncCalls {
    fn name(&self) -> &'static str {
        "sync calls"
    }

    fn probes(&self) -> &'static [ProbeSpec] {
        PROBES
    }

    fn resolve(&mut self, kernel: &KernelInfo) {
        self.fsync_enter = Some(sys_enter_fd(kernel, "sys_enter_fsync"));
        self.fdatasync_enter = Some(sys_enter_fd(kernel, "sys_enter_fdatasync"));
    }

    fn gap(&self, probe: &ProbeSpec) -> Option<String> {
        match probe.program {
            "sys_enter_fsync" => gap_of(&self.fsync_enter),
            "sys_enter_fdatasync" => gap_of(&self.fdatasync_enter),
            // Exits read no record fields.
            _ => None,
        }
    }

    fn set_globals<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        if let Some(Ok(f)) = &self.fsync_enter {
            loader.override_global(globals::FSYNC_ENTER_FMT, f, true);
        }
        if let Some(Ok(f)) = &self.fdatasync_enter {
            loader.override_global(globals::FDATASYNC_ENTER_FMT, f, true);
        }
    }

    fn collectors(&self, ebpf: &mut Ebpf, ctx: &CollectorContext) -> Vec<Box<dyn Collector>> {
        ctx.map_errors.register(SYNC_CALL_LATENCY);
        let map = ebpf
            .take_map(SYNC_CALL_LATENCY)
            .and_then(|m| PerCpuHashMap::try_from(m).ok());
        vec![Box::new(LatencyCollector {
            map,
            errors: ctx.map_errors.clone(),
            descs: describe(FAMILIES),
        })]
    }
}

const FAMILIES: &[(&str, &str)] = &[(
    "wbscope_sync_call_duration_seconds",
    "Latency of sync-family calls by the device of the file's filesystem (`all` for sync(2)).",
)];

struct LatencyCollector {
    map: Option<PerCpuHashMap<MapData, SyncKey, Log2Hist>>,
    errors: MapErrors,
    descs: Vec<Desc>,
}

impl Collector for LatencyCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(entries) = read_per_cpu_hash(
            SYNC_CALL_LATENCY,
            self.map.as_ref(),
            &self.errors,
            |acc: &mut Log2Hist, v| acc.merge(v),
            Log2Hist::ZERO,
        ) else {
            return Vec::new();
        };
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
        family.finish().into_iter().collect()
    }
}
