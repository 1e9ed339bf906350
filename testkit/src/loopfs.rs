//! A scratch filesystem on a loop device, torn down (with every registered kernel change)
//! when dropped, including during a panic.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use tempfile::TempDir;

use crate::error::{Error, Result, io_err, last_os_error};
use crate::sys::{c_path, read_attr, run, warn};
use crate::undo::UndoStack;

/// How often and how long `Drop` retries an unmount that fails with `EBUSY` (e.g. a
/// writer thread that has not closed its file yet) before falling back to a lazy unmount.
const UNMOUNT_RETRIES: u32 = 20;
/// Pause between busy retries of unmount and loop detach.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Attempts at `losetup -d`, which can fail transiently while udev still holds the device.
const DETACH_RETRIES: u32 = 5;

/// The filesystem to create on the loop device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    /// ext4 via `mkfs.ext4 -q -F`.
    Ext4,
    /// XFS via `mkfs.xfs -q -f`; recent xfsprogs refuse images smaller than 300 MiB.
    Xfs,
}

impl FsKind {
    /// The name `mount(2)` expects as the filesystem type.
    pub fn fstype(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
        }
    }

    /// The mkfs program and its flags; `-F`/`-f` because the image is a regular file
    /// (ext4) or may carry an old signature (xfs) and mkfs would otherwise ask.
    fn mkfs(self) -> (&'static str, &'static [&'static str]) {
        match self {
            FsKind::Ext4 => ("mkfs.ext4", &["-q", "-F"]),
            FsKind::Xfs => ("mkfs.xfs", &["-q", "-f"]),
        }
    }
}

/// A mounted filesystem on a freshly attached loop device backed by a sparse image in a
/// temporary directory. Dropping it reverts registered changes (newest first), syncs,
/// unmounts, detaches the device and removes the directory, reporting failures on stderr.
pub struct LoopFs {
    kind: FsKind,
    /// `None` only after `Drop` has taken it.
    dir: Option<TempDir>,
    image: PathBuf,
    mountpoint: PathBuf,
    /// Empty until `losetup` has attached the image, so `Drop` knows whether to detach.
    loop_name: String,
    major: u32,
    minor: u32,
    mounted: bool,
    pub(crate) undo: UndoStack,
}

impl LoopFs {
    /// Creates a `size_mib` MiB sparse image, attaches it to a free loop device, makes a
    /// `kind` filesystem on it and mounts it. Needs root. On error, whatever was already
    /// set up is torn down before returning.
    pub fn new(kind: FsKind, size_mib: u64) -> Result<LoopFs> {
        let dir = tempfile::Builder::new()
            .prefix("wbscope-loopfs-")
            .tempdir()
            .map_err(io_err("create temp dir"))?;
        let image = dir.path().join("disk.img");
        let mountpoint = dir.path().join("mnt");
        let file = File::create(&image).map_err(io_err(format!("create {}", image.display())))?;
        // set_len leaves the file sparse, so a large image costs no disk until written.
        file.set_len(size_mib * 1024 * 1024)
            .map_err(io_err(format!("size {}", image.display())))?;
        drop(file);
        fs::create_dir(&mountpoint).map_err(io_err(format!("mkdir {}", mountpoint.display())))?;

        // From here on `fs` owns every step, so an early return runs Drop's cleanup.
        let mut fs = LoopFs {
            kind,
            dir: Some(dir),
            image,
            mountpoint,
            loop_name: String::new(),
            major: 0,
            minor: 0,
            mounted: false,
            undo: UndoStack::default(),
        };
        let image_arg = fs.image.to_string_lossy().into_owned();
        // `-f --show` picks and attaches a free device atomically; a fixed number could be
        // in use by another test.
        let device = run("losetup", &["-f", "--show", &image_arg])?;
        fs.loop_name = Path::new(&device)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if fs.loop_name.is_empty() {
            return Err(Error::Invalid(format!("losetup printed {device:?}")));
        }
        (fs.major, fs.minor) = read_dev_numbers(&fs.loop_name)?;

        let (mkfs, flags) = kind.mkfs();
        let device_arg = fs.device_path().to_string_lossy().into_owned();
        let mut args = flags.to_vec();
        args.push(&device_arg);
        run(mkfs, &args)?;
        mount(&fs.device_path(), &fs.mountpoint, kind.fstype())?;
        fs.mounted = true;
        Ok(fs)
    }

    /// The filesystem type this fixture was created with.
    pub fn kind(&self) -> FsKind {
        self.kind
    }

    /// Where the filesystem is mounted; put test files here.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The backing image file, which `losetup -a` lists while the device is attached.
    pub fn image_path(&self) -> &Path {
        &self.image
    }

    /// The block device name without `/dev/`, e.g. `"loop3"`.
    pub fn loop_name(&self) -> &str {
        &self.loop_name
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn device_path(&self) -> PathBuf {
        Path::new("/dev").join(&self.loop_name)
    }

    /// Major and minor number, as read from `/sys/block/<name>/dev` when attached.
    pub fn major_minor(&self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// `"MAJ:MIN"`, the form cgroup files and `/sys/class/bdi` use.
    pub fn dev_string(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }

    /// The in-kernel `dev_t` encoding (`MAJOR << 20 | MINOR`), as BPF programs see it in
    /// `super_block->s_dev` or `bio->bi_bdev->bd_dev`; it differs from userspace `st_rdev`.
    pub fn kernel_dev(&self) -> u32 {
        (self.major << 20) | self.minor
    }

    /// Remounts the filesystem with extra mount options (e.g. `lazytime`). Nothing to undo: the
    /// mount goes away with the fixture.
    pub fn remount(&self, options: &str) -> Result<()> {
        let options = format!("remount,{options}");
        let mountpoint = self.mountpoint.to_string_lossy().into_owned();
        crate::sys::run("mount", &["-o", &options, &mountpoint]).map(|_| ())
    }

    /// `/sys/block/<name>`, the root of the device's queue attributes.
    pub(crate) fn sysfs_dir(&self) -> PathBuf {
        Path::new("/sys/block").join(&self.loop_name)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        // Reverts first: a throttle left in place would make the sync below crawl.
        let mut failures = self.undo.run_all();
        if self.mounted {
            if let Err(e) = syncfs_dir(&self.mountpoint) {
                failures.push(format!("sync {}: {e}", self.mountpoint.display()));
            }
            match unmount(&self.mountpoint) {
                Ok(()) => self.mounted = false,
                Err(e) => failures.push(format!("unmount {}: {e}", self.mountpoint.display())),
            }
        }
        if !self.loop_name.is_empty()
            && let Err(e) = detach(&self.device_path())
        {
            failures.push(format!("detach {}: {e}", self.device_path().display()));
        }
        if let Some(dir) = self.dir.take() {
            if self.mounted {
                // Removing the tree would delete the still-mounted filesystem's contents
                // and then fail on the mountpoint; leave it for a human to inspect.
                let kept = dir.keep();
                failures.push(format!("left {} in place (still mounted)", kept.display()));
            } else if let Err(e) = dir.close() {
                failures.push(format!("remove temp dir: {e}"));
            }
        }
        for failure in failures {
            warn(&format!("could not undo: {failure}"));
        }
    }
}

/// Parses `/sys/block/<name>/dev` ("7:3").
fn read_dev_numbers(name: &str) -> Result<(u32, u32)> {
    let text = read_attr(&Path::new("/sys/block").join(name).join("dev"))?;
    let parsed = text
        .split_once(':')
        .and_then(|(ma, mi)| Some((ma.parse().ok()?, mi.parse().ok()?)));
    parsed.ok_or_else(|| Error::Invalid(format!("/sys/block/{name}/dev is {text:?}")))
}

/// Mounts `device` on `target` with `mount(2)`, which reports the errno that the `mount`
/// tool would bury in prose.
fn mount(device: &Path, target: &Path, fstype: &str) -> Result<()> {
    let source = c_path(device)?;
    let target_c = c_path(target)?;
    let fstype_c = c_path(Path::new(fstype))?;
    // SAFETY: all three pointers are valid NUL-terminated strings that outlive the call,
    // and a null `data` pointer means "no filesystem options".
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target_c.as_ptr(),
            fstype_c.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(last_os_error(format!(
            "mount {} on {}",
            device.display(),
            target.display()
        )));
    }
    Ok(())
}

/// Flushes the filesystem containing `dir` with `syncfs(2)`.
pub(crate) fn syncfs_dir(dir: &Path) -> Result<()> {
    let handle = File::open(dir).map_err(io_err(format!("open {}", dir.display())))?;
    crate::workload::syncfs_file(&handle).map(|_| ())
}

/// Unmounts, retrying while busy and detaching lazily as a last resort so the device can
/// at least be released once the last user goes away.
fn unmount(target: &Path) -> Result<()> {
    let target_c = c_path(target)?;
    for _ in 0..UNMOUNT_RETRIES {
        // SAFETY: `target_c` is a valid NUL-terminated path that outlives the call.
        if unsafe { libc::umount2(target_c.as_ptr(), 0) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EBUSY) {
            return Err(Error::Io {
                what: format!("umount {}", target.display()),
                source: err,
            });
        }
        thread::sleep(RETRY_PAUSE);
    }
    // SAFETY: as above; MNT_DETACH is a valid flag for umount2.
    if unsafe { libc::umount2(target_c.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(last_os_error(format!("lazy umount {}", target.display())));
    }
    warn(&format!(
        "{} was busy; unmounted lazily, the device is released when its last user exits",
        target.display()
    ));
    Ok(())
}

/// Detaches the loop device; the kernel defers the detach (autoclear) while it is still
/// open, e.g. after a lazy unmount.
fn detach(device: &Path) -> Result<()> {
    let device_arg = device.to_string_lossy();
    let mut last = None;
    for _ in 0..DETACH_RETRIES {
        match run("losetup", &["-d", &device_arg]) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
        thread::sleep(RETRY_PAUSE);
    }
    Err(last.unwrap_or_else(|| Error::Invalid("detach never attempted".into())))
}
