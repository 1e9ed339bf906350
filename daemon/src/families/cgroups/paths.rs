//! Cgroup ids to paths. On cgroup v2 a cgroup's id (`bpf_get_current_cgroup_id`, the id in
//! stall events) is the inode number of its directory under the cgroup2 mount, so the daemon
//! walks that tree and caches id → path, walking again when it meets an id it does not know.

use std::{
    collections::HashMap,
    os::unix::fs::{DirEntryExt as _, MetadataExt as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

/// The daemon's own mount table: the paths it stats must be in its mount namespace.
const SELF_MOUNTINFO: &str = "/proc/self/mountinfo";

/// Controllers that per-cgroup writeback needs on the v2 hierarchy: dirty pages are charged to
/// a memory cgroup and written back by a per-(memory, io) cgroup writeback context.
pub const NEEDED_CONTROLLERS: [&str; 2] = ["memory", "io"];

/// The cgroup2 mount the daemon sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup2Mount {
    pub mountpoint: PathBuf,
    /// The cgroup path of the mount's root (mountinfo's root field): `/` outside a cgroup
    /// namespace, the namespace's root inside one.
    pub root: String,
}

/// The first cgroup2 mount in mountinfo `text`, preferring one of the whole hierarchy.
pub fn find_cgroup2(text: &str) -> Option<Cgroup2Mount> {
    let mounts: Vec<Cgroup2Mount> = text
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            if right.split(' ').next()? != "cgroup2" {
                return None;
            }
            let mut fields = left.split(' ').skip(3);
            let root = crate::kernel::mounts::unescape(fields.next()?);
            let mountpoint = PathBuf::from(crate::kernel::mounts::unescape(fields.next()?));
            Some(Cgroup2Mount { mountpoint, root })
        })
        .collect();
    mounts
        .iter()
        .find(|m| m.root == "/")
        .or_else(|| mounts.first())
        .cloned()
}

/// Why this host cannot attribute writeback to cgroups.
#[derive(Debug, thiserror::Error)]
pub enum HierarchyError {
    #[error("cannot read {path}: {source}")]
    Unreadable {
        path: String,
        source: std::io::Error,
    },
    #[error("no cgroup2 filesystem is mounted (cgroup v1 host)")]
    NotMounted,
    #[error(
        "the cgroup2 hierarchy at {mountpoint} has no {missing} controller (a cgroup v1 or \
         hybrid host: the controllers are bound to v1, and every task's v2 cgroup is the root)"
    )]
    MissingControllers { mountpoint: String, missing: String },
}

/// Whether this host can attribute writeback to cgroups: the cgroup2 mount, or why not.
pub fn usable_hierarchy() -> Result<Cgroup2Mount, HierarchyError> {
    let unreadable = |path: &Path| {
        let path = path.display().to_string();
        move |source| HierarchyError::Unreadable { path, source }
    };
    let text =
        std::fs::read_to_string(SELF_MOUNTINFO).map_err(unreadable(Path::new(SELF_MOUNTINFO)))?;
    let mount = find_cgroup2(&text).ok_or(HierarchyError::NotMounted)?;
    let file = mount.mountpoint.join("cgroup.controllers");
    let controllers = std::fs::read_to_string(&file).map_err(unreadable(&file))?;
    let missing: Vec<&str> = NEEDED_CONTROLLERS
        .into_iter()
        .filter(|c| !controllers.split_whitespace().any(|have| have == *c))
        .collect();
    if missing.is_empty() {
        Ok(mount)
    } else {
        Err(HierarchyError::MissingControllers {
            mountpoint: mount.mountpoint.display().to_string(),
            missing: missing.join(" or "),
        })
    }
}

/// Shortest time between two walks of the tree: a storm of events from one unknown (e.g.
/// already removed) cgroup must not walk it per event.
const MIN_REFRESH: Duration = Duration::from_millis(500);

/// Cached id → path of the cgroups under one mount.
pub struct CgroupPaths {
    mount: Option<Cgroup2Mount>,
    paths: HashMap<u64, String>,
    last_walk: Option<Instant>,
}

impl CgroupPaths {
    /// Paths under `mount` (`None`: no cgroup2 mount; every lookup fails).
    pub fn new(mount: Option<Cgroup2Mount>) -> CgroupPaths {
        CgroupPaths {
            mount,
            paths: HashMap::new(),
            last_walk: None,
        }
    }

    /// Paths under the daemon's cgroup2 mount, whatever its controllers.
    pub fn discover() -> CgroupPaths {
        let mount = std::fs::read_to_string(SELF_MOUNTINFO)
            .ok()
            .and_then(|text| find_cgroup2(&text));
        CgroupPaths::new(mount)
    }

    /// The path of cgroup `id`, walking the tree again on a miss (at most every
    /// [`MIN_REFRESH`]).
    pub fn path(&mut self, id: u64) -> Option<String> {
        if let Some(path) = self.paths.get(&id) {
            return Some(path.clone());
        }
        let due = self.last_walk.is_none_or(|t| t.elapsed() >= MIN_REFRESH);
        if due {
            self.refresh();
        }
        self.paths.get(&id).cloned()
    }

    /// Whether `id` is a cgroup that existed at the last walk.
    pub fn known(&self, id: u64) -> bool {
        self.paths.contains_key(&id)
    }

    /// Walks the tree now, forgetting cgroups that are gone.
    pub fn refresh(&mut self) {
        self.last_walk = Some(Instant::now());
        self.paths.clear();
        let Some(mount) = &self.mount else {
            return;
        };
        if let Ok(meta) = std::fs::metadata(&mount.mountpoint) {
            self.paths.insert(meta.ino(), mount.root.clone());
        }
        walk(&mount.mountpoint, &mount.root, &mut self.paths);
    }
}

/// Adds every cgroup below `dir` (cgroup path `path`) to `out`.
fn walk(dir: &Path, path: &str, out: &mut HashMap<u64, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = if path.ends_with('/') {
            format!("{path}{name}")
        } else {
            format!("{path}/{name}")
        };
        // kernfs reports the node id as the entry's inode number, which is the cgroup id.
        out.insert(entry.ino(), child.clone());
        walk(&entry.path(), &child, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn finds_the_cgroup2_mount_and_its_root() {
        let m = find_cgroup2(HYBRID).unwrap();
        assert_eq!(m.mountpoint, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(m.root, "/");
        let ns = "50 1 0:26 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        assert_eq!(find_cgroup2(ns).unwrap().root, "/kubepods/pod1");
        assert_eq!(find_cgroup2("31 23 0:28 / /x rw - tmpfs tmpfs rw\n"), None);
    }

    #[test]
    fn walks_a_tree_by_inode() {
        let dir = std::env::temp_dir().join(format!("wbscope-cgpaths-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        let mut paths = CgroupPaths::new(Some(Cgroup2Mount {
            mountpoint: dir.clone(),
            root: "/".into(),
        }));
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(paths.path(ino(&dir.join("a/b"))).as_deref(), Some("/a/b"));
        assert_eq!(paths.path(ino(&dir)).as_deref(), Some("/"));
        assert!(paths.known(ino(&dir.join("a"))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
