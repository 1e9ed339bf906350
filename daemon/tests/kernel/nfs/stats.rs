//! The kernel's own NFS numbers the tests compare against: the client's per-mount RPC counters
//! (`/proc/self/mountstats`) and an independent ftrace of the `nfs` tracepoints in a private
//! tracefs instance (the printed `stable=` of each WRITE, which no counter in /proc splits).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// One mount's counters from `/proc/self/mountstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MountStats {
    /// WRITE RPCs (the per-op line's first number, operations).
    pub writes: u64,
    /// COMMIT RPCs.
    pub commits: u64,
    /// Bytes the server acknowledged writing (`bytes:` field 6, NFSIOS_SERVERWRITTENBYTES).
    pub server_written_bytes: u64,
}

impl MountStats {
    /// The counters of the NFS mount on `mountpoint`; panics if it has none.
    pub fn of(mountpoint: &Path) -> MountStats {
        let text = fs::read_to_string("/proc/self/mountstats").expect("read mountstats");
        parse(&text, &mountpoint.to_string_lossy())
            .unwrap_or_else(|| panic!("no mountstats for {}:\n{text}", mountpoint.display()))
    }

    /// What happened between `before` and `self`.
    pub fn since(&self, before: &MountStats) -> MountStats {
        MountStats {
            writes: self.writes - before.writes,
            commits: self.commits - before.commits,
            server_written_bytes: self.server_written_bytes - before.server_written_bytes,
        }
    }
}

/// The block of `device … mounted on MOUNTPOINT with fstype nfs…`.
fn parse(text: &str, mountpoint: &str) -> Option<MountStats> {
    let header = format!(" mounted on {mountpoint} with fstype nfs");
    let mut lines = text.lines().skip_while(|l| !l.contains(&header));
    lines.next()?;
    let mut stats = MountStats::default();
    for line in lines.take_while(|l| !l.starts_with("device ")) {
        let mut words = line.split_whitespace();
        let numbers = |w: std::str::SplitWhitespace| -> Vec<u64> {
            w.filter_map(|n| n.parse().ok()).collect()
        };
        match words.next() {
            Some("bytes:") => stats.server_written_bytes = *numbers(words).get(5)?,
            Some("WRITE:") => stats.writes = *numbers(words).first()?,
            Some("COMMIT:") => stats.commits = *numbers(words).first()?,
            _ => {}
        }
    }
    Some(stats)
}

/// A tracefs instance recording `nfs:nfs_initiate_write` and `nfs:nfs_initiate_commit`, removed
/// on drop.
pub struct NfsTrace {
    dir: PathBuf,
}

const TRACEFS: &str = "/sys/kernel/tracing";
const EVENTS: [&str; 2] = ["nfs_initiate_write", "nfs_initiate_commit"];

impl NfsTrace {
    pub fn start() -> NfsTrace {
        let dir = Path::new(TRACEFS)
            .join("instances")
            .join(format!("wbscope-nfs-{}", std::process::id()));
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let trace = NfsTrace { dir };
        // Room for every event of a test (about 100 bytes each) without overwriting.
        fs::write(trace.dir.join("buffer_size_kb"), "8192").expect("size the trace buffer");
        for event in EVENTS {
            fs::write(trace.dir.join("events/nfs").join(event).join("enable"), "1")
                .unwrap_or_else(|e| panic!("enable nfs/{event}: {e}"));
        }
        trace
    }

    /// WRITEs by printed stability (`UNSTABLE`, `DATA_SYNC`, `FILE_SYNC`) and the COMMIT count
    /// for the device `major:minor` since the start.
    pub fn counts(&self, major: u32, minor: u32) -> (BTreeMap<String, u64>, u64) {
        let text = fs::read_to_string(self.dir.join("trace")).expect("read the trace");
        count_events(&text, major, minor)
    }
}

fn count_events(text: &str, major: u32, minor: u32) -> (BTreeMap<String, u64>, u64) {
    // `fileid=%02x:%02x:%llu`, the device in hex.
    let file = format!("fileid={major:02x}:{minor:02x}:");
    let mut writes = BTreeMap::new();
    let mut commits = 0;
    for line in text.lines().filter(|l| l.contains(&file)) {
        if line.contains(" nfs_initiate_write: ") {
            let stable = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("stable="))
                .unwrap_or("?");
            *writes.entry(stable.to_owned()).or_insert(0) += 1;
        } else if line.contains(" nfs_initiate_commit: ") {
            commits += 1;
        }
    }
    (writes, commits)
}

impl Drop for NfsTrace {
    fn drop(&mut self) {
        for event in EVENTS {
            let _ = fs::write(self.dir.join("events/nfs").join(event).join("enable"), "0");
        }
        if let Err(e) = fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

#[test]
fn reads_one_mounts_counters_and_the_trace() {
    let text = "device /dev/vda mounted on /run/scratch with fstype ext4\n\
        device 127.0.0.1:/ mounted on /run/a with fstype nfs4 statvers=1.1\n\
        \tbytes:\t0 25427968 0 0 0 25427968 0 80\n\
        \tper-op statistics\n\
        \t       WRITE: 112 112 0 25448384 13696 3785 2384 6279 0\n\
        \t      COMMIT: 59 59 0 9440 6136 36 548 657 0\n\
        device 127.0.0.1:/ mounted on /run/b with fstype nfs4 statvers=1.1\n\
        \t       WRITE: 7 7 0 0 0 0 0 0 0\n";
    assert_eq!(
        parse(text, "/run/a"),
        Some(MountStats {
            writes: 112,
            commits: 59,
            server_written_bytes: 25427968
        })
    );
    assert_eq!(parse(text, "/run/b").map(|s| s.writes), Some(7));
    assert_eq!(parse(text, "/run/c"), None);
    let trace = "  dd-204 [001] ..... 24.46: nfs_initiate_write: fileid=00:1e:13 fhandle=0x3 offset=0 count=524288 stable=UNSTABLE\n\
        py-210 [000] ..... 26.47: nfs_initiate_write: fileid=00:1e:14 fhandle=0x3 offset=2113536 count=4096 stable=FILE_SYNC\n\
        py-210 [000] ..... 26.48: nfs_initiate_commit: fileid=00:1e:14 fhandle=0x3 offset=0 count=0\n\
        py-210 [000] ..... 26.48: nfs_initiate_commit: fileid=00:1f:14 fhandle=0x3 offset=0 count=0\n";
    let (writes, commits) = count_events(trace, 0, 30);
    assert_eq!(writes.get("UNSTABLE"), Some(&1));
    assert_eq!(writes.get("FILE_SYNC"), Some(&1));
    assert_eq!(commits, 1);
}
