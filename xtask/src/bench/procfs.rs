//! What the benchmark reads from `/proc`: a process's CPU time and memory, the BPF programs a
//! process holds, and facts about the host for the report header.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};

fn read(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// User plus system CPU time of `pid`, in seconds (`/proc/<pid>/stat` fields 14 and 15).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = read(format!("/proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).with_context(|| format!("parsing /proc/{pid}/stat"))?;
    // SAFETY: sysconf has no preconditions; it only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        bail!("sysconf(_SC_CLK_TCK) returned {hz}");
    }
    Ok(ticks as f64 / hz as f64)
}

/// utime + stime from a `stat` line. The command name may contain spaces and parentheses, so
/// fields are counted after its last `)`: the state is field 3, utime 14, stime 15.
fn parse_cpu_ticks(stat: &str) -> Result<u64> {
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("no ')' after the command name")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64> {
        let raw = fields.get(n - 3).context("line too short")?;
        raw.parse().with_context(|| format!("field {n} is {raw:?}"))
    };
    Ok(field(14)? + field(15)?)
}

/// A `/proc/<pid>/status` memory line (`VmRSS`, `VmHWM`), in bytes.
pub fn status_bytes(pid: u32, key: &str) -> Result<u64> {
    let status = read(format!("/proc/{pid}/status"))?;
    parse_status_kib(&status, key)
        .map(|kib| kib * 1024)
        .with_context(|| format!("no {key} in /proc/{pid}/status"))
}

fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Resets `pid`'s peak RSS (`VmHWM`) to its current RSS, so the next reading is the peak of
/// one phase rather than of the whole life (start-up parses BTF and peaks higher).
pub fn reset_peak_rss(pid: u32) -> Result<()> {
    let path = format!("/proc/{pid}/clear_refs");
    fs::write(&path, "5").with_context(|| format!("writing 5 to {path}"))
}

/// Ids of the BPF programs `pid` holds open, from the `prog_id:` lines of its fd infos. This
/// identifies a tool's programs even when other BPF users load programs of the same name.
pub fn bpf_prog_ids(pid: u32) -> Result<BTreeSet<u32>> {
    let dir = format!("/proc/{pid}/fdinfo");
    let mut ids = BTreeSet::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("listing {dir}"))? {
        let Ok(entry) = entry else { continue };
        // An fd can close between listing and reading; that is not an error.
        let Ok(info) = fs::read_to_string(entry.path()) else {
            continue;
        };
        ids.extend(parse_prog_id(&info));
    }
    Ok(ids)
}

fn parse_prog_id(fdinfo: &str) -> Option<u32> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("prog_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The kernel release (`uname -r`).
pub fn kernel_release() -> String {
    read("/proc/sys/kernel/osrelease").map_or_else(|_| "unknown".into(), |s| s.trim().to_owned())
}

/// "AMD EPYC, 2 CPUs": the first `model name` of `/proc/cpuinfo` and the online CPU count.
pub fn cpu_description() -> String {
    let model = read("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cpus} CPUs")
}

/// The three load averages of `/proc/loadavg`.
pub fn loadavg() -> String {
    read("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_comm() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 3 0";
        assert_eq!(parse_cpu_ticks(stat).unwrap(), 12);
        assert!(parse_cpu_ticks("42 (x) S 1").is_err());
    }

    #[test]
    fn parses_status_and_fdinfo() {
        let status = "Name:\twbscope\nVmHWM:\t   31772 kB\nVmRSS:\t   13416 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM"), Some(31772));
        assert_eq!(parse_status_kib(status, "VmRSS"), Some(13416));
        assert_eq!(parse_status_kib(status, "VmSwap"), None);
        let fdinfo = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nprog_id:\t1575\nrun_cnt:\t0\n";
        assert_eq!(parse_prog_id(fdinfo), Some(1575));
        assert_eq!(parse_prog_id("pos:\t0\n"), None);
    }

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).unwrap() >= 0.0);
        assert!(status_bytes(pid, "VmRSS").unwrap() > 0);
        assert!(!kernel_release().is_empty());
    }
}
