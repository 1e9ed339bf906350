//! Reading the probes' maps, behind a narrow trait so collectors are tested with a fake.

use aya::maps::{MapData, PerCpuHashMap, PerCpuValues};
use probe_common::{
    hist::Log2Hist,
    sync_call::SyncKey,
    writeback::{WbKey, WbStats},
};

/// A map could not be read (or was never created).
#[derive(Debug, thiserror::Error)]
#[error("reading map {map}: {message}")]
pub struct MapReadError {
    pub map: &'static str,
    pub message: String,
}

/// Per-CPU map contents, already summed across CPUs.
pub trait MapSource: Send + Sync {
    /// `WB_WORK_STATS`: flusher work by (bdi, sync mode, reason).
    fn writeback_stats(&self) -> Result<Vec<(WbKey, WbStats)>, MapReadError>;
    /// `SYNC_CALL_LATENCY`: sync-call latency by (call, device).
    fn sync_call_latency(&self) -> Result<Vec<(SyncKey, Log2Hist)>, MapReadError>;
}

/// Map names in the eBPF object.
pub const WB_WORK_STATS: &str = "WB_WORK_STATS";
pub const SYNC_CALL_LATENCY: &str = "SYNC_CALL_LATENCY";

/// The real maps, taken out of the loaded object.
pub struct AyaMaps {
    wb_work_stats: Option<PerCpuHashMap<MapData, WbKey, WbStats>>,
    sync_call_latency: Option<PerCpuHashMap<MapData, SyncKey, Log2Hist>>,
}

impl AyaMaps {
    /// Takes the maps wbscope reads out of `ebpf`; a missing map is reported at every read.
    pub fn take_from(ebpf: &mut aya::Ebpf) -> AyaMaps {
        AyaMaps {
            wb_work_stats: ebpf
                .take_map(WB_WORK_STATS)
                .and_then(|m| PerCpuHashMap::try_from(m).ok()),
            sync_call_latency: ebpf
                .take_map(SYNC_CALL_LATENCY)
                .and_then(|m| PerCpuHashMap::try_from(m).ok()),
        }
    }
}

fn read_all<K: aya::Pod, V: aya::Pod>(
    name: &'static str,
    map: Option<&PerCpuHashMap<MapData, K, V>>,
    merge: impl Fn(&PerCpuValues<V>) -> V,
) -> Result<Vec<(K, V)>, MapReadError> {
    let map = map.ok_or_else(|| MapReadError {
        map: name,
        message: "map is missing from the eBPF object".into(),
    })?;
    map.iter()
        .map(|entry| {
            entry
                .map(|(key, values)| (key, merge(&values)))
                .map_err(|e| MapReadError {
                    map: name,
                    message: e.to_string(),
                })
        })
        .collect()
}

impl MapSource for AyaMaps {
    fn writeback_stats(&self) -> Result<Vec<(WbKey, WbStats)>, MapReadError> {
        read_all(WB_WORK_STATS, self.wb_work_stats.as_ref(), |values| {
            values.iter().fold(WbStats::ZERO, |mut acc, v| {
                acc.merge(v);
                acc
            })
        })
    }

    fn sync_call_latency(&self) -> Result<Vec<(SyncKey, Log2Hist)>, MapReadError> {
        read_all(
            SYNC_CALL_LATENCY,
            self.sync_call_latency.as_ref(),
            |values| {
                values.iter().fold(Log2Hist::ZERO, |mut acc, v| {
                    acc.merge(v);
                    acc
                })
            },
        )
    }
}
