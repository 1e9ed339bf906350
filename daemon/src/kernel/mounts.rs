//! Mounted filesystems from the host's mountinfo (PID 1's): which device backs which mount point, with which
//! filesystem type. Used to label journal metrics and for `wbscope_filesystem_info`.

/// One line of mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub major: u32,
    pub minor: u32,
    pub mountpoint: String,
    pub fstype: String,
}

/// Mount tables in order of preference. PID 1's first: the host's mounts whenever wbscope shares
/// the host's pid namespace, which is the case on the host and in a Kubernetes pod with
/// `hostPID: true`, while its own mount namespace (a container's, or systemd's ProtectSystem=
/// view) hides or relabels file systems. mountinfo is world-readable (no ptrace check), so this
/// needs no capability. Without hostPID, PID 1 is the container's own init and the answer is
/// the same as /proc/self's.
pub const MOUNTINFO: [&str; 2] = ["/proc/1/mountinfo", "/proc/self/mountinfo"];

/// How errors name the mount table's source.
pub const SOURCE: &str = "/proc/1/mountinfo (or /proc/self/mountinfo)";

/// Reads the host's mount table (see [`MOUNTINFO`]); empty if none can be read.
pub fn current() -> Vec<Mount> {
    read().unwrap_or_default()
}

/// The mount table last read, with the open mountinfo it came from: the kernel formats the
/// whole table on every read (a scrape read it twice, with a dozen system calls each), while
/// `poll` on the open file says whether any mount changed since (`EPOLLPRI`, proc(5)).
struct Watched {
    file: std::fs::File,
    mounts: Vec<Mount>,
}

static WATCHED: std::sync::Mutex<Option<Watched>> = std::sync::Mutex::new(None);

/// Reads the host's mount table from the first of [`MOUNTINFO`] that can be read; the error of
/// the last one otherwise (a scrape counts it). The table is read again only when the kernel
/// says a mount changed since the last read.
pub fn read() -> std::io::Result<Vec<Mount>> {
    let mut watched = WATCHED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(w) = watched.as_mut() {
        match changed(&w.file) {
            Ok(false) => return Ok(w.mounts.clone()),
            Ok(true) => {
                if let Ok(text) = read_from_start(&mut w.file) {
                    w.mounts = parse(&text);
                    return Ok(w.mounts.clone());
                }
            }
            Err(_) => {}
        }
        // Unreadable now (PID 1's table gone?): open the tables afresh.
        *watched = None;
    }
    let mut last_error = std::io::Error::other("no mount table configured");
    for path in MOUNTINFO {
        let opened = std::fs::File::open(path).and_then(|mut file| {
            let text = read_from_start(&mut file)?;
            Ok((file, text))
        });
        match opened {
            Ok((file, text)) => {
                let mounts = parse(&text);
                *watched = Some(Watched {
                    file,
                    mounts: mounts.clone(),
                });
                return Ok(mounts);
            }
            Err(e) => last_error = e,
        }
    }
    Err(last_error)
}

/// Whether a mount in the namespace of the open mountinfo `file` changed since it was opened or
/// last reported as changed (the kernel reports each change once).
fn changed(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd as _;
    let mut pfd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLPRI,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout: poll only writes `revents`.
    let rc = unsafe { libc::poll(&raw mut pfd, 1, 0) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pfd.revents & libc::POLLNVAL != 0 {
        return Err(std::io::Error::other(
            "mountinfo descriptor no longer valid",
        ));
    }
    Ok(pfd.revents & (libc::POLLPRI | libc::POLLERR) != 0)
}

fn read_from_start(file: &mut std::fs::File) -> std::io::Result<String> {
    use std::io::{Read as _, Seek as _};
    file.seek(std::io::SeekFrom::Start(0))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// Parses mountinfo text (proc(5)): `id parent MAJ:MIN root mountpoint opts [optional…] - fstype
/// source superopts`. Malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let mut fields = left.split(' ');
    let (_id, _parent) = (fields.next()?, fields.next()?);
    let (major, minor) = fields.next()?.split_once(':')?;
    let _root = fields.next()?;
    let mountpoint = unescape(fields.next()?);
    let fstype = right.split(' ').next()?.to_owned();
    Some(Mount {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        mountpoint,
        fstype,
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
pub(crate) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(digits) = field.get(i + 1..i + 4)
            && let Ok(value) = u8::from_str_radix(digits, 8)
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The filesystem type mounted from `major:minor`, if any.
pub fn fstype_of(mounts: &[Mount], major: u32, minor: u32) -> Option<&str> {
    mounts
        .iter()
        .find(|m| m.major == major && m.minor == minor)
        .map(|m| m.fstype.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
35 22 0:32 / /proc rw,nosuid - proc proc rw
90 22 7:3 / /tmp/my\\040dir/mnt rw,relatime - xfs /dev/loop3 rw
garbage line
";

    #[test]
    fn parses_devices_mountpoints_and_types() {
        let mounts = parse(SAMPLE);
        assert_eq!(mounts.len(), 3);
        assert_eq!(
            mounts[0],
            Mount {
                major: 254,
                minor: 0,
                mountpoint: "/".into(),
                fstype: "ext4".into()
            }
        );
        assert_eq!(mounts[2].mountpoint, "/tmp/my dir/mnt");
        assert_eq!(fstype_of(&mounts, 7, 3), Some("xfs"));
        assert_eq!(fstype_of(&mounts, 7, 4), None);
    }

    #[test]
    fn reading_the_table_keeps_it_and_its_file_for_the_next_read() {
        let (Ok(first), Ok(second)) = (read(), read()) else {
            eprintln!("skipped: no readable mountinfo");
            return;
        };
        // Both reads see the table (a mount by another process in between may change it).
        assert!(first.iter().any(|m| m.mountpoint == "/"));
        assert!(second.iter().any(|m| m.mountpoint == "/"));
        assert!(WATCHED.lock().expect("lock").is_some(), "the table is kept");
    }

    #[test]
    fn the_running_system_has_a_root_mount() {
        let mounts = current();
        if mounts.is_empty() {
            eprintln!("skipped: no readable mountinfo");
            return;
        }
        assert!(mounts.iter().any(|m| m.mountpoint == "/"));
    }
}
