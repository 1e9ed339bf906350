//! Labels of an NFS mount: its `device` (the superblock's `MAJ:MIN`, as the sync-call metrics
//! label NFS files) and `server` (the host part of the mount source in /proc/self/mountinfo).
//! Both are bounded by the number of NFS mounts.

use probe_common::nfs::{NFS_DATA_SYNC, NFS_FILE_SYNC, NFS_UNSTABLE, SYNC_MODE_UNKNOWN};

use crate::{families::writeback::sync_mode_label, kernel::devices};

/// `server` for a mount whose source is not known (unmounted since the RPC).
const UNKNOWN: &str = "unknown";

/// NFS mounts' servers by device, read at most once per scrape, and only by a scrape that has
/// an NFS series to label: a host without NFS traffic (most of a fleet) never reads the mount
/// table for it (it was about 5 % of an idle daemon's CPU).
#[derive(Default)]
pub struct Servers(std::cell::OnceCell<Vec<(u32, u32, String)>>);

impl Servers {
    /// The NFS mounts (`nfs`, `nfs4`) of the current mount table, read on first use.
    pub fn current() -> Servers {
        Servers::default()
    }

    /// The server of the mount on kernel `dev`, or `unknown`.
    pub fn of(&self, dev: u32) -> String {
        let (major, minor) = devices::split_kernel_dev(dev);
        self.0
            .get_or_init(|| {
                std::fs::read_to_string("/proc/self/mountinfo")
                    .map(|text| parse(&text))
                    .unwrap_or_default()
            })
            .iter()
            .find(|(ma, mi, _)| (*ma, *mi) == (major, minor))
            .map(|(_, _, server)| server.clone())
            .unwrap_or_else(|| UNKNOWN.into())
    }
}

/// `(major, minor, server)` of each NFS line of mountinfo (`… MAJ:MIN … - nfs4 host:/path …`).
/// The server of `[fe80::1]:/x` is `fe80::1`; a source without `:` is kept whole.
fn parse(text: &str) -> Vec<(u32, u32, String)> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split(' ');
            let fstype = right.next()?;
            if fstype != "nfs" && fstype != "nfs4" {
                return None;
            }
            let source = right.next()?;
            let (major, minor) = left.split(' ').nth(2)?.split_once(':')?;
            let server = match source.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(v6),
                None => source.rsplit_once(":/").map_or(source, |(host, _)| host),
            };
            Some((major.parse().ok()?, minor.parse().ok()?, server.to_owned()))
        })
        .collect()
}

/// `unstable`, `data_sync`, `file_sync`; the raw number for anything else.
pub fn stable_label(raw: u32) -> String {
    match raw {
        NFS_UNSTABLE => "unstable".into(),
        NFS_DATA_SYNC => "data_sync".into(),
        NFS_FILE_SYNC => "file_sync".into(),
        other => other.to_string(),
    }
}

/// `none` / `all` as the writeback metrics say it, or `unknown` for a WRITE set up outside a
/// writepages pass.
pub fn pass_sync_mode_label(raw: u32) -> String {
    if raw == SYNC_MODE_UNKNOWN {
        UNKNOWN.into()
    } else {
        sync_mode_label(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nfs_mounts_and_their_servers() {
        let text = "36 25 0:52 / /mnt/a rw,relatime shared:1 - nfs4 127.0.0.1:/ rw,vers=4.2\n\
                    37 25 0:53 / /mnt/b rw - nfs [fe80::1]:/export rw,vers=3\n\
                    38 25 8:1 / / rw - ext4 /dev/sda1 rw\n\
                    39 25 0:54 / /mnt/c rw - nfs filer.example:/vol/x:y rw\n";
        let servers = parse(text);
        assert_eq!(
            servers,
            [
                (0, 52, "127.0.0.1".to_owned()),
                (0, 53, "fe80::1".to_owned()),
                (0, 54, "filer.example".to_owned()),
            ]
        );
        let s = Servers(std::cell::OnceCell::from(servers));
        assert_eq!(s.of(52), "127.0.0.1");
        assert_eq!(s.of(99), "unknown");
    }

    #[test]
    fn labels_stability_and_sync_mode() {
        assert_eq!(stable_label(0), "unstable");
        assert_eq!(stable_label(1), "data_sync");
        assert_eq!(stable_label(2), "file_sync");
        assert_eq!(stable_label(7), "7");
        assert_eq!(pass_sync_mode_label(SYNC_MODE_UNKNOWN), "unknown");
        assert_eq!(pass_sync_mode_label(1), "all");
        assert_eq!(pass_sync_mode_label(0), "none");
    }
}
