//! A private view of Debian's archive for one kernel series: its own sources list, package
//! lists and apt cache under the vm tier's cache, so that Debian 11 or unstable kernels can be
//! fetched on a Debian 12 host without touching the host's apt sources or state. apt reads only
//! the config file written here (`APT_CONFIG`, whose `Dir::Etc::Parts` and `Dir::Etc::Main`
//! point away from `/etc/apt`), so no host hook runs and no host list or cache is written.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

use crate::cmd::Cmd;

/// Where the archive is fetched from unless `WBSCOPE_DEBIAN_MIRROR` names another mirror (one
/// that serves `debian/` and `debian-security/` below it, as deb.debian.org and
/// archive.debian.org do).
const DEFAULT_MIRROR: &str = "http://deb.debian.org";

/// The keyring of Debian's archive signing keys (package debian-archive-keyring).
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Package lists older than this are fetched again before a package is looked up, so `newest`
/// follows unstable and the stable series pick up security updates.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// One `deb` line: the archive below the mirror (`debian` or `debian-security`) and a suite.
#[derive(Clone, Copy, Debug)]
pub struct Suite {
    pub archive: &'static str,
    pub suite: &'static str,
}

/// apt confined to a directory of its own.
pub struct PrivateApt {
    dir: PathBuf,
}

impl PrivateApt {
    /// Writes the sources list and config for `suites` under `dir` (kept across runs: the lists
    /// are the cache).
    pub fn new(dir: &Path, suites: &[Suite]) -> Result<Self> {
        for sub in ["lists/partial", "cache/archives/partial", "parts"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d).with_context(|| format!("mkdir {}", d.display()))?;
        }
        let mirror = std::env::var("WBSCOPE_DEBIAN_MIRROR")
            .ok()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| DEFAULT_MIRROR.to_owned());
        let sources = dir.join("sources.list");
        write_if_changed(&sources, &sources_list(&mirror, suites))?;
        write_if_changed(&dir.join("apt.conf"), &apt_conf(dir))?;
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// An apt command (`apt-get`, `apt-cache`) that reads only this directory's config.
    pub fn cmd(&self, program: &str) -> Cmd {
        Cmd::new(program).env("APT_CONFIG", self.dir.join("apt.conf"))
    }

    /// Fetches the package lists unless they are fresh. A failed fetch with older lists present
    /// keeps them (with a warning), so a cached kernel still boots offline.
    pub fn refresh(&self, force: bool) -> Result<()> {
        if !force && self.lists_fresh() {
            return Ok(());
        }
        match self.cmd("apt-get").arg("update").run() {
            Ok(()) => Ok(()),
            Err(e) if self.has_lists() => {
                println!("vmtest: keeping the package lists fetched before ({e:#})");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn lists(&self) -> Vec<PathBuf> {
        fs::read_dir(self.dir.join("lists"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with("_Packages"))
            .collect()
    }

    fn has_lists(&self) -> bool {
        !self.lists().is_empty()
    }

    fn lists_fresh(&self) -> bool {
        let lists = self.lists();
        !lists.is_empty()
            && lists.iter().all(|p| {
                fs::metadata(p)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .is_some_and(|age| age < LISTS_MAX_AGE)
            })
    }
}

/// The sources list: signed by Debian's archive keys, main only.
fn sources_list(mirror: &str, suites: &[Suite]) -> String {
    let mut s = String::from("# Written by `cargo xtask vmtest`.\n");
    for Suite { archive, suite } in suites {
        let _ = writeln!(
            s,
            "deb [signed-by={KEYRING}] {}/{archive} {suite} main",
            mirror.trim_end_matches('/')
        );
    }
    s
}

/// The whole apt configuration. `Check-Valid-Until` is off because mirrors and caches lag and
/// test machines' clocks drift; the lists are still verified against the archive keys.
fn apt_conf(dir: &Path) -> String {
    let d = |sub: &str| dir.join(sub).display().to_string();
    format!(
        "// Written by `cargo xtask vmtest`: apt reads nothing of the host's configuration.\n\
         Dir::Etc::Main \"/dev/null\";\n\
         Dir::Etc::Parts \"{parts}\";\n\
         Dir::Etc::SourceParts \"{parts}\";\n\
         Dir::Etc::SourceList \"{sources}\";\n\
         Dir::State::Lists \"{lists}\";\n\
         Dir::Cache \"{cache}\";\n\
         APT::Architectures {{ \"amd64\"; }};\n\
         Acquire::Languages \"none\";\n\
         Acquire::Check-Valid-Until \"false\";\n",
        parts = d("parts"),
        sources = d("sources.list"),
        lists = d("lists"),
        cache = d("cache"),
    )
}

fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if fs::read_to_string(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_name_each_suite_with_the_archive_keyring() {
        let s = sources_list(
            "http://deb.debian.org/",
            &[
                Suite {
                    archive: "debian",
                    suite: "bullseye",
                },
                Suite {
                    archive: "debian-security",
                    suite: "bullseye-security",
                },
            ],
        );
        assert!(s.contains(&format!(
            "deb [signed-by={KEYRING}] http://deb.debian.org/debian bullseye main\n"
        )));
        assert!(s.contains("http://deb.debian.org/debian-security bullseye-security main\n"));
    }

    #[test]
    fn config_keeps_apt_out_of_the_host_directories() {
        let conf = apt_conf(Path::new("/cache/apt/5.10"));
        assert!(conf.contains("Dir::Etc::Parts \"/cache/apt/5.10/parts\";"));
        assert!(conf.contains("Dir::State::Lists \"/cache/apt/5.10/lists\";"));
        assert!(conf.contains("Dir::Cache \"/cache/apt/5.10/cache\";"));
        assert!(!conf.contains("/etc/apt"));
    }
}
