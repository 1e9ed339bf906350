//! What wbscope learns from the running kernel at start-up: tracefs event formats, BTF layouts,
//! device names. Nothing about the kernel's layout is hard-coded.

pub mod btf;
pub mod devices;
pub mod layout;
pub mod tracefs;

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
