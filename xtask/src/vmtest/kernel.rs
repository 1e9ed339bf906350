//! Debian's signed cloud kernels: the series the vm tier boots, which package is the newest of a
//! series in its part of Debian's archive (apt-cache on a private view of the archive), fetching
//! it once into the cache (apt-get download) and unpacking it (dpkg -x, then depmod so that
//! modprobe and the initramfs can resolve module dependencies).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::vmtest::archive::{PrivateApt, Suite};

/// An unpacked kernel package.
pub struct Kernel {
    /// The Debian package, e.g. `linux-image-6.1.0-57-cloud-amd64`.
    pub package: String,
    /// `uname -r` of the kernel, the directory name under `lib/modules`.
    pub release: String,
    /// Where `dpkg -x` unpacked it (the `-d` directory for `modprobe` and `depmod -b`).
    pub root: PathBuf,
    /// The bootable image (`boot/vmlinuz-RELEASE`).
    pub vmlinuz: PathBuf,
}

impl Kernel {
    /// `lib/modules/RELEASE` of the unpacked package.
    pub fn modules_dir(&self) -> PathBuf {
        self.root.join("lib/modules").join(&self.release)
    }
}

/// A kernel series the vm tier boots and the part of Debian's archive it comes from.
pub struct Series {
    /// What `--kernel` calls it, and the name of its run and apt directories.
    pub name: &'static str,
    /// The version prefix of the package names (`5.10` matches `linux-image-5.10.0-46-…`, not
    /// `5.100`), or `None` for the newest of any version.
    pub version: Option<&'static str>,
    /// The Debian release it ships in, for messages.
    pub release: &'static str,
    /// The suites searched for it.
    pub suites: &'static [Suite],
}

const BULLSEYE: &[Suite] = &[
    Suite {
        archive: "debian",
        suite: "bullseye",
    },
    Suite {
        archive: "debian-security",
        suite: "bullseye-security",
    },
];

const BOOKWORM: &[Suite] = &[
    Suite {
        archive: "debian",
        suite: "bookworm",
    },
    Suite {
        archive: "debian-security",
        suite: "bookworm-security",
    },
];

const UNSTABLE: &[Suite] = &[Suite {
    archive: "debian",
    suite: "sid",
}];

/// Every series, oldest first.
pub const SERIES: &[Series] = &[
    Series {
        name: "5.10",
        version: Some("5.10"),
        release: "Debian 11",
        suites: BULLSEYE,
    },
    Series {
        name: "6.1",
        version: Some("6.1"),
        release: "Debian 12",
        suites: BOOKWORM,
    },
    Series {
        name: "6.12",
        version: Some("6.12"),
        release: "Debian 12",
        suites: BOOKWORM,
    },
    Series {
        name: "newest",
        version: None,
        release: "Debian unstable",
        suites: UNSTABLE,
    },
];

/// The series called `name`.
pub fn series(name: &str) -> Result<&'static Series> {
    SERIES
        .iter()
        .find(|s| s.name == name)
        .with_context(|| format!("no kernel series {name}"))
}

/// The newest cloud kernel of `series` in its suites, fetched and unpacked under `cache`. When
/// the cached package lists name a package the archive no longer has (unstable moves fast), the
/// lists are fetched again once.
pub fn prepare(series: &Series, cache: &Path) -> Result<Kernel> {
    let apt = PrivateApt::new(&cache.join("apt").join(series.name), series.suites)?;
    apt.refresh(false)?;
    let debs = cache.join("debs");
    fs::create_dir_all(&debs).with_context(|| format!("mkdir {}", debs.display()))?;
    let (package, files) = match fetch(&apt, series, &debs) {
        Ok(found) => found,
        Err(e) => {
            println!("vmtest: {e:#}; fetching the package lists again");
            apt.refresh(true)?;
            fetch(&apt, series, &debs)?
        }
    };
    let root = cache.join("kernels").join(&package);
    let stamp = root.join(".unpacked");
    if !stamp.exists() {
        if root.exists() {
            fs::remove_dir_all(&root).with_context(|| format!("rm -r {}", root.display()))?;
        }
        fs::create_dir_all(&root).with_context(|| format!("mkdir {}", root.display()))?;
        for deb in &files {
            Cmd::new("dpkg").arg("-x").arg(deb).arg(&root).run()?;
        }
        // Packages built for a merged /usr (Debian 13 and later) ship usr/lib/modules; depmod -b
        // and modprobe -d look under lib/modules.
        if !root.join("lib").exists() && root.join("usr/lib/modules").is_dir() {
            std::os::unix::fs::symlink("usr/lib", root.join("lib"))
                .with_context(|| format!("symlink {}/lib", root.display()))?;
        }
    }
    let release = single_entry(&root.join("lib/modules"))?;
    if !stamp.exists() {
        // The package ships no modules.dep: Debian runs depmod at install time.
        Cmd::new("depmod")
            .arg("-b")
            .arg(&root)
            .arg(&release)
            .run()?;
        fs::write(&stamp, "").with_context(|| format!("write {}", stamp.display()))?;
    }
    // Older packages install boot/vmlinuz-RELEASE; split ones (linux-binary-*) the image
    // beside the modules.
    let vmlinuz = [
        root.join("boot").join(format!("vmlinuz-{release}")),
        root.join("lib/modules").join(&release).join("vmlinuz"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .with_context(|| format!("{package} has no boot/vmlinuz-{release} or modules/vmlinuz"))?;
    Ok(Kernel {
        package,
        release,
        root,
        vmlinuz,
    })
}

/// The series' newest image package and the `.deb` files it takes, downloaded into `debs`
/// unless already there.
fn fetch(apt: &PrivateApt, series: &Series, debs: &Path) -> Result<(String, Vec<PathBuf>)> {
    let package = newest_package(apt, series)?.with_context(|| {
        format!(
            "{} ({}) has no linux-image-{}*-cloud-amd64",
            series.release,
            series
                .suites
                .iter()
                .map(|s| s.suite)
                .collect::<Vec<_>>()
                .join(", "),
            series.version.map(|v| format!("{v}.")).unwrap_or_default()
        )
    })?;
    let mut files = Vec::new();
    for name in std::iter::once(package.clone()).chain(split_parts(apt, &package)?) {
        let deb = match find_deb(debs, &name)? {
            Some(deb) => deb,
            None => {
                apt.cmd("apt-get")
                    .args(["download", &name])
                    .current_dir(debs)
                    .run()?;
                find_deb(debs, &name)?
                    .with_context(|| format!("apt-get download left no {name}_*.deb"))?
            }
        };
        files.push(deb);
    }
    Ok((package, files))
}

/// The packages a split kernel package depends on for its image and modules
/// (`linux-image-R` → `linux-binary-R`, `linux-modules-R`, `linux-base-R`): the dependencies
/// that carry the same release `R`. An image package that holds everything has none.
fn split_parts(apt: &PrivateApt, package: &str) -> Result<Vec<String>> {
    let out = apt
        .cmd("apt-cache")
        .args(["show", "--no-all-versions", package])
        .capture()?;
    Ok(same_release_depends(&out, package))
}

/// The `Depends:` names of an `apt-cache show` stanza that end in `package`'s release.
fn same_release_depends(show: &str, package: &str) -> Vec<String> {
    let Some(release) = package.strip_prefix("linux-image-") else {
        return Vec::new();
    };
    let suffix = format!("-{release}");
    let Some(depends) = show.lines().find_map(|l| l.strip_prefix("Depends:")) else {
        return Vec::new();
    };
    depends
        .split([',', '|'])
        .filter_map(|d| d.split_whitespace().next())
        .filter(|name| name.starts_with("linux-") && name.ends_with(&suffix))
        .map(str::to_owned)
        .collect()
}

/// The newest cloud image package of `series` by Debian version order of the names.
fn newest_package(apt: &PrivateApt, series: &Series) -> Result<Option<String>> {
    let version = match series.version {
        Some(v) => format!("{}\\.", v.replace('.', "\\.")),
        None => String::new(),
    };
    let pattern = format!("^linux-image-{version}[0-9].*-cloud-amd64$");
    let out = apt
        .cmd("apt-cache")
        .args(["search", "--names-only", &pattern])
        .probe()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(newest(text.lines().filter_map(|l| l.split_whitespace().next())).map(str::to_owned))
}

/// The greatest name by version order (runs of digits compare as numbers).
fn newest<'a>(names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    names.max_by(|a, b| version_key(a).cmp(&version_key(b)))
}

/// A name split into text and number runs, so `6.1.0-57` sorts after `6.1.0-9`.
fn version_key(name: &str) -> Vec<(u64, String)> {
    let mut key = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            key.push((rest[..digits].parse().unwrap_or(u64::MAX), String::new()));
            rest = &rest[digits..];
        } else {
            let text = rest.len() - rest.trim_start_matches(|c: char| !c.is_ascii_digit()).len();
            key.push((0, rest[..text].to_owned()));
            rest = &rest[text..];
        }
    }
    key
}

/// `PACKAGE_*.deb` in `dir`, if already fetched.
pub(super) fn find_deb(dir: &Path, package: &str) -> Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    for entry in fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".deb") {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// The one directory entry of `dir` (the release under `lib/modules`).
fn single_entry(dir: &Path) -> Result<String> {
    let names: Vec<String> = fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!("{} should hold one release, has {names:?}", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_compares_numbers_not_text() {
        let names = [
            "linux-image-6.1.0-9-cloud-amd64",
            "linux-image-6.1.0-57-cloud-amd64",
            "linux-image-6.1.0-50-cloud-amd64",
        ];
        assert_eq!(
            newest(names.into_iter()),
            Some("linux-image-6.1.0-57-cloud-amd64")
        );
        let names = [
            "linux-image-6.12.117+deb12-cloud-amd64",
            "linux-image-6.12.99+deb12-cloud-amd64",
        ];
        assert_eq!(
            newest(names.into_iter()),
            Some("linux-image-6.12.117+deb12-cloud-amd64")
        );
    }

    #[test]
    fn split_packages_bring_their_binary_and_modules() {
        let show = "Package: linux-image-7.2.13+deb14-cloud-amd64\n\
            Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, \
            linux-base-7.2.13+deb14-cloud-amd64 (= 7.2.13-1), \
            linux-binary-7.2.13+deb14-cloud-amd64 (= 7.2.13-1), \
            linux-modules-7.2.13+deb14-cloud-amd64 (= 7.2.13-1)\n\
            Pre-Depends: linux-base (>= 4.17~)\n";
        assert_eq!(
            same_release_depends(show, "linux-image-7.2.13+deb14-cloud-amd64"),
            [
                "linux-base-7.2.13+deb14-cloud-amd64",
                "linux-binary-7.2.13+deb14-cloud-amd64",
                "linux-modules-7.2.13+deb14-cloud-amd64"
            ]
        );
        let whole = "Package: linux-image-5.10.0-46-cloud-amd64\n\
            Depends: kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2)\n";
        assert!(same_release_depends(whole, "linux-image-5.10.0-46-cloud-amd64").is_empty());
    }

    #[test]
    fn every_series_is_named_once() {
        for s in SERIES {
            assert_eq!(series(s.name).map(|f| f.name).ok(), Some(s.name));
        }
        assert!(series("4.19").is_err());
    }
}
