//! Root-only tests of the loop-device fixtures: they create real filesystems, throttle
//! them, and check that dropping (or panicking) leaves no kernel state behind.
//! Run with `cargo test -- --test-threads=1` so timings are not disturbed.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use crate::throttle::BLKIO_WRITE_BPS;
use crate::workload::{write_and_fsync, write_file};
use crate::{FsKind, LoopFs, require_root, wait_until, workload};

const MIB: u64 = 1024 * 1024;

/// What must be gone once a `LoopFs` has been dropped.
#[derive(Clone, Debug)]
struct Footprint {
    image: PathBuf,
    mountpoint: PathBuf,
    loop_name: String,
    dev: String,
}

impl Footprint {
    fn of(fs: &LoopFs) -> Footprint {
        Footprint {
            image: fs.image_path().to_owned(),
            mountpoint: fs.mountpoint().to_owned(),
            loop_name: fs.loop_name().to_owned(),
            dev: fs.dev_string(),
        }
    }

    fn assert_cleaned(&self) {
        let image = self.image.to_string_lossy().into_owned();
        let backing = PathBuf::from("/sys/block")
            .join(&self.loop_name)
            .join("loop/backing_file");
        // Detach can complete asynchronously (autoclear), so allow it a moment.
        let detached = wait_until(Duration::from_secs(3), Duration::from_millis(50), || {
            let listed = Command::new("losetup").arg("-a").output().unwrap();
            let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
            // The device number may already be reused by another test: only our image counts.
            let ours = fs::read_to_string(&backing).is_ok_and(|b| b.trim() == image);
            (!listed.contains(&image) && !ours).then_some(())
        });
        assert!(detached.is_some(), "{} still attached", self.loop_name);

        let rules = fs::read_to_string(BLKIO_WRITE_BPS).unwrap();
        assert!(
            !rules
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&self.dev)),
            "blkio rule for {} left behind: {rules}",
            self.dev
        );

        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mnt = self.mountpoint.to_string_lossy().into_owned();
        assert!(
            !mountinfo.lines().any(|l| l.split(' ').nth(4) == Some(&mnt)),
            "{mnt} still mounted"
        );
        assert!(!self.mountpoint.exists(), "{mnt} not removed");
        assert!(!self.image.exists(), "{image} not removed");
    }
}

/// Writes, throttles to 2 MiB/s, and checks a 2 MiB fsync is slowed accordingly.
fn throttled_fsync(kind: FsKind, size_mib: u64) {
    if !require_root() {
        return;
    }
    let fs = LoopFs::new(kind, size_mib).unwrap();
    assert!(fs.loop_name().starts_with("loop"));
    let (major, minor) = fs.major_minor();
    assert_eq!(fs.dev_string(), format!("{major}:{minor}"));
    assert_eq!(fs.kernel_dev(), (major << 20) | minor);

    write_file(&fs.mountpoint().join("warmup"), 4 * MIB, 64 * 1024).unwrap();
    // Flush the warm-up data while still unthrottled so the timed fsync covers only its own.
    workload::syncfs(fs.mountpoint()).unwrap();
    fs.throttle_write_bps(2 * MIB).unwrap();
    let rules = fs::read_to_string(BLKIO_WRITE_BPS).unwrap();
    assert!(
        rules.contains(&format!("{} {}", fs.dev_string(), 2 * MIB)),
        "{rules}"
    );

    let took = write_and_fsync(&fs.mountpoint().join("slow"), 2 * MIB).unwrap();
    eprintln!("{kind:?}: fsync of 2 MiB at 2 MiB/s took {took:?}");
    assert!(
        took >= Duration::from_millis(700),
        "fsync took only {took:?}"
    );

    let footprint = Footprint::of(&fs);
    drop(fs);
    footprint.assert_cleaned();
}

#[test]
fn ext4_throttled_fsync_and_cleanup() {
    throttled_fsync(FsKind::Ext4, 64);
}

#[test]
fn xfs_throttled_fsync_and_cleanup() {
    // mkfs.xfs refuses filesystems under 300 MiB; the image is sparse, so this is cheap.
    throttled_fsync(FsKind::Xfs, 512);
}

#[test]
fn cleanup_runs_on_panic() {
    if !require_root() {
        return;
    }
    let seen = Mutex::new(None);
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let fs = LoopFs::new(FsKind::Ext4, 64).unwrap();
        fs.throttle_write_bps(MIB).unwrap();
        write_file(&fs.mountpoint().join("dirty"), MIB, 4096).unwrap();
        *seen.lock().unwrap() = Some(Footprint::of(&fs));
        panic!("deliberate panic while holding a throttled LoopFs");
    }));
    assert!(result.is_err(), "the closure must have panicked");
    let footprint = seen.lock().unwrap().clone().unwrap();
    footprint.assert_cleaned();
}

#[test]
fn scheduler_and_bdi_limits_are_restored() {
    if !require_root() {
        return;
    }
    let fs = LoopFs::new(FsKind::Ext4, 64).unwrap();
    let sched = fs.sysfs_dir().join("queue/scheduler");
    let bdi = PathBuf::from("/sys/class/bdi").join(fs.dev_string());
    let read = |p: PathBuf| fs::read_to_string(p).unwrap().trim().to_owned();
    let before = (
        read(sched.clone()),
        read(bdi.join("strict_limit")),
        read(bdi.join("max_ratio")),
    );
    let target = if before.0.contains("[mq-deadline]") {
        "none"
    } else {
        "mq-deadline"
    };
    fs.set_scheduler(target).unwrap();
    assert!(read(sched.clone()).contains(&format!("[{target}]")));
    fs.limit_bdi_dirty(4 * MIB).unwrap();
    assert_eq!(read(bdi.join("strict_limit")), "1");
    // The kernel stores max_bytes as a fraction of the dirty limit, so it reads back
    // rounded down, not exactly.
    let max_bytes: u64 = read(bdi.join("max_bytes")).parse().unwrap();
    assert!(
        max_bytes > 0 && max_bytes <= 4 * MIB,
        "max_bytes {max_bytes}"
    );
    // A buffered write under the strict limit must still complete.
    write_file(&fs.mountpoint().join("capped"), 8 * MIB, 1 << 20).unwrap();

    let footprint = Footprint::of(&fs);
    drop(fs);
    footprint.assert_cleaned();
    let after = (
        read(sched),
        read(bdi.join("strict_limit")),
        read(bdi.join("max_ratio")),
    );
    assert_eq!(before, after);
}

#[test]
fn busy_mount_falls_back_to_lazy_unmount() {
    if !require_root() {
        return;
    }
    let fs = LoopFs::new(FsKind::Ext4, 64).unwrap();
    // An open file keeps the mount busy through every unmount retry.
    let holder = workload::open_for_write(&fs.mountpoint().join("held")).unwrap();
    let footprint = Footprint::of(&fs);
    drop(fs);
    // Once the last user is gone, the lazy unmount and deferred detach complete.
    drop(holder);
    footprint.assert_cleaned();
}

#[test]
fn failed_construction_releases_the_device() {
    if !require_root() {
        return;
    }
    let ours = || {
        let out = Command::new("losetup").arg("-a").output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .matches("wbscope-loopfs-")
            .count()
    };
    let before = ours();
    // mkfs.xfs rejects a 16 MiB filesystem after the loop device has been attached.
    assert!(LoopFs::new(FsKind::Xfs, 16).is_err());
    assert_eq!(ours(), before, "loop device leaked by a failed LoopFs::new");
}
