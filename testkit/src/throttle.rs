//! Kernel knobs that make a `LoopFs` behave like a slow or tightly limited disk. Each one
//! registers its revert with the fixture, so nothing outlives the test.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::loopfs::LoopFs;
use crate::sys::{read_attr, write_attr};

/// The root cgroup v1 blkio write-bandwidth rule file. Root, because buffered writeback is
/// issued by flusher threads in the root cgroup under v1, and this process is there too.
pub const BLKIO_WRITE_BPS: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";

impl LoopFs {
    /// Limits writes to this device to `bytes_per_sec` with the v1 blkio throttle, and
    /// registers the revert (`"MAJ:MIN 0"`, which deletes the rule).
    /// On a pure cgroup v2 host (no v1 blkio), the rule is an `io.max` line of a cgroup this
    /// process moves into (see [`LoopFs::throttle_write_bps_v2`]).
    pub fn throttle_write_bps(&self, bytes_per_sec: u64) -> Result<()> {
        if !Path::new(BLKIO_WRITE_BPS).exists() && crate::cgroup2::is_cgroup2_root() {
            return self.throttle_write_bps_v2(bytes_per_sec);
        }
        let path = Path::new(BLKIO_WRITE_BPS);
        let dev = self.dev_string();
        write_attr(path, &format!("{dev} {bytes_per_sec}"))?;
        self.undo
            .push(format!("blkio write_bps rule for {dev}"), move || {
                write_attr(path, &format!("{dev} 0"))
            });
        Ok(())
    }

    /// The cgroup v2 form of [`LoopFs::throttle_write_bps`]. The root cgroup takes no `io.max`,
    /// so the rule goes into `wbscope-throttle-<pid>`, and this process (and so every child it
    /// starts) moves there: its direct writes and, with cgroup writeback, the writeback of the
    /// pages it dirtied are throttled, as the v1 root rule throttles them. The revert removes
    /// the rule and, once the cgroup has none left, moves the process back and removes it.
    fn throttle_write_bps_v2(&self, bytes_per_sec: u64) -> Result<()> {
        let root = Path::new(crate::cgroup2::ROOT);
        let dir = root.join(format!("wbscope-throttle-{}", std::process::id()));
        let io_max = dir.join("io.max");
        let dev = self.dev_string();
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(crate::error::io_err(format!("mkdir {}", dir.display()))(e));
            }
        }
        let revert_io_max = io_max.clone();
        let revert_dev = dev.clone();
        let procs = root.join("cgroup.procs");
        self.undo.push(
            format!("io.max write rule for {dev} in {}", dir.display()),
            move || {
                let removed = write_attr(&revert_io_max, &format!("{revert_dev} wbps=max"));
                let rules = read_attr(&revert_io_max).unwrap_or_default();
                if rules.lines().all(|l| l.trim().is_empty()) {
                    write_attr(&procs, &std::process::id().to_string())?;
                    // Busy while a child that ran inside is not yet reaped; a later run reuses it.
                    let _ = std::fs::remove_dir(revert_io_max.parent().unwrap_or(Path::new("")));
                }
                removed
            },
        );
        write_attr(&io_max, &format!("{dev} wbps={bytes_per_sec}"))?;
        write_attr(&dir.join("cgroup.procs"), &std::process::id().to_string())
    }

    /// Switches the device's I/O scheduler (e.g. `"mq-deadline"`, `"bfq"`, `"none"`) and
    /// registers a revert to the one that was active (the `[bracketed]` entry) before.
    pub fn set_scheduler(&self, name: &str) -> Result<()> {
        let path = self.sysfs_dir().join("queue/scheduler");
        let current = read_attr(&path)?;
        let previous = active_scheduler(&current).ok_or_else(|| {
            Error::Invalid(format!(
                "{}: no [active] entry in {current:?}",
                path.display()
            ))
        })?;
        write_attr(&path, name)?;
        self.undo.push(
            format!("scheduler of {} back to {previous}", self.loop_name()),
            move || write_attr(&path, &previous),
        );
        Ok(())
    }

    /// Caps the device's share of dirty page cache at `max_bytes` and makes the cap strict
    /// (`strict_limit=1`), so writers are throttled in `balance_dirty_pages` even below the
    /// global thresholds. The revert restores the previous `strict_limit` and `max_ratio`
    /// (normally 0 and 100) rather than writing `max_bytes=0`, which would set the ratio to 0.
    /// Where the kernel has no `strict_limit` knob, the global dirty limits stand in for it.
    pub fn limit_bdi_dirty(&self, max_bytes: u64) -> Result<()> {
        let bdi = PathBuf::from("/sys/class/bdi").join(self.dev_string());
        let strict = bdi.join("strict_limit");
        let ratio = bdi.join("max_ratio");
        if !strict.exists() {
            // Kernels before 6.2 have no per-bdi byte limit or strict_limit knob.
            return self.limit_global_dirty(max_bytes);
        }
        let previous_strict = read_attr(&strict)?;
        let previous_ratio = read_attr(&ratio)?;
        // Registered before writing, so a failure half-way is still reverted.
        self.undo.push(
            format!(
                "bdi {} strict_limit={previous_strict} max_ratio={previous_ratio}",
                self.dev_string()
            ),
            move || {
                let strict_result = write_attr(&strict, &previous_strict);
                // Restore the ratio even if the first write failed: they are independent.
                write_attr(&ratio, &previous_ratio).and(strict_result)
            },
        );
        write_attr(&bdi.join("strict_limit"), "1")?;
        write_attr(&bdi.join("max_bytes"), &max_bytes.to_string())
    }
}

impl LoopFs {
    /// The fallback of `limit_bdi_dirty` where the bdi has no `strict_limit`: the global
    /// `vm.dirty_bytes` = `max_bytes` and `vm.dirty_background_bytes` = half of it, so a writer
    /// past the midpoint is throttled in `balance_dirty_pages` on the global threshold. Only
    /// sound where this test is the only writer (a VM). Each knob is restored as it was: its
    /// bytes value if set, else its ratio (writing one zeroes the other).
    fn limit_global_dirty(&self, max_bytes: u64) -> Result<()> {
        for (bytes, ratio, value) in [
            ("dirty_bytes", "dirty_ratio", max_bytes),
            (
                "dirty_background_bytes",
                "dirty_background_ratio",
                max_bytes / 2,
            ),
        ] {
            let bytes = Path::new("/proc/sys/vm").join(bytes);
            let ratio = Path::new("/proc/sys/vm").join(ratio);
            let previous_bytes = read_attr(&bytes)?;
            let previous_ratio = read_attr(&ratio)?;
            let (restore, previous) = if previous_bytes.trim() == "0" {
                (ratio, previous_ratio)
            } else {
                (bytes.clone(), previous_bytes)
            };
            self.undo.push(
                format!("{} back to {previous}", restore.display()),
                move || write_attr(&restore, &previous),
            );
            write_attr(&bytes, &value.to_string())?;
        }
        Ok(())
    }
}

/// The `[bracketed]` entry of a `queue/scheduler` listing such as `"[none] mq-deadline"`.
fn active_scheduler(listing: &str) -> Option<String> {
    listing
        .split_whitespace()
        .find_map(|word| word.strip_prefix('[')?.strip_suffix(']'))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::active_scheduler;

    #[test]
    fn finds_bracketed_scheduler() {
        assert_eq!(
            active_scheduler("none [mq-deadline] kyber bfq").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(active_scheduler("[none]").as_deref(), Some("none"));
        assert_eq!(active_scheduler("none mq-deadline"), None);
    }
}
