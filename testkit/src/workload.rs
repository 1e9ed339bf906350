//! I/O patterns that drive writeback: buffered writes, fsync/fdatasync, sync_file_range,
//! sync and syncfs. The flush calls are timed on their own, since that latency is what
//! wbscope attributes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result, io_err, last_os_error};

/// `SYNC_FILE_RANGE_WAIT_BEFORE`: wait for writeback already in flight on the range.
pub const SFR_WAIT_BEFORE: u32 = 1;
/// `SYNC_FILE_RANGE_WRITE`: start writeback of dirty pages in the range.
pub const SFR_WRITE: u32 = 2;
/// `SYNC_FILE_RANGE_WAIT_AFTER`: wait for the writeback to complete.
pub const SFR_WAIT_AFTER: u32 = 4;

/// Chunk size used by the write-then-flush helpers.
const FLUSH_CHUNK: usize = 1 << 20;

/// Creates or truncates `path` and writes `bytes` of pseudo-random, non-zero data in
/// `chunk`-sized `write(2)` calls, without any flush. Non-zero so no filesystem can
/// treat the pages as holes; random so nothing compresses or deduplicates them.
pub fn write_file(path: &Path, bytes: u64, chunk: usize) -> Result<()> {
    let mut file = File::create(path).map_err(io_err(format!("create {}", path.display())))?;
    fill(&mut file, path, bytes, chunk)
}

/// Writes `bytes` to `path` like [`write_file`], then times only the `fsync(2)`.
pub fn write_and_fsync(path: &Path, bytes: u64) -> Result<Duration> {
    let file = File::create(path).map_err(io_err(format!("create {}", path.display())))?;
    let mut writer = &file;
    fill(&mut writer, path, bytes, FLUSH_CHUNK)?;
    let start = Instant::now();
    file.sync_all()
        .map_err(io_err(format!("fsync {}", path.display())))?;
    Ok(start.elapsed())
}

/// Writes `bytes` to `path` like [`write_file`], then times only the `fdatasync(2)`.
pub fn write_and_fdatasync(path: &Path, bytes: u64) -> Result<Duration> {
    let file = File::create(path).map_err(io_err(format!("create {}", path.display())))?;
    let mut writer = &file;
    fill(&mut writer, path, bytes, FLUSH_CHUNK)?;
    let start = Instant::now();
    file.sync_data()
        .map_err(io_err(format!("fdatasync {}", path.display())))?;
    Ok(start.elapsed())
}

/// Opens `path` for writing without truncating, for use with [`sync_file_range`].
pub fn open_for_write(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_err(format!("open {}", path.display())))
}

/// Calls `sync_file_range(2)` on `fd` with `flags` built from the `SFR_*` constants.
/// `nbytes == 0` means "to the end of the file", as in the syscall.
pub fn sync_file_range(fd: impl AsFd, offset: u64, nbytes: u64, flags: u32) -> Result<()> {
    let offset = i64::try_from(offset).map_err(|_| Error::Invalid("offset too large".into()))?;
    let nbytes = i64::try_from(nbytes).map_err(|_| Error::Invalid("nbytes too large".into()))?;
    let raw = fd.as_fd().as_raw_fd();
    // SAFETY: `raw` comes from a live `BorrowedFd` held for the duration of the call; the
    // syscall only reads its scalar arguments.
    let rc = unsafe { libc::sync_file_range(raw, offset, nbytes, flags) };
    if rc != 0 {
        return Err(last_os_error(format!(
            "sync_file_range(fd {raw}, flags {flags:#x})"
        )));
    }
    Ok(())
}

/// Runs `sync(2)` and returns how long it took; it cannot fail.
pub fn sync_all() -> Duration {
    let start = Instant::now();
    // SAFETY: sync takes no arguments and has no preconditions.
    unsafe { libc::sync() };
    start.elapsed()
}

/// Runs `syncfs(2)` on the filesystem containing `path` and returns how long it took.
pub fn syncfs(path: &Path) -> Result<Duration> {
    let handle = File::open(path).map_err(io_err(format!("open {}", path.display())))?;
    syncfs_file(&handle)
}

/// `syncfs(2)` on the filesystem of an open file, timed.
pub(crate) fn syncfs_file(file: &File) -> Result<Duration> {
    let start = Instant::now();
    // SAFETY: the descriptor belongs to `file`, which is borrowed for the whole call.
    if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
        return Err(last_os_error("syncfs"));
    }
    Ok(start.elapsed())
}

/// Writes `bytes` of generated data to `out` in `chunk`-sized pieces.
fn fill(out: &mut impl Write, path: &Path, bytes: u64, chunk: usize) -> Result<()> {
    if chunk == 0 {
        return Err(Error::Invalid("chunk size must be positive".into()));
    }
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ bytes);
    let mut buf = vec![0u8; chunk];
    let mut left = bytes;
    while left > 0 {
        let n = usize::try_from(left).map_or(chunk, |l| l.min(chunk));
        rng.fill(&mut buf[..n]);
        out.write_all(&buf[..n])
            .map_err(io_err(format!("write {}", path.display())))?;
        left -= n as u64;
    }
    Ok(())
}

/// A xorshift64 generator: enough to defeat compression and dedup, and dependency-free.
struct XorShift(u64);

impl XorShift {
    /// Fills `buf` with bytes in `1..=255`.
    fn fill(&mut self, buf: &mut [u8]) {
        for block in buf.chunks_mut(8) {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            for (byte, src) in block.iter_mut().zip(x.to_le_bytes()) {
                *byte = src | 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_exact_length_of_nonzero_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_file(&path, 10_000, 4096).unwrap();
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), 10_000);
        assert!(data.iter().all(|&b| b != 0));
        assert!(write_file(&path, 1, 0).is_err());
    }

    #[test]
    fn flush_helpers_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        write_and_fsync(&path, 8192).unwrap();
        write_and_fdatasync(&path, 8192).unwrap();
        let file = open_for_write(&path).unwrap();
        sync_file_range(&file, 0, 0, SFR_WAIT_BEFORE | SFR_WRITE | SFR_WAIT_AFTER).unwrap();
        syncfs(dir.path()).unwrap();
    }
}
