//! The one error type of the crate, so that tests can use `?` across all fixtures.

use std::io;

/// Everything a fixture can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call or file operation failed; `what` names the operation and its target.
    #[error("{what}: {source}")]
    Io {
        /// The operation and its target, e.g. "write /sys/block/loop3/queue/scheduler".
        what: String,
        /// The underlying OS error.
        #[source]
        source: io::Error,
    },
    /// An external tool (losetup, mkfs.*) could not be run or exited unsuccessfully.
    #[error("command `{command}` failed: {detail}")]
    Command {
        /// The command line, for the reader of the test log.
        command: String,
        /// Exit status and captured stderr, or the spawn error.
        detail: String,
    },
    /// A line of Prometheus text exposition could not be parsed.
    #[error("metrics line {line}: {reason}")]
    Parse {
        /// 1-based line number in the scraped text.
        line: usize,
        /// What was wrong with it.
        reason: String,
    },
    /// The metrics endpoint answered with something other than a usable 200 response.
    #[error("http: {0}")]
    Http(String),
    /// Kernel-provided data (sysfs content, argument ranges) was not what the fixture expects.
    #[error("invalid: {0}")]
    Invalid(String),
}

/// Result alias used by every fallible function of the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an `io::Error` with a description of what was being attempted, because a bare
/// "Device or resource busy" in a test log does not say which file or device was meant.
pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// The error left in `errno` by the last failing libc call, with context.
pub(crate) fn last_os_error(what: impl Into<String>) -> Error {
    Error::Io {
        what: what.into(),
        source: io::Error::last_os_error(),
    }
}
