//! Placing the host's block devices in the probes' busy-clock slots (`DEV_BUSY_SLOTS`, see
//! probe-ebpf/src/stall_events/dev_busy.rs) before the probes are attached: a placed device's
//! journal and flush clocks are an array element, the others' a hash entry. Slots are written
//! once, here, and never moved, so a device's clocks stay in one place for the probes' life.

use std::path::Path;

use aya::{
    Ebpf,
    maps::{Array, MapError},
};
use probe_common::stall_events::{
    DEV_BUSY_SLOT_COUNT, DevBusySlot, dev_busy_slot_indexes, maps::DEV_BUSY_SLOTS,
};

/// Why the slots could not be written (the probes then use the hash for every device).
#[derive(Debug, thiserror::Error)]
pub enum BusySlotsError {
    #[error("map {DEV_BUSY_SLOTS} is missing from the eBPF object")]
    MissingMap,
    #[error("map {DEV_BUSY_SLOTS}")]
    Map(#[source] MapError),
}

/// Kernel dev_ts (`MAJOR << 20 | MINOR`) of the block devices in `root` (/sys/class/block:
/// disks and partitions, each with a `dev` file of `MAJ:MIN`), sorted; unreadable entries are
/// skipped.
pub fn block_devices(root: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut devs: Vec<u32> = dir
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("dev")).ok())
        .filter_map(|text| parse_dev(&text))
        .collect();
    devs.sort_unstable();
    devs.dedup();
    devs
}

/// `MAJ:MIN` as a kernel dev_t; `None` for anything else or a minor over 20 bits.
fn parse_dev(text: &str) -> Option<u32> {
    let (major, minor) = text.trim().split_once(':')?;
    let major: u32 = major.parse().ok()?;
    let minor: u32 = minor.parse().ok()?;
    (major < 1 << 12 && minor < 1 << 20 && (major, minor) != (0, 0)).then_some(major << 20 | minor)
}

/// `(slot, dev)` for every device of `devs` that gets one: the first free of its two
/// candidates, in the order given.
pub fn placement(devs: &[u32]) -> Vec<(u32, u32)> {
    let mut taken = [false; DEV_BUSY_SLOT_COUNT as usize];
    let mut placed = Vec::new();
    for &dev in devs {
        let (first, second) = dev_busy_slot_indexes(dev);
        if let Some(slot) = [first, second].into_iter().find(|&i| !taken[i as usize]) {
            taken[slot as usize] = true;
            placed.push((slot, dev));
        }
    }
    placed
}

/// Writes the slots of the devices in /sys/class/block; returns `(placed, devices)`.
pub fn assign(ebpf: &mut Ebpf) -> Result<(usize, usize), BusySlotsError> {
    let devs = block_devices(Path::new("/sys/class/block"));
    let map = ebpf
        .map_mut(DEV_BUSY_SLOTS)
        .ok_or(BusySlotsError::MissingMap)?;
    let mut slots: Array<_, DevBusySlot> = Array::try_from(map).map_err(BusySlotsError::Map)?;
    let placed = placement(&devs);
    for &(slot, dev) in &placed {
        let value = DevBusySlot {
            dev,
            ..DevBusySlot::default()
        };
        slots.set(slot, &value, 0).map_err(BusySlotsError::Map)?;
    }
    Ok((placed.len(), devs.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maj_min_and_refuses_the_rest() {
        assert_eq!(parse_dev("7:3\n"), Some(7 << 20 | 3));
        assert_eq!(parse_dev("259:0"), Some(259 << 20));
        assert_eq!(parse_dev("0:0"), None);
        assert_eq!(parse_dev("7"), None);
        assert_eq!(parse_dev("7:x"), None);
        assert_eq!(parse_dev("7:1048576"), None);
    }

    #[test]
    fn devices_take_distinct_slots_and_a_full_pair_leaves_one_out() {
        let devs: Vec<u32> = (0..40).map(|m| 8 << 20 | m).collect();
        let placed = placement(&devs);
        let mut slots: Vec<u32> = placed.iter().map(|&(s, _)| s).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), placed.len(), "a slot given twice");
        for &(slot, dev) in &placed {
            let (a, b) = dev_busy_slot_indexes(dev);
            assert!(slot == a || slot == b);
        }
        assert!(placed.len() >= 30, "only {} of 40 placed", placed.len());
        // Every slot taken: nothing more is placed.
        let many: Vec<u32> = (0..200).map(|m| 8 << 20 | m).collect();
        assert!(placement(&many).len() <= DEV_BUSY_SLOT_COUNT as usize);
    }

    #[test]
    fn reads_the_dev_files_of_a_sysfs_like_tree() {
        let root = tempfile::tempdir().expect("tempdir");
        for (name, dev) in [("loop0", "7:0\n"), ("sda", "8:0\n"), ("sda1", "8:1\n")] {
            std::fs::create_dir(root.path().join(name)).expect("mkdir");
            std::fs::write(root.path().join(name).join("dev"), dev).expect("write");
        }
        std::fs::create_dir(root.path().join("broken")).expect("mkdir");
        assert_eq!(
            block_devices(root.path()),
            vec![7 << 20, 8 << 20, 8 << 20 | 1]
        );
    }
}
