//! Sizes of the maps keyed by device, from the host at start: enough for every block device and
//! every mounted anonymous-device filesystem with room to grow, within documented bounds. A map
//! that still fills counts what it loses (`wbscope_map_overflows_total{map}`).

use std::path::Path;

use aya::EbpfLoader;
use probe_common::{map_overflow::is_anonymous_dev, sync_calls::SyncSyscall};

use crate::kernel::mounts;

/// Block-device sync-call latency: (call, device) keys.
pub use probe_common::sync_calls::maps::SYNC_CALL_LATENCY;
/// Anonymous-superblock sync-call latency (tmpfs, overlay, btrfs…).
pub use probe_common::sync_calls::maps::SYNC_CALL_LATENCY_ANON;

/// Bounds of the block-device map: 1024..=16384 keys (a Log2Hist per CPU each).
const BLOCK_MIN: u32 = 1024;
const BLOCK_MAX: u32 = 16384;
/// Block devices that may appear after start (hot plug, loop devices).
const BLOCK_HEADROOM: u32 = 32;
/// Bounds of the anonymous map: it only holds keys created since the last scrape for pseudo
/// filesystems (each scrape folds them into `device="pseudo"` and removes them).
const ANON_MIN: u32 = 256;
const ANON_MAX: u32 = 4096;
const ANON_HEADROOM: u32 = 64;

/// What the host has at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    pub block_devices: u32,
    pub anonymous_mounts: u32,
}

impl Host {
    /// Block devices in /sys/class/block (partitions included) and distinct anonymous devices
    /// in the mount table.
    pub fn discover() -> Host {
        let block_devices = std::fs::read_dir(Path::new("/sys/class/block"))
            .map(|d| d.count())
            .unwrap_or(0);
        let mut anonymous: Vec<(u32, u32)> = mounts::current()
            .into_iter()
            .map(|m| (m.major, m.minor))
            .filter(|&(major, minor)| is_anonymous_dev((major << 20) | minor))
            .collect();
        anonymous.sort_unstable();
        anonymous.dedup();
        Host {
            block_devices: u32::try_from(block_devices).unwrap_or(u32::MAX),
            anonymous_mounts: u32::try_from(anonymous.len()).unwrap_or(u32::MAX),
        }
    }
}

/// (map, max entries) for `host`.
pub fn plan(host: Host) -> [(&'static str, u32); 2] {
    let calls = SyncSyscall::ALL.len() as u32;
    let block = calls
        .saturating_mul(host.block_devices.saturating_add(BLOCK_HEADROOM))
        .checked_next_power_of_two()
        .unwrap_or(BLOCK_MAX)
        .clamp(BLOCK_MIN, BLOCK_MAX);
    // Mostly one or two calls per pseudo filesystem between two scrapes.
    let anon = 2u32
        .saturating_mul(host.anonymous_mounts.saturating_add(ANON_HEADROOM))
        .checked_next_power_of_two()
        .unwrap_or(ANON_MAX)
        .clamp(ANON_MIN, ANON_MAX);
    [(SYNC_CALL_LATENCY, block), (SYNC_CALL_LATENCY_ANON, anon)]
}

/// Sets the planned sizes on `loader`; returns them for `wbscope_map_capacity`.
pub fn apply(loader: &mut EbpfLoader<'_>) -> Vec<(&'static str, u32)> {
    let sizes = plan(Host::discover());
    for (map, entries) in sizes {
        loader.map_max_entries(map, entries);
    }
    sizes.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_host_within_bounds() {
        let small = plan(Host {
            block_devices: 10,
            anonymous_mounts: 20,
        });
        assert_eq!(
            small,
            [(SYNC_CALL_LATENCY, 1024), (SYNC_CALL_LATENCY_ANON, 256)]
        );
        let big = plan(Host {
            block_devices: 900,
            anonymous_mounts: 1500,
        });
        assert_eq!(
            big,
            [(SYNC_CALL_LATENCY, 16384), (SYNC_CALL_LATENCY_ANON, 4096)]
        );
        let mid = plan(Host {
            block_devices: 200,
            anonymous_mounts: 300,
        });
        // 9 × 232 = 2088 → 4096; 2 × 364 = 728 → 1024.
        assert_eq!(
            mid,
            [(SYNC_CALL_LATENCY, 4096), (SYNC_CALL_LATENCY_ANON, 1024)]
        );
    }
}
