//! Small helpers for the kernel's text interfaces (sysfs, cgroupfs) and for external tools.

use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use crate::error::{Error, Result, io_err};

/// Reads a sysfs/cgroupfs attribute and trims the trailing newline the kernel appends.
pub(crate) fn read_attr(path: &Path) -> Result<String> {
    let text = fs::read_to_string(path).map_err(io_err(format!("read {}", path.display())))?;
    Ok(text.trim().to_owned())
}

/// Writes a sysfs/cgroupfs attribute with a single `write(2)`, because these files parse
/// each write separately and a split write would be rejected or misread.
pub(crate) fn write_attr(path: &Path, value: &str) -> Result<()> {
    let what = format!("write {:?} to {}", value, path.display());
    let mut file = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(what.clone()))?;
    file.write_all(value.as_bytes()).map_err(io_err(what))
}

/// Runs a tool to completion and returns its trimmed stdout; a non-zero exit becomes an
/// error carrying stderr, since that is where losetup and mkfs explain themselves.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::Command {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if !output.status.success() {
        return Err(Error::Command {
            command,
            detail: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Converts a path for libc calls; interior NULs cannot occur in paths we build, but a
/// caller-supplied path could contain one, so it is an error rather than a panic.
pub(crate) fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Invalid(format!("path contains NUL: {}", path.display())))
}

/// Prints a warning to stderr without ever panicking: `eprintln!` panics when stderr is
/// closed, and this is called from `Drop`, possibly while already unwinding.
pub(crate) fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "testkit: {message}");
}
