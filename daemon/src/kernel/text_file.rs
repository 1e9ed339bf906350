//! Reading the kernel's generated text files (procfs, debugfs, sysfs) at scrape time in as few
//! system calls as the kernel allows.
//!
//! `std::fs::read_to_string` asks for the file size first (`statx`; these files report 0) and
//! then reads in growing chunks from 32 bytes, so /proc/vmstat took ten calls. On hosts where a
//! system call costs half a microsecond (speculative-execution mitigations) and a scrape reads
//! some twenty such files, that was a visible part of every scrape. Here the buffer is reused
//! and each read asks for all its free room: a seq_file answers with as many whole lines as fit.
//!
//! The files are also kept open from one read to the next: the same dozen are read at every
//! scrape and by the stall-context sampler every second, and each `open` was a path walk through
//! procfs or debugfs (a third of the time these reads took). A read at offset 0 (`pread`) makes
//! a seq_file or sysfs attribute generate its text anew, so a kept descriptor reads what a fresh
//! one would. When the file went away (a removed device's debugfs or sysfs entry answers `EIO`
//! or `ENODEV`), the descriptor is dropped and the path opened again, which then fails as a
//! fresh open would.

use std::{
    borrow::Cow,
    cell::RefCell,
    collections::HashMap,
    fs::File,
    os::unix::fs::FileExt as _,
    path::{Path, PathBuf},
    sync::{Arc, LazyLock, Mutex},
};

/// Room for the largest of these files in one read: /proc/vmstat is about 5 KiB on 6.x kernels,
/// /proc/meminfo 1.5 KiB, a bdi's stats 0.5 KiB. Larger files still read whole, in more calls.
const FIRST_READ: usize = 16 * 1024;

/// A reusable buffer for reading kernel text files.
#[derive(Default)]
pub struct TextReader {
    /// Always fully initialised (zeroes past what the last read filled), so reads go straight
    /// into it; it grows only when a file fills it.
    buf: Vec<u8>,
}

impl TextReader {
    /// The whole file at `path` as text (invalid UTF-8 replaced), borrowed from the reader until
    /// the next read.
    pub fn read(&mut self, path: &Path) -> std::io::Result<Cow<'_, str>> {
        let filled = match OPEN_FILES.get(path) {
            Some(file) => match self.read_whole(&file) {
                Ok(filled) => filled,
                // Gone (or broken) since it was opened: open it again, as a first read would.
                Err(_) => {
                    OPEN_FILES.forget(path);
                    self.open_and_read(path)?
                }
            },
            None => self.open_and_read(path)?,
        };
        Ok(String::from_utf8_lossy(&self.buf[..filled]))
    }

    fn open_and_read(&mut self, path: &Path) -> std::io::Result<usize> {
        let file = File::open(path)?;
        let filled = self.read_whole(&file)?;
        OPEN_FILES.keep(path, file);
        Ok(filled)
    }

    /// Reads `file` from offset 0 to its end into the buffer; the bytes filled.
    fn read_whole(&mut self, file: &File) -> std::io::Result<usize> {
        // `File::read_to_end` would ask for the size (`statx`, `lseek`) first, which these files
        // do not know: plain reads into the buffer's whole free room instead.
        if self.buf.len() < FIRST_READ {
            self.buf.resize(FIRST_READ, 0);
        }
        let mut filled = 0;
        loop {
            if filled == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match file.read_at(&mut self.buf[filled..], filled as u64) {
                Ok(0) => return Ok(filled),
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Files kept open at most: a host with hundreds of bdis (one per FUSE or NFS mount) reads the
/// ones past this the plain way rather than holding a descriptor for each.
const FILES_KEPT: usize = 256;

/// The open kernel text files by path, shared by every thread (reads at an offset need no
/// shared file position).
static OPEN_FILES: LazyLock<OpenFiles> = LazyLock::new(OpenFiles::default);

#[derive(Default)]
struct OpenFiles(Mutex<HashMap<PathBuf, Arc<File>>>);

impl OpenFiles {
    fn get(&self, path: &Path) -> Option<Arc<File>> {
        self.0.lock().ok()?.get(path).cloned()
    }

    fn keep(&self, path: &Path, file: File) {
        if let Ok(mut files) = self.0.lock()
            && files.len() < FILES_KEPT
        {
            files.insert(path.to_owned(), Arc::new(file));
        }
    }

    fn forget(&self, path: &Path) {
        if let Ok(mut files) = self.0.lock() {
            files.remove(path);
        }
    }
}

thread_local! {
    /// One buffer per thread (the scrape runs on tokio's workers, which collect concurrently).
    static READER: RefCell<TextReader> = RefCell::default();
}

/// Reads the file at `path` whole and hands its text to `parse`, with this thread's buffer.
pub fn with_text<R>(path: &Path, parse: impl FnOnce(&str) -> R) -> std::io::Result<R> {
    READER.with(|reader| match reader.try_borrow_mut() {
        Ok(mut reader) => reader.read(path).map(|text| parse(&text)),
        // Called from inside `parse`: a buffer of its own.
        Err(_) => TextReader::default().read(path).map(|text| parse(&text)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_whole_files_small_and_larger_than_the_first_read() {
        let dir = std::env::temp_dir().join(format!("wbscope-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let small = dir.join("small");
        std::fs::write(&small, "nr_dirty 12\nnr_writeback 3\n").unwrap();
        let large = dir.join("large");
        let big: String = (0..5000).map(|i| format!("line_{i} {i}\n")).collect();
        assert!(big.len() > FIRST_READ);
        std::fs::write(&large, &big).unwrap();
        let mut reader = TextReader::default();
        assert_eq!(
            reader.read(&small).unwrap(),
            "nr_dirty 12\nnr_writeback 3\n"
        );
        assert_eq!(reader.read(&large).unwrap(), big);
        // The buffer is reused: a shorter file after a longer one has no leftovers.
        assert_eq!(
            reader.read(&small).unwrap(),
            "nr_dirty 12\nnr_writeback 3\n"
        );
        std::fs::write(&small, b"caf\xe9\n").unwrap();
        assert_eq!(reader.read(&small).unwrap(), "caf\u{fffd}\n");
        assert!(reader.read(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn procfs_files_read_whole() {
        let vmstat = with_text(Path::new("/proc/vmstat"), str::to_owned).unwrap();
        assert!(vmstat.contains("\nnr_dirty "), "{vmstat}");
        assert!(vmstat.ends_with('\n'));
        // A read inside another read's parse gets a buffer of its own.
        let both = with_text(Path::new("/proc/vmstat"), |outer| {
            let inner = with_text(Path::new("/proc/meminfo"), str::to_owned).unwrap();
            (outer.starts_with("nr_"), inner.starts_with("MemTotal:"))
        });
        assert_eq!(both.unwrap(), (true, true));
    }
}
