//! What wbscope learns from the running kernel at start-up: tracefs event formats, BTF layouts,
//! device names. Nothing about the kernel's layout is hard-coded.

use std::path::Path;

use probe_common::kernel::InodeDevLayout;

pub use layout_error::LayoutError;

pub mod btf;
pub mod constants;
pub mod debugfs;
pub mod devices;
pub mod layout;
pub mod layout_error;
pub mod mounts;
pub mod task_access;
pub mod text_file;
pub mod tracefs;

/// Where the kernel's own type information lives.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The running kernel's release string (`uname -r`).
pub fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The system page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions and only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u64 } else { 4096 }
}

/// Everything families resolve their layouts from.
pub struct KernelInfo {
    pub tracefs: tracefs::Tracefs,
    /// Kernel BTF, or why it is unavailable (released once the probes are resolved, see
    /// [`crate::probes::loader::load_and_attach`]).
    pub btf: Result<btf::Btf, LayoutError>,
    /// The inode → device offsets, resolved once from BTF at discovery for every family that
    /// needs an inode's device (the probes' shared `kernel::fd_dev`); they outlive the BTF parse.
    pub inode_dev: Result<InodeDevLayout, LayoutError>,
    /// The offset of `task_struct.mm`, by which the probes tell kernel threads (no `mm`) from
    /// processes; resolved once for every family that asks.
    pub task_mm: Result<u32, LayoutError>,
    pub release: String,
}

impl KernelInfo {
    /// Finds (or mounts) tracefs and reads kernel BTF. Without tracefs (none mounted and no
    /// CAP_SYS_ADMIN to mount one) the classic tracepoints degrade like missing BTF does: each
    /// is skipped with the reason, and the BTF tracepoints still attach.
    pub fn discover() -> Result<KernelInfo, tracefs::TracefsError> {
        let tracefs = tracefs::Tracefs::locate_or_degrade();
        if let Some(why) = tracefs.unavailable() {
            tracing::warn!("{why}; classic tracepoint probes are skipped");
        }
        let btf = btf::Btf::from_file(Path::new(VMLINUX_BTF))
            .map_err(|e| LayoutError::NoBtf(std::sync::Arc::new(e)));
        let inode_dev = btf
            .as_ref()
            .map_err(Clone::clone)
            .and_then(layout::inode_dev_layout);
        let task_mm = btf
            .as_ref()
            .map_err(Clone::clone)
            .and_then(task_access::task_mm);
        Ok(KernelInfo {
            tracefs,
            btf,
            inode_dev,
            task_mm,
            release: release(),
        })
    }

    /// The format of `category/event` (its error is a probe's skip reason).
    pub fn event_format(
        &self,
        category: &str,
        event: &str,
    ) -> Result<tracefs::EventFormat, LayoutError> {
        Ok(self.tracefs.event_format(category, event)?)
    }

    /// Kernel BTF, or why there is none.
    pub fn btf(&self) -> Result<&btf::Btf, LayoutError> {
        self.btf.as_ref().map_err(Clone::clone)
    }

    /// The inode → device offsets (see [`KernelInfo::inode_dev`](Self::inode_dev)), or why they
    /// are unavailable.
    pub fn inode_dev(&self) -> Result<InodeDevLayout, LayoutError> {
        self.inode_dev.clone()
    }

    /// The offset of `task_struct.mm` (see [`KernelInfo::task_mm`](Self::task_mm)), or why it
    /// is unavailable.
    pub fn task_mm(&self) -> Result<u32, LayoutError> {
        self.task_mm.clone()
    }
}
