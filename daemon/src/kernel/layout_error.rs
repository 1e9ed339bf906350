//! Why a fact about the running kernel could not be resolved. The message is the reason
//! `wbscope check` prints for each probe (or part of a family) that needs the fact, so each
//! variant says what the kernel lacks or how it differs from what the probe reads.

use std::sync::Arc;

use super::{btf::BtfError, debugfs::DebugfsError, tracefs::TracefsError};

/// A kernel fact that could not be resolved. Cloned into the report of every probe that needs
/// it, hence the shared sources.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LayoutError {
    /// There is no kernel BTF to read (or the daemon's parse was released after loading).
    #[error("no kernel BTF: {0}")]
    NoBtf(Arc<BtfError>),
    /// The daemon's own parse of kernel BTF was released once the probes were resolved.
    #[error("no kernel BTF: released after resolving the probes")]
    BtfReleased,
    /// Kernel BTF lacks a type, member, enumerator or tracepoint prototype.
    #[error(transparent)]
    Btf(Arc<BtfError>),
    /// A tracepoint's format is missing or unreadable, or lacks a field.
    #[error(transparent)]
    Tracefs(Arc<TracefsError>),
    /// A record field of a size the probe does not read.
    #[error("{event}: field `{field}` has unexpected size {size}")]
    FieldSize {
        event: String,
        field: String,
        size: u32,
    },
    /// A struct member of a size the probe does not read.
    #[error("{ty}.{member} has size {actual}, expected {expected}")]
    MemberSize {
        ty: String,
        member: String,
        actual: u32,
        expected: u32,
    },
    /// A BTF-typed tracepoint whose arguments are not where the probe reads them.
    #[error("tp_btf {event}{detail}")]
    Prototype { event: String, detail: String },
    /// A value the kernel defines outside the range the probe can use.
    #[error("{what} = {value} is out of range")]
    OutOfRange { what: String, value: i64 },
    /// Events the probe reads through one shared layout that differ on this kernel.
    #[error("{event} record layout differs from {reference}")]
    LayoutsDiffer { event: String, reference: String },
    /// debugfs (the per-device writeback state) is neither mounted nor mountable.
    #[error(transparent)]
    Debugfs(Arc<DebugfsError>),
    /// A fact read from a /proc or /sys file (not BTF or tracefs).
    #[error("{path}: {reason}")]
    File { path: &'static str, reason: String },
    /// A kernel difference the probe does not follow, with the reason (and any cause) spelled
    /// out where it is detected.
    #[error("{0}")]
    Unhandled(String),
}

impl From<BtfError> for LayoutError {
    fn from(e: BtfError) -> LayoutError {
        LayoutError::Btf(Arc::new(e))
    }
}

impl From<TracefsError> for LayoutError {
    fn from(e: TracefsError) -> LayoutError {
        LayoutError::Tracefs(Arc::new(e))
    }
}

impl From<DebugfsError> for LayoutError {
    fn from(e: DebugfsError) -> LayoutError {
        LayoutError::Debugfs(Arc::new(e))
    }
}

impl LayoutError {
    /// A tp_btf prototype mismatch; `detail` follows the event name (": …" or " has …").
    pub fn prototype(event: &str, detail: impl Into<String>) -> LayoutError {
        LayoutError::Prototype {
            event: event.to_owned(),
            detail: detail.into(),
        }
    }
}
