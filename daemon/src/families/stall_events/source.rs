//! The kernel side of stall events: taking the maps out of the loaded object, setting the
//! threshold, and draining the ring buffer.

use std::os::fd::AsRawFd;

use aya::{
    Ebpf,
    maps::{Array, MapData, MapError, PerCpuArray, RingBuf},
};
use probe_common::stall_events::{StallConfig, maps};
use tokio::io::unix::AsyncFd;

use super::event::{Decoder, Stall};

/// Why stall events cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum StallError {
    #[error("map {0} is missing from the eBPF object")]
    MissingMap(&'static str),
    #[error("map {name}")]
    Map {
        name: &'static str,
        #[source]
        source: MapError,
    },
    #[error("polling the stall ring buffer")]
    Poll(#[source] std::io::Error),
    #[error("binding the event stream socket {path}")]
    Socket {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The threshold map: writing it changes what the probes report, at once.
pub struct ThresholdMap(Array<MapData, StallConfig>);

impl ThresholdMap {
    /// Takes the map out of the object.
    pub fn take(ebpf: &mut Ebpf) -> Result<ThresholdMap, StallError> {
        let map = ebpf
            .take_map(maps::STALL_CONFIG)
            .ok_or(StallError::MissingMap(maps::STALL_CONFIG))?;
        Array::try_from(map)
            .map(ThresholdMap)
            .map_err(|source| StallError::Map {
                name: maps::STALL_CONFIG,
                source,
            })
    }

    /// Turns events on with `threshold_ns` (0 reports every operation).
    pub fn set(&mut self, threshold_ns: u64) -> Result<(), StallError> {
        let value = StallConfig {
            threshold_ns,
            enabled: 1,
            _reserved: 0,
        };
        self.0.set(0, &value, 0).map_err(|source| StallError::Map {
            name: maps::STALL_CONFIG,
            source,
        })
    }
}

/// Takes the ring buffer out of the object.
pub fn take_ring(ebpf: &mut Ebpf) -> Result<RingBuf<MapData>, StallError> {
    let map = ebpf
        .take_map(maps::STALL_EVENTS)
        .ok_or(StallError::MissingMap(maps::STALL_EVENTS))?;
    RingBuf::try_from(map).map_err(|source| StallError::Map {
        name: maps::STALL_EVENTS,
        source,
    })
}

/// Takes the per-CPU drop counter out of the object.
pub fn take_drops(ebpf: &mut Ebpf) -> Option<PerCpuArray<MapData, u64>> {
    ebpf.take_map(maps::STALL_DROPS)
        .and_then(|m| PerCpuArray::try_from(m).ok())
}

/// Events lost because the ring buffer was full, summed over CPUs.
pub fn read_drops(map: &PerCpuArray<MapData, u64>) -> Result<u64, MapError> {
    Ok(map.get(&0, 0)?.iter().sum())
}

/// Hands every record to `on_event` as it arrives; returns only on a polling error.
pub async fn drain(ring: RingBuf<MapData>, mut on_event: impl FnMut(Stall)) -> StallError {
    let fd = ring.as_raw_fd();
    tracing::debug!("draining stall events from ring buffer fd {fd}");
    // SAFETY: the ring buffer owns its map fd for its whole life and always returns that same
    // fd; the AsyncFd owns the ring buffer, so the fd outlives the registration.
    let registered =
        unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) };
    let mut ring = match registered {
        Ok(r) => r,
        Err(err) => return StallError::Poll(err.into()),
    };
    let mut decoder = Decoder::default();
    let mut tick = tokio::time::interval(STALL_DRAIN_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // The probes commit block-request events without a wake-up unless the ring is a
        // quarter full (`probe-ebpf/src/stall_events.rs`, `quiet_wakeup`): the timer delivers
        // those.
        tokio::select! {
            ready = ring.readable_mut() => {
                let mut guard = match ready {
                    Ok(g) => g,
                    Err(err) => return StallError::Poll(err),
                };
                drain_ready(guard.get_inner_mut(), &mut decoder, &mut on_event);
                guard.clear_ready();
            }
            _ = tick.tick() => drain_ready(ring.get_mut(), &mut decoder, &mut on_event),
        }
    }
}

/// How long a block-request stall event may wait in the ring before the daemon reads it, when
/// neither the ring nor a later event of another kind (which always wakes it) woke it. A
/// second: each timer wake-up costs the idle daemon CPU (at 50 ms this timer alone more than
/// doubled the idle daemon's CPU time), and the events are at least the threshold (100 ms by
/// default) long.
pub const STALL_DRAIN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Every record in the ring now.
fn drain_ready(
    ring: &mut RingBuf<MapData>,
    decoder: &mut Decoder,
    on_event: &mut impl FnMut(Stall),
) {
    while let Some(item) = ring.next() {
        if let Some(stall) = decoder.decode(&item) {
            on_event(stall);
        }
    }
}
