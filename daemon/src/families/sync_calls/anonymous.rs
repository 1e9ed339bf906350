//! Sync calls on anonymous-device filesystems (major 0), which a container host has by the
//! thousand. They have a map of their own in the kernel; at each scrape the keys of
//! pseudo filesystems (tmpfs, overlay, proc… anything but the writeback filesystems below) and
//! of filesystems no longer mounted are folded into one bounded series per call,
//! `device="pseudo"`, and removed from the map. So the map only holds what arrived since the
//! last scrape, series of unmounted filesystems disappear, and no count is lost on the way.

use std::collections::BTreeMap;

use probe_common::hist::Log2Hist;

use crate::kernel::mounts::{self, Mount};

/// The `device` label of the folded series.
pub const PSEUDO_DEVICE: &str = "pseudo";

/// Anonymous-device filesystems that do writeback of their own and keep a series per device.
fn keeps_own_series(fstype: &str) -> bool {
    matches!(
        fstype,
        "btrfs" | "nfs" | "nfs4" | "cifs" | "smb3" | "ceph" | "zfs"
    ) || fstype.starts_with("fuse")
}

/// What to do with one anonymous key at a scrape.
#[derive(Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Export under its own device label and keep the key.
    Own,
    /// Add to the `pseudo` series and remove the key.
    Fold,
}

/// The disposition of the key of device `major:minor` given the mount table.
pub fn disposition(table: &[Mount], major: u32, minor: u32) -> Disposition {
    match mounts::fstype_of(table, major, minor) {
        Some(fstype) if keeps_own_series(fstype) => Disposition::Own,
        _ => Disposition::Fold,
    }
}

/// Counts already folded into `device="pseudo"`, per raw syscall id.
#[derive(Default)]
pub struct Folded(BTreeMap<u32, Log2Hist>);

impl Folded {
    pub fn add(&mut self, syscall: u32, hist: &Log2Hist) {
        self.0.entry(syscall).or_insert(Log2Hist::ZERO).merge(hist);
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &Log2Hist)> {
        self.0.iter().map(|(s, h)| (*s, h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudo_and_unmounted_fold_writeback_filesystems_stay() {
        let table = mounts::parse(
            "1 0 0:40 / /run rw - tmpfs tmpfs rw\n\
             2 0 0:41 / /data rw - btrfs /dev/sdb rw\n\
             3 0 0:42 / /c1 rw - overlay overlay rw\n\
             4 0 0:43 / /m rw - fuse.sshfs x rw\n",
        );
        assert_eq!(disposition(&table, 0, 40), Disposition::Fold);
        assert_eq!(disposition(&table, 0, 41), Disposition::Own);
        assert_eq!(disposition(&table, 0, 42), Disposition::Fold);
        assert_eq!(disposition(&table, 0, 43), Disposition::Own);
        assert_eq!(disposition(&table, 0, 99), Disposition::Fold);
    }

    #[test]
    fn folding_adds_up() {
        let mut folded = Folded::default();
        let mut one = Log2Hist::ZERO;
        one.buckets[3] = 2;
        one.sum_ns = 10;
        folded.add(1, &one);
        folded.add(1, &one);
        let (syscall, hist) = folded.iter().next().unwrap();
        assert_eq!((syscall, hist.buckets[3], hist.sum_ns), (1, 4, 20));
    }
}
