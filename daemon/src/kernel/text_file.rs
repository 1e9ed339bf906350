//! Reading the kernel's generated text files (procfs, debugfs, sysfs) at scrape time in as few
//! system calls as the kernel allows.
//!
//! `std::fs::read_to_string` asks for the file size first (`statx`; these files report 0) and
//! then reads in growing chunks from 32 bytes, so /proc/vmstat took ten calls. On hosts where a
//! system call costs half a microsecond (speculative-execution mitigations) and a scrape reads
//! some twenty such files, that was a visible part of every scrape. Here the buffer is reused
//! and each read asks for all its free room: a seq_file answers with as many whole lines as fit,
//! so a file is an `open`, one `read` with its contents, one `read` that finds the end and a
//! `close`.

use std::{borrow::Cow, cell::RefCell, fs::File, io::Read as _, path::Path};

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
        // `File::read_to_end` would ask for the size (`statx`, `lseek`) first, which these files
        // do not know: plain reads into the buffer's whole free room instead.
        let mut file = File::open(path)?;
        if self.buf.len() < FIRST_READ {
            self.buf.resize(FIRST_READ, 0);
        }
        let mut filled = 0;
        loop {
            if filled == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match file.read(&mut self.buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(String::from_utf8_lossy(&self.buf[..filled]))
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
