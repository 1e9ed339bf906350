//! Locating (or mounting) debugfs, for the per-bdi writeback statistics under `bdi/MAJ:MIN/stats`
//! that the kernel exports nowhere else.

use std::path::{Path, PathBuf};

/// Where debugfs normally lives; also where it is mounted when it is not.
pub const DEFAULT_ROOT: &str = "/sys/kernel/debug";

/// A usable debugfs and whether wbscope mounted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debugfs {
    pub root: PathBuf,
    /// True when wbscope mounted it (nothing was mounted there before).
    pub mounted_by_us: bool,
}

/// Why debugfs is not available.
#[derive(Debug, thiserror::Error)]
#[error(
    "debugfs is not mounted at {DEFAULT_ROOT} and mounting it failed: {cause} (needs root or \
     CAP_SYS_ADMIN; alternatively run `mount -t debugfs none {DEFAULT_ROOT}` beforehand)"
)]
pub struct DebugfsError {
    #[source]
    pub cause: std::io::Error,
}

/// Finds debugfs at its usual place (recognised by its `bdi` directory) or mounts it there.
pub fn locate_or_mount() -> Result<Debugfs, DebugfsError> {
    let root = PathBuf::from(DEFAULT_ROOT);
    if has_bdi_dir(&root) {
        return Ok(Debugfs {
            root,
            mounted_by_us: false,
        });
    }
    mount_debugfs(&root).map_err(|cause| DebugfsError { cause })?;
    if !has_bdi_dir(&root) {
        return Err(DebugfsError {
            cause: std::io::Error::other("the mounted debugfs has no bdi directory"),
        });
    }
    Ok(Debugfs {
        root,
        mounted_by_us: true,
    })
}

fn has_bdi_dir(root: &Path) -> bool {
    root.join("bdi").is_dir()
}

fn mount_debugfs(root: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::CString::new(root.as_os_str().as_bytes())?;
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call; debugfs
    // takes no required mount data, so passing NULL for it is allowed.
    let rc = unsafe {
        libc::mount(
            c"none".as_ptr(),
            target.as_ptr(),
            c"debugfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
