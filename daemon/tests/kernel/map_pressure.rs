//! A container host's pseudo filesystems against the sync-call maps: fsyncs on more tmpfs
//! superblocks than their map holds are counted (recorded under `device="pseudo"` or as
//! overflow, nothing lost silently), a real device's fdatasyncs still get their series, and the
//! series of a device that is gone disappear.

use std::{ffi::CString, io::Write as _, path::PathBuf};

use testkit::{FsKind, LoopFs, Scrape, workload};

use crate::harness::{TestDaemon, wbscope_lines};

const COUNT: &str = "wbscope_sync_call_duration_seconds_count";
const ANON_MAP: &str = "SYNC_CALL_LATENCY_ANON";

/// tmpfs mounts under one directory, all unmounted on drop (also on panic).
struct Tmpfs {
    dir: tempfile::TempDir,
    mounted: Vec<PathBuf>,
    made: usize,
}

impl Tmpfs {
    fn new() -> Tmpfs {
        Tmpfs {
            dir: tempfile::tempdir().expect("tempdir"),
            mounted: Vec::new(),
            made: 0,
        }
    }

    fn mount(&mut self) -> PathBuf {
        self.made += 1;
        let target = self.dir.path().join(format!("t{}", self.made));
        std::fs::create_dir(&target).expect("mount point");
        let c = |s: &str| CString::new(s).expect("no NUL");
        let path = c(target.to_str().expect("utf-8"));
        let (src, fstype, opts) = (c("wbscope-test"), c("tmpfs"), c("size=64k"));
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                path.as_ptr(),
                fstype.as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(rc, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        self.mounted.push(target.clone());
        target
    }

    fn unmount_all(&mut self) {
        for target in self.mounted.drain(..) {
            if let Ok(path) = CString::new(target.as_os_str().as_encoded_bytes()) {
                // SAFETY: umount2(2) with a NUL-terminated path; MNT_DETACH never blocks.
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        self.unmount_all();
    }
}

fn fsync_one(dir: &std::path::Path) {
    let mut f = std::fs::File::create(dir.join("f")).expect("create");
    f.write_all(b"x").expect("write");
    f.sync_all().expect("fsync");
}

fn overflows(s: &Scrape) -> f64 {
    s.sum("wbscope_map_overflows_total", &[("map", ANON_MAP)])
}

fn pseudo_fsyncs(s: &Scrape) -> f64 {
    s.sum(COUNT, &[("syscall", "fsync"), ("device", "pseudo")])
}

#[test]
#[ignore = "needs root: run with cargo xtask test"]
fn pseudo_filesystems_cannot_crowd_out_real_devices_and_every_loss_is_counted() {
    let daemon = TestDaemon::start();
    let before = daemon.scrape();
    let capacity = before.sum("wbscope_map_capacity", &[("map", ANON_MAP)]);
    assert!(capacity >= 256.0, "{}", wbscope_lines(&before));
    let mounts = capacity as usize + 200;

    // More tmpfs superblocks with an fsync each than the map holds, between two scrapes.
    let mut tmpfs = Tmpfs::new();
    for _ in 0..mounts {
        let dir = tmpfs.mount();
        fsync_one(&dir);
    }
    // A real device after the flood still gets its series.
    let fs = LoopFs::new(FsKind::Ext4, 64).expect("loop filesystem");
    let device = fs.loop_name().to_owned();
    for i in 0..5 {
        workload::write_and_fdatasync(&fs.mountpoint().join(format!("d{i}")), 4096)
            .expect("fdatasync");
    }
    let after = daemon.scrape();
    let real = after.sum(
        COUNT,
        &[("syscall", "fdatasync"), ("device", device.as_str())],
    );
    assert_eq!(real, 5.0, "{}", wbscope_lines(&after));
    let lost = overflows(&after) - overflows(&before);
    let recorded = pseudo_fsyncs(&after) - pseudo_fsyncs(&before);
    eprintln!(
        "{mounts} tmpfs fsyncs against a map of {capacity}: {recorded} recorded as pseudo, \
         {lost} counted as overflow"
    );
    assert!(
        lost >= (mounts as f64 - capacity),
        "overflow {lost} < {mounts} - {capacity}"
    );
    assert!(
        recorded + lost >= mounts as f64,
        "{recorded} recorded + {lost} lost < {mounts} fsyncs"
    );
    // No series per tmpfs: they are folded into one.
    let ours: std::collections::BTreeSet<String> = tmpfs
        .mounted
        .iter()
        .filter_map(|dir| std::fs::metadata(dir).ok())
        .map(|meta| {
            use std::os::unix::fs::MetadataExt as _;
            let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
            format!("{major}:{minor}")
        })
        .collect();
    assert_eq!(ours.len(), mounts, "one device number per tmpfs");
    let per_tmpfs: Vec<String> = after
        .samples(COUNT)
        .into_iter()
        .filter_map(|(labels, _)| labels.get("device").cloned())
        .filter(|device| ours.contains(device))
        .collect();
    assert!(per_tmpfs.is_empty(), "series of our tmpfs: {per_tmpfs:?}");

    // The scrape emptied the map: after unmounting, new fsyncs fit again, none overflows.
    tmpfs.unmount_all();
    for _ in 0..20 {
        let dir = tmpfs.mount();
        fsync_one(&dir);
    }
    let later = daemon.scrape();
    assert_eq!(
        overflows(&later),
        overflows(&after),
        "overflow after the map was emptied"
    );
    assert!(pseudo_fsyncs(&later) - pseudo_fsyncs(&after) >= 20.0);
    tmpfs.unmount_all();

    // The loop device goes: its series go with it.
    drop(fs);
    let gone = daemon.scrape();
    let left = gone.sum(
        COUNT,
        &[("syscall", "fdatasync"), ("device", device.as_str())],
    );
    assert_eq!(left, 0.0, "series of the removed {device} still exported");
}
