//! Debian's signed cloud kernels: which package is the newest of a series (apt-cache), fetching
//! it once into the cache (apt-get download) and unpacking it (dpkg -x, then depmod so that
//! modprobe and the initramfs can resolve module dependencies).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;

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

/// The newest `linux-image-SERIES.*-cloud-amd64` package apt knows, fetched and unpacked under
/// `cache`. `series` is `"6.1"` or `"6.12"`: the name prefix, so `6.1` does not match `6.12`.
pub fn prepare(series: &str, cache: &Path) -> Result<Kernel> {
    let package = match newest_package(series)? {
        Some(p) => p,
        None => {
            // A fresh machine has no package lists yet.
            crate::apt::update_cmd().run()?;
            newest_package(series)?
                .with_context(|| format!("apt-cache knows no linux-image-{series}.*-cloud-amd64"))?
        }
    };
    let debs = cache.join("debs");
    fs::create_dir_all(&debs).with_context(|| format!("mkdir {}", debs.display()))?;
    let deb = match find_deb(&debs, &package)? {
        Some(deb) => deb,
        None => {
            Cmd::new("apt-get")
                .args(["download", &package])
                .current_dir(&debs)
                .run()?;
            find_deb(&debs, &package)?
                .with_context(|| format!("apt-get download left no {package}_*.deb"))?
        }
    };
    let root = cache.join("kernels").join(&package);
    let stamp = root.join(".unpacked");
    if !stamp.exists() {
        if root.exists() {
            fs::remove_dir_all(&root).with_context(|| format!("rm -r {}", root.display()))?;
        }
        fs::create_dir_all(&root).with_context(|| format!("mkdir {}", root.display()))?;
        Cmd::new("dpkg").arg("-x").arg(&deb).arg(&root).run()?;
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
    let vmlinuz = root.join("boot").join(format!("vmlinuz-{release}"));
    if !vmlinuz.exists() {
        bail!("{} has no {}", deb.display(), vmlinuz.display());
    }
    Ok(Kernel {
        package,
        release,
        root,
        vmlinuz,
    })
}

/// The newest cloud image package of `series` by Debian version order of the names.
fn newest_package(series: &str) -> Result<Option<String>> {
    let pattern = format!(
        "^linux-image-{}\\.[0-9].*-cloud-amd64$",
        series.replace('.', "\\.")
    );
    let out = Cmd::new("apt-cache")
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
}
