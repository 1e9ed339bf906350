//! Cgroup v2 fixtures: test cgroups that are removed on drop (their processes moved back to
//! the root first), and what the hierarchy at `/sys/fs/cgroup` offers.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result, io_err};
use crate::sys::{read_attr, warn, write_attr};

/// Where a pure cgroup v2 host mounts the hierarchy.
pub const ROOT: &str = "/sys/fs/cgroup";

/// `CGROUP2_SUPER_MAGIC` from include/uapi/linux/magic.h.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Whether `/sys/fs/cgroup` itself is a cgroup2 mount (a pure v2 host, not a hybrid one).
pub fn is_cgroup2_root() -> bool {
    let Ok(path) = std::ffi::CString::new(ROOT) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct we own; the path is NUL-terminated.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(path.as_ptr(), &mut st) == 0 && st.f_type as i64 == CGROUP2_SUPER_MAGIC
    }
}

/// The controllers the root offers its children (`cgroup.subtree_control`).
pub fn root_subtree_control() -> Result<Vec<String>> {
    let text = read_attr(&Path::new(ROOT).join("cgroup.subtree_control"))?;
    Ok(text.split_whitespace().map(str::to_owned).collect())
}

/// A cgroup this test created; removed on drop.
pub struct Cgroup {
    path: PathBuf,
}

impl Cgroup {
    /// Creates `ROOT/<rel>` (a leftover of an earlier run is reused).
    pub fn create(rel: &str) -> Result<Cgroup> {
        let path = Path::new(ROOT).join(rel);
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(format!("mkdir {}", path.display()))(e)),
        }
        Ok(Cgroup { path })
    }

    /// A child cgroup `name` of this one.
    pub fn child(&self, name: &str) -> Result<Cgroup> {
        let rel = self
            .path
            .strip_prefix(ROOT)
            .map_err(|_| Error::Invalid(format!("{} is not under {ROOT}", self.path.display())))?
            .join(name);
        Cgroup::create(&rel.to_string_lossy())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as the kernel names it (`/proc/PID/cgroup`), e.g. `/test/a`.
    pub fn cgroup_path(&self) -> String {
        let rel = self.path.strip_prefix(ROOT).unwrap_or(&self.path);
        format!("/{}", rel.display())
    }

    /// The cgroup id: the inode number of its directory.
    pub fn id(&self) -> Result<u64> {
        let meta = std::fs::metadata(&self.path)
            .map_err(io_err(format!("stat {}", self.path.display())))?;
        Ok(meta.ino())
    }

    /// Moves process `pid` (all its threads) into this cgroup.
    pub fn add_process(&self, pid: u32) -> Result<()> {
        write_attr(&self.path.join("cgroup.procs"), &pid.to_string())
    }

    /// Limits writes of this cgroup's tasks (and of its descendants) to device `dev`
    /// (`"MAJ:MIN"`) to `bytes_per_sec` with `io.max`; the rule goes with the cgroup.
    pub fn limit_write_bps(&self, dev: &str, bytes_per_sec: u64) -> Result<()> {
        write_attr(
            &self.path.join("io.max"),
            &format!("{dev} wbps={bytes_per_sec}"),
        )
    }

    /// Enables `controllers` (e.g. `["memory", "io"]`) for this cgroup's children.
    pub fn enable_for_children(&self, controllers: &[&str]) -> Result<()> {
        let line: Vec<String> = controllers.iter().map(|c| format!("+{c}")).collect();
        write_attr(&self.path.join("cgroup.subtree_control"), &line.join(" "))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Processes still inside (a child that outlived a failed assertion) go back to the
        // root, or the directory could not be removed.
        let root_procs = Path::new(ROOT).join("cgroup.procs");
        if let Ok(procs) = std::fs::read_to_string(self.path.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = write_attr(&root_procs, pid);
            }
        }
        // A process that just left may keep the cgroup busy for a moment.
        for attempt in 0..50 {
            match std::fs::remove_dir(&self.path) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) if attempt == 49 => {
                    warn(&format!(
                        "could not remove cgroup {}: {e}",
                        self.path.display()
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}
