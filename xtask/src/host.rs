//! Facts about the machine xtask runs on that decide what it may do.

use std::path::Path;

/// The effective user id, read from `/proc/self/status` (avoids a libc dependency); `None` if
/// that file is unreadable, which callers treat as "not root".
pub fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    // Fields: real, effective, saved, filesystem.
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Whether we run as root, which installing packages and the privileged tiers need.
pub fn is_root() -> bool {
    euid() == Some(0)
}

/// Whether `program` is an executable file somewhere on `PATH`.
pub fn on_path(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_and_reads_uid() {
        assert!(on_path("sh"));
        assert!(!on_path("surely-not-a-real-program-xtask"));
        assert!(euid().is_some());
    }
}
