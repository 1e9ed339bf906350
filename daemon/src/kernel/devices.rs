//! Naming devices as in /sys/class/block, so `device` labels join with node_exporter's.

use std::path::Path;

/// Splits a kernel `dev_t` (`MAJOR << 20 | MINOR`, as in tracepoints and `super_block.s_dev`).
pub fn split_kernel_dev(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & ((1 << 20) - 1))
}

/// The block device name for `major:minor` (e.g. `loop3`, `nvme0n1p2`), read from the
/// `/sys/dev/block/MAJ:MIN` link; `MAJ:MIN` itself when it is not a block device (btrfs anonymous
/// devices, fuse, nfs), as docs/metrics.md documents.
pub fn block_name(major: u32, minor: u32) -> String {
    block_name_under(Path::new("/sys/dev/block"), major, minor)
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
    match bdi.split_once(':') {
        Some((major, minor)) => match (major.parse(), minor.parse()) {
            (Ok(major), Ok(minor)) => block_name(major, minor),
            _ => bdi.to_owned(),
        },
        None => bdi.to_owned(),
    }
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
    fn bdi_names() {
        assert_eq!(label_for_bdi("btrfs-1"), "btrfs-1");
        assert_eq!(label_for_bdi("x:y"), "x:y");
        assert_eq!(label_for_kernel_dev(0), "unknown");
    }
}
