//! Naming devices as in /sys/class/block, so `device` labels join with node_exporter's.

use std::{
    collections::HashMap,
    path::Path,
    sync::{LazyLock, Mutex},
    time::{Duration, Instant},
};

/// Splits a kernel `dev_t` (`MAJOR << 20 | MINOR`, as in tracepoints and `super_block.s_dev`).
pub fn split_kernel_dev(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & ((1 << 20) - 1))
}

/// The block device name for `major:minor` (e.g. `loop3`, `nvme0n1p2`), read from the
/// `/sys/dev/block/MAJ:MIN` link; `MAJ:MIN` itself when it is not a block device (btrfs anonymous
/// devices, fuse, nfs), as docs/metrics.md documents.
pub fn block_name(major: u32, minor: u32) -> String {
    if major == UNNAMED_MAJOR {
        return format!("{major}:{minor}");
    }
    NAMES.name(major, minor, Instant::now(), |major, minor| {
        block_name_under(Path::new("/sys/dev/block"), major, minor)
    })
}

/// How long a device name read from sysfs is reused. A scrape names the same devices in many
/// families (the root disk came up nine times in one scrape), and each lookup is a path walk
/// through sysfs; within this time a scrape reads each device's link once. Short, because a
/// `dev_t` freed by a removed device can be handed to a new one with another name (NVMe
/// namespaces share the dynamic block major): a series keeps an old name at most this long.
const NAME_REUSE: Duration = Duration::from_secs(2);

/// Names kept at most; past it, expired names are dropped before a new one is added.
const NAMES_KEPT: usize = 4096;

static NAMES: LazyLock<NameCache> = LazyLock::new(NameCache::default);

/// Device names by `(major, minor)`, each with the time it was read.
#[derive(Default)]
struct NameCache {
    names: Mutex<HashMap<(u32, u32), (String, Instant)>>,
}

impl NameCache {
    /// The name of `major:minor`, from `lookup` unless it was read less than [`NAME_REUSE`]
    /// before `now`.
    fn name(
        &self,
        major: u32,
        minor: u32,
        now: Instant,
        lookup: impl FnOnce(u32, u32) -> String,
    ) -> String {
        let fresh = |read: &Instant| now.saturating_duration_since(*read) < NAME_REUSE;
        if let Ok(names) = self.names.lock()
            && let Some((name, _)) = names.get(&(major, minor)).filter(|(_, read)| fresh(read))
        {
            return name.clone();
        }
        // Looked up outside the lock: concurrent scrapes may both read the link, never wait.
        let name = lookup(major, minor);
        if let Ok(mut names) = self.names.lock() {
            if names.len() >= NAMES_KEPT {
                names.retain(|_, (_, read)| fresh(read));
            }
            if names.len() < NAMES_KEPT {
                names.insert((major, minor), (name.clone(), now));
            }
        }
        name
    }
}

/// Major 0 is the kernel's unnamed major (`UNNAMED_MAJOR`): anonymous devices of tmpfs, proc,
/// btrfs subvolumes, NFS and FUSE, never a block device. A scrape asks about every mount and
/// every device key, so these are answered without a system call.
const UNNAMED_MAJOR: u32 = 0;

fn block_name_under(root: &Path, major: u32, minor: u32) -> String {
    if major == UNNAMED_MAJOR {
        return format!("{major}:{minor}");
    }
    let link = root.join(format!("{major}:{minor}"));
    std::fs::read_link(&link)
        .ok()
        .and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("{major}:{minor}"))
}

/// Whether `major:minor` is a block device (its /sys/dev/block entry exists), with or without a
/// medium.
pub fn is_block_device(major: u32, minor: u32) -> bool {
    major != UNNAMED_MAJOR && Path::new(&format!("/sys/dev/block/{major}:{minor}")).exists()
}

/// Whether `major:minor` is a block device now with a medium: its /sys/dev/block entry exists
/// and its size is not 0 (a detached loop device stays as an empty device). When the size
/// cannot be read (e.g. out of descriptors) the device counts as present.
pub fn block_device_exists(major: u32, minor: u32) -> bool {
    if !is_block_device(major, minor) {
        return false;
    }
    match std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/size")) {
        Ok(size) => size.trim() != "0",
        Err(_) => true,
    }
}

/// The `device` label for a kernel `dev_t`; `unknown` for 0 (the probe could not resolve it).
pub fn label_for_kernel_dev(dev: u32) -> String {
    if dev == 0 {
        return "unknown".into();
    }
    let (major, minor) = split_kernel_dev(dev);
    block_name(major, minor)
}

/// The `device` label for a bdi name as writeback tracepoints print it: block bdis are named
/// `MAJ:MIN` and become the block device name; other bdis keep their name.
pub fn label_for_bdi(bdi: &str) -> String {
    match parse_bdi_dev(bdi) {
        Some((major, minor)) => block_name(major, minor),
        None => bdi.to_owned(),
    }
}

/// The `(major, minor)` of a block device's bdi, named `MAJ:MIN`; `None` for a bdi of
/// another kind (major 0: NFS, FUSE, btrfs) or another name.
pub fn parse_bdi_dev(bdi: &str) -> Option<(u32, u32)> {
    let (major, minor) = bdi.split_once(':')?;
    let dev = (major.parse().ok()?, minor.parse().ok()?);
    (dev.0 != UNNAMED_MAJOR).then_some(dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_dev_encoding() {
        assert_eq!(split_kernel_dev((254 << 20) | 1), (254, 1));
        assert_eq!(split_kernel_dev((7 << 20) | 300), (7, 300));
    }

    #[test]
    fn names_come_from_sysfs_links_or_fall_back_to_maj_min() {
        let dir = std::env::temp_dir().join(format!("wbscope-devtest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("7:3");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("../../devices/virtual/block/loop3", &link).unwrap();
        assert_eq!(block_name_under(&dir, 7, 3), "loop3");
        assert_eq!(block_name_under(&dir, 0, 45), "0:45");
        // Major 0 is never looked up, even where a link of that name exists.
        std::os::unix::fs::symlink("../../devices/virtual/block/loop9", dir.join("0:46")).unwrap();
        assert_eq!(block_name_under(&dir, 0, 46), "0:46");
        assert!(!is_block_device(0, 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_are_reused_briefly_then_read_again() {
        let cache = NameCache::default();
        let start = Instant::now();
        let reads = std::cell::Cell::new(0);
        let lookup = |name: &'static str| {
            let reads = &reads;
            move |_, _| {
                reads.set(reads.get() + 1);
                name.to_owned()
            }
        };
        assert_eq!(cache.name(259, 0, start, lookup("nvme0n1")), "nvme0n1");
        let soon = start + NAME_REUSE / 2;
        assert_eq!(cache.name(259, 0, soon, lookup("nvme1n1")), "nvme0n1");
        assert_eq!(reads.get(), 1);
        // Another device is looked up on its own.
        assert_eq!(cache.name(259, 1, soon, lookup("nvme0n1p1")), "nvme0n1p1");
        assert_eq!(reads.get(), 2);
        // A dev_t reused by another device gets its new name once the old one expires.
        let later = start + NAME_REUSE;
        assert_eq!(cache.name(259, 0, later, lookup("nvme1n1")), "nvme1n1");
        assert_eq!(reads.get(), 3);
    }

    #[test]
    fn a_full_cache_drops_expired_names_and_never_grows_past_its_bound() {
        let cache = NameCache::default();
        let start = Instant::now();
        for minor in 0..NAMES_KEPT as u32 {
            cache.name(7, minor, start, |_, m| format!("loop{m}"));
        }
        // Full of fresh names: a new device is answered but not kept.
        let soon = start + NAME_REUSE / 2;
        assert_eq!(cache.name(8, 0, soon, |_, _| "sda".into()), "sda");
        assert_eq!(cache.names.lock().unwrap().len(), NAMES_KEPT);
        // Once they expire they make room.
        let later = start + NAME_REUSE * 2;
        assert_eq!(cache.name(8, 0, later, |_, _| "sda".into()), "sda");
        assert_eq!(cache.names.lock().unwrap().len(), 1);
    }

    #[test]
    fn bdi_names() {
        assert_eq!(label_for_bdi("btrfs-1"), "btrfs-1");
        assert_eq!(label_for_bdi("x:y"), "x:y");
        assert_eq!(label_for_kernel_dev(0), "unknown");
        assert_eq!(label_for_bdi("0:53"), "0:53");
        assert_eq!(parse_bdi_dev("7:3"), Some((7, 3)));
        assert_eq!(
            parse_bdi_dev("0:53"),
            None,
            "NFS and FUSE bdis are no block devices"
        );
        assert_eq!(parse_bdi_dev("btrfs-1"), None);
        assert_eq!(parse_bdi_dev("7:x"), None);
    }
}
