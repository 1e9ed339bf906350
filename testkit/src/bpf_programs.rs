//! Which BPF programs a process holds, and whether they are still loaded after it exits. By id,
//! not by name: other daemons and tests on the same host load programs with the same names.

use std::process::{Command, Stdio};

/// Ids of the BPF programs process `pid` holds open (`prog_id:` lines in /proc/PID/fdinfo),
/// sorted and without duplicates; empty if the process is gone.
pub fn program_ids(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    let mut ids: Vec<u32> = entries
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("prog_id:"))
                .and_then(|id| id.trim().parse().ok())
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Which of `ids` the kernel still has loaded (`bpftool prog show id N` succeeds). Ids are
/// allocated cyclically, so a freed id is not reused by another program this soon.
pub fn still_loaded(ids: &[u32]) -> crate::Result<Vec<u32>> {
    let mut left = Vec::new();
    for id in ids {
        let status = Command::new("bpftool")
            .args(["prog", "show", "id", &id.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|source| crate::Error::Io {
                what: "run bpftool (installed by cargo xtask setup)".into(),
                source,
            })?;
        if status.success() {
            left.push(*id);
        }
    }
    Ok(left)
}
