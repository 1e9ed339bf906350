//! The standard `process_*` metrics (names and help texts as every Prometheus client library
//! exports them), read in four system calls per scrape, with failures counted.
//!
//! The prometheus crate's collector read /proc/self/stat through the procfs crate, listed
//! /proc/self/fd (an entry per descriptor: this daemon holds some two hundred, one per BPF map,
//! program and link) and parsed /proc/self/limits on every scrape: about a tenth of a scrape's
//! time. Here: /proc/self/stat once (CPU, memory, threads), the descriptor count as the size of
//! /proc/self/fd (one `statx`, since 6.2; the listing on older kernels) and the descriptor limit
//! from `getrlimit`. It also keeps the fraction of CPU seconds the crate truncated, and says
//! when a source fails instead of returning fewer families.

use std::path::Path;

use prometheus::{
    core::{Collector, Desc},
    proto::MetricFamily,
};

use super::{ScrapeErrors, describe, proto::MetricBuilder};
use crate::kernel::text_file;

/// The family name in `wbscope_scrape_errors_total`.
const FAMILY: &str = "process";

const CPU: &str = "process_cpu_seconds_total";
const OPEN_FDS: &str = "process_open_fds";
const MAX_FDS: &str = "process_max_fds";
const VIRTUAL: &str = "process_virtual_memory_bytes";
const RESIDENT: &str = "process_resident_memory_bytes";
const START: &str = "process_start_time_seconds";
const THREADS: &str = "process_threads";

const FAMILIES: &[(&str, &str)] = &[
    (CPU, "Total user and system CPU time spent in seconds."),
    (OPEN_FDS, "Number of open file descriptors."),
    (MAX_FDS, "Maximum number of open file descriptors."),
    (VIRTUAL, "Virtual memory size in bytes."),
    (RESIDENT, "Resident memory size in bytes."),
    (
        START,
        "Start time of the process since unix epoch in seconds.",
    ),
    (THREADS, "Number of OS threads in the process."),
];

const STAT: &str = "/proc/self/stat";
const FD_DIR: &str = "/proc/self/fd";

/// The fields of /proc/self/stat this collector exports (proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    /// `utime` + `stime`, in clock ticks.
    cpu_ticks: u64,
    num_threads: u64,
    /// Since boot, in clock ticks.
    start_ticks: u64,
    vsize_bytes: u64,
    rss_pages: u64,
}

impl Stat {
    /// Parses a /proc/PID/stat line. The name (field 2) may hold spaces and parentheses, so
    /// fields are counted from its closing parenthesis, the last one on the line.
    fn parse(line: &str) -> Option<Stat> {
        let (_, rest) = line.rsplit_once(')')?;
        // Field 3 (`state`) is the first word after the name.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
        Some(Stat {
            cpu_ticks: field(14)?.checked_add(field(15)?)?,
            num_threads: field(20)?,
            start_ticks: field(22)?,
            vsize_bytes: field(23)?,
            rss_pages: field(24)?,
        })
    }
}

/// The `process_*` families of this process.
pub struct ProcessCollector {
    descs: Vec<Desc>,
    errors: ScrapeErrors,
    ticks_per_second: f64,
    page_size: u64,
    /// `process_start_time_seconds`, fixed at start (`None` if /proc/stat had no boot time).
    start_time: Option<f64>,
}

impl ProcessCollector {
    pub fn for_self(errors: ScrapeErrors) -> ProcessCollector {
        errors.register(FAMILY);
        let ticks_per_second = clock_ticks_per_second();
        let start_ticks = text_file::with_text(Path::new(STAT), Stat::parse)
            .ok()
            .flatten()
            .map(|s| s.start_ticks);
        let boot_time = text_file::with_text(Path::new("/proc/stat"), boot_time_secs)
            .ok()
            .flatten();
        let start_time = start_ticks
            .zip(boot_time)
            .map(|(ticks, boot)| boot as f64 + ticks as f64 / ticks_per_second);
        ProcessCollector {
            descs: describe(FAMILIES),
            errors,
            ticks_per_second,
            page_size: crate::kernel::page_size(),
            start_time,
        }
    }

    fn gauge(out: &mut Vec<MetricFamily>, name: &str, value: f64) {
        let mut family = MetricBuilder::gauge(name, FAMILIES);
        family.add_gauge(&[], value);
        out.extend(family.finish());
    }
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut out = Vec::with_capacity(FAMILIES.len());
        match text_file::with_text(Path::new(STAT), Stat::parse) {
            Ok(Some(stat)) => {
                let mut cpu = MetricBuilder::counter(CPU, FAMILIES);
                cpu.add_counter(&[], stat.cpu_ticks as f64 / self.ticks_per_second);
                out.extend(cpu.finish());
                Self::gauge(&mut out, VIRTUAL, stat.vsize_bytes as f64);
                let resident = stat.rss_pages.saturating_mul(self.page_size);
                Self::gauge(&mut out, RESIDENT, resident as f64);
                Self::gauge(&mut out, THREADS, stat.num_threads as f64);
            }
            Ok(None) => self
                .errors
                .count(FAMILY, STAT, &"a line proc(5) does not describe"),
            Err(err) => self.errors.count(FAMILY, STAT, &err),
        }
        match open_fds() {
            Ok(count) => Self::gauge(&mut out, OPEN_FDS, count as f64),
            Err(err) => self.errors.count(FAMILY, FD_DIR, &err),
        }
        if let Some(max) = max_fds() {
            Self::gauge(&mut out, MAX_FDS, max as f64);
        }
        if let Some(start) = self.start_time {
            Self::gauge(&mut out, START, start);
        }
        out
    }
}

/// Open descriptors: since 6.2 the size of /proc/PID/fd is their count; before, it is 0 and
/// the directory is listed (a process always has some descriptor open, so 0 means "not
/// counted").
fn open_fds() -> std::io::Result<u64> {
    let size = std::fs::metadata(FD_DIR)?.len();
    if size > 0 {
        return Ok(size);
    }
    Ok(std::fs::read_dir(FD_DIR)?.count() as u64)
}

/// The soft limit on descriptors; `None` when unlimited or unreadable (as the other client
/// libraries, which leave the series out then).
fn max_fds() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, exclusively borrowed `limit`.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (rc == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// `USER_HZ`, the unit of /proc's tick counts (100 on every Linux architecture in practice).
fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions and only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// The `btime` line of /proc/stat: boot time in seconds since the epoch.
fn boot_time_secs(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_name() {
        // A name with spaces and a closing parenthesis of its own.
        let line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1029 0 0 0 \
                    37 12 0 0 20 0 5 0 1234567 10485760 2560 18446744073709551615 \
                    1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            Stat::parse(line),
            Some(Stat {
                cpu_ticks: 49,
                num_threads: 5,
                start_ticks: 1234567,
                vsize_bytes: 10485760,
                rss_pages: 2560,
            })
        );
        assert_eq!(Stat::parse("4242 (cut) S 1 2 3\n"), None);
        assert_eq!(Stat::parse("no name here"), None);
    }

    #[test]
    fn boot_time_from_proc_stat() {
        let text = "cpu  1 2 3\nintr 5\nctxt 99\nbtime 1764892800\nprocesses 7\n";
        assert_eq!(boot_time_secs(text), Some(1764892800));
        assert_eq!(boot_time_secs("cpu 1\n"), None);
    }

    #[test]
    fn this_process_is_measured() {
        let errors = ScrapeErrors::default();
        let collector = ProcessCollector::for_self(errors);
        let families = collector.collect();
        let value = |name: &str| {
            let family = families
                .iter()
                .find(|f| f.name() == name)
                .unwrap_or_else(|| panic!("no {name}"));
            let metric = &family.get_metric()[0];
            if name == CPU {
                metric.get_counter().value()
            } else {
                metric.get_gauge().value()
            }
        };
        // The test harness runs each test on a thread of its own.
        assert!(value(THREADS) >= 2.0);
        // At least stdin, stdout and stderr (other tests open files on their own threads, so
        // the exact count moves).
        let open = value(OPEN_FDS);
        assert!(open >= 3.0, "{open}");
        assert!(value(RESIDENT) > 0.0 && value(VIRTUAL) >= value(RESIDENT));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value(START);
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
        assert!(value(CPU) >= 0.0);
        assert_eq!(families.len(), FAMILIES.len());
    }
}
