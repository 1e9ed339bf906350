//! Reading the files an operator names (config, web config, certificates, keys): only regular
//! files, only up to a size limit, and never blocking on the open. `/dev/zero`, a FIFO or a
//! runaway file fail at once with an error that names the file and the limit, instead of
//! growing the heap until the OOM killer comes or waiting forever for a writer.

use std::{
    fs::File,
    io::Read as _,
    os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

/// The largest config file (TOML) read; real ones are a few hundred bytes.
pub const CONFIG_LIMIT: u64 = 1024 * 1024;
/// The largest web config file (YAML) read; bcrypt hashes are 60 bytes per user.
pub const WEB_CONFIG_LIMIT: u64 = 1024 * 1024;
/// The largest PEM file (certificate chain, key, client CA bundle) read.
pub const PEM_LIMIT: u64 = 1024 * 1024;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{} is larger than the limit of {limit} bytes", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
}

impl From<FileError> for std::io::Error {
    fn from(err: FileError) -> std::io::Error {
        match err {
            FileError::Io { source, .. } => source,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other),
        }
    }
}

/// What a non-regular file is, for the message.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Reads all of `path`, a regular file of at most `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It has no effect
    // on reading a regular file, the only kind read below.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(meta.file_type()),
        });
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    read_capped(file, path, limit)
}

/// Reads at most `limit` bytes; a file that grew past it since the size check is refused too.
fn read_capped(file: File, path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Io {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text(path: &Path, limit: u64) -> Result<String, FileError> {
    let bytes = read_bounded(path, limit)?;
    String::from_utf8(bytes).map_err(|e| FileError::Io {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "listen = \"[::1]:1\"\n").unwrap();
        assert_eq!(read_text(&path, 100).unwrap(), "listen = \"[::1]:1\"\n");
    }

    #[test]
    fn refuses_a_file_over_the_limit_by_name_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.toml");
        std::fs::write(&path, vec![b'#'; 101]).unwrap();
        let msg = read_bounded(&path, 100).unwrap_err().to_string();
        assert!(
            msg.contains("big.toml") && msg.contains("100 bytes"),
            "{msg}"
        );
    }

    #[test]
    fn refuses_dev_zero_at_once() {
        let msg = read_bounded(Path::new("/dev/zero"), 100)
            .unwrap_err()
            .to_string();
        assert_eq!(msg, "/dev/zero is a character device, not a regular file");
    }

    #[test]
    fn refuses_a_fifo_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo(3) with a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let msg = read_bounded(&path, 100).unwrap_err().to_string();
        assert!(msg.ends_with("is a FIFO, not a regular file"), "{msg}");
    }
}
