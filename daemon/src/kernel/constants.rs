//! Kernel constants that are neither struct layouts (BTF) nor record fields (format files), read
//! from the running kernel instead of assumed: the tick rate `HZ`, and task-state bits.
//!
//! `HZ` is a build option (100, 250, 300 or 1000 on x86) and converts the jiffies some
//! tracepoints report. It comes from the kernel's own text first: the `writeback_single_inode`
//! print format computes an age as `(jiffies - REC->dirtied_when) / HZ`, and the preprocessor
//! expanded `HZ` to the number. Where that format differs, it is measured: jiffies against
//! CLOCK_MONOTONIC from /proc/timer_list, twice, some time apart.

use std::time::Duration;

use super::{KernelInfo, LayoutError};

/// How `HZ` was found, for `wbscope check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hz {
    pub hz: u32,
    pub source: &'static str,
}

/// How long the /proc/timer_list measurement waits between its two samples.
const MEASURE_INTERVAL: Duration = Duration::from_millis(200);

/// The running kernel's `HZ`, or why it could not be found.
pub fn kernel_hz(kernel: &KernelInfo) -> Result<Hz, LayoutError> {
    for event in ["writeback_single_inode", "writeback_single_inode_start"] {
        if let Ok(format) = kernel.tracefs.event_format("writeback", event)
            && let Some(hz) = hz_from_print_fmt(&format.print_fmt)
        {
            return Ok(Hz {
                hz,
                source: "writeback_single_inode print format",
            });
        }
    }
    measure_hz_from_timer_list().map(|hz| Hz {
        hz,
        source: "measured from /proc/timer_list",
    })
}

fn measure_hz_from_timer_list() -> Result<u32, LayoutError> {
    const TIMER_LIST: &str = "/proc/timer_list";
    let unreadable = |reason: String| LayoutError::File {
        path: TIMER_LIST,
        reason,
    };
    let sample = || {
        let text = std::fs::read_to_string(TIMER_LIST).map_err(|e| unreadable(e.to_string()))?;
        timer_list_sample(&text).ok_or_else(|| unreadable("no now/jiffies lines".to_owned()))
    };
    let (t0, j0) = sample()?;
    std::thread::sleep(MEASURE_INTERVAL);
    let (t1, j1) = sample()?;
    hz_from_samples((t0, j0), (t1, j1))
        .ok_or_else(|| unreadable("jiffies did not advance".to_owned()))
}

/// Ticks per second between two (ns, jiffies) samples, snapped to the nearest tick rate the
/// kernel's Kconfig offers when within 5% of it (a sample's jiffies can lag its clock by a tick).
pub fn hz_from_samples(a: (u64, u64), b: (u64, u64)) -> Option<u32> {
    let ns = b.0.checked_sub(a.0)?;
    let ticks = b.1.checked_sub(a.1)?;
    if ns == 0 || ticks == 0 {
        return None;
    }
    let measured = ticks as f64 * 1e9 / ns as f64;
    let snapped = [100u32, 250, 300, 1000]
        .into_iter()
        .find(|hz| (measured / f64::from(*hz) - 1.0).abs() <= 0.05);
    Some(snapped.unwrap_or(measured.round() as u32))
}

/// `TASK_UNINTERRUPTIBLE` and where its value came from (for `wbscope check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskState {
    pub uninterruptible: u32,
    pub source: &'static str,
}

/// The bit every Linux release has used for `TASK_UNINTERRUPTIBLE` (include/linux/sched.h).
/// Taken only where the kernel's own table cannot be read (no tracefs, and no capability to
/// mount it): the tp_btf probes need no tracefs otherwise, and this bit has never moved.
const TASK_UNINTERRUPTIBLE_WITHOUT_TRACEFS: u32 = 0x2;

/// The value of `TASK_UNINTERRUPTIBLE`, from the `sched:sched_switch` print format, which lists
/// the task-state bits in a `__print_flags` table (`{ 0x00000002, "D" }`). Without a readable
/// format (no tracefs), Linux's fixed value, said so in the source; a format that is readable
/// but has no "D" entry is an error (a kernel we do not understand).
pub fn task_uninterruptible(kernel: &KernelInfo) -> Result<TaskState, LayoutError> {
    let Ok(format) = kernel.event_format("sched", "sched_switch") else {
        return Ok(TaskState {
            uninterruptible: TASK_UNINTERRUPTIBLE_WITHOUT_TRACEFS,
            source: "Linux's fixed value: the sched_switch format is not readable",
        });
    };
    print_flag_value(&format.print_fmt, "D")
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v != 0)
        .map(|uninterruptible| TaskState {
            uninterruptible,
            source: "from the sched_switch format",
        })
        .ok_or_else(|| {
            LayoutError::Unhandled(
                "sched_switch print format has no \"D\" task state entry".to_owned(),
            )
        })
}

/// The kernel's tick rate as the `writeback_single_inode` tracepoint's print format divides by it
/// (`(jiffies - REC->dirtied_when) / 250` is `/ HZ` with HZ expanded by the preprocessor).
pub fn hz_from_print_fmt(print_fmt: &str) -> Option<u32> {
    let (_, after) = print_fmt.split_once("(jiffies - REC->dirtied_when) /")?;
    let digits: String = after
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|hz| *hz > 0)
}

/// One sample of /proc/timer_list: `now at N nsecs` and the first `jiffies: N`.
pub fn timer_list_sample(text: &str) -> Option<(u64, u64)> {
    let now_ns = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("now at ")?
            .strip_suffix(" nsecs")?
            .parse()
            .ok()
    })?;
    let jiffies = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("jiffies:")?.trim().parse().ok())?;
    Some((now_ns, jiffies))
}

/// The value of the `__print_flags` entry named `name` (e.g. `"D"`) in a print format:
/// `{ 0x00000002, "D" }`.
pub fn print_flag_value(print_fmt: &str, name: &str) -> Option<u64> {
    let quoted = format!("\"{name}\"");
    let mut rest = print_fmt;
    while let Some(pos) = rest.find(&quoted) {
        let before = &rest[..pos];
        rest = &rest[pos + quoted.len()..];
        if !rest.trim_start().starts_with('}') {
            continue;
        }
        let Some((_, entry)) = before.rsplit_once('{') else {
            continue;
        };
        let Some(value) = entry.trim().strip_suffix(',') else {
            continue;
        };
        let value = value.trim();
        let parsed = match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => value.parse().ok(),
        };
        if parsed.is_some() {
            return parsed;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hz_from_the_writeback_single_inode_format() {
        let fmt = r#""bdi %s: ino=%lu age=%lu", REC->name, REC->dirtied_when, (jiffies - REC->dirtied_when) / 250, REC->writeback_index"#;
        assert_eq!(hz_from_print_fmt(fmt), Some(250));
        assert_eq!(
            hz_from_print_fmt("(jiffies - REC->dirtied_when) / 1000)"),
            Some(1000)
        );
        assert_eq!(hz_from_print_fmt("REC->age / HZ"), None);
    }

    #[test]
    fn timer_list() {
        let text = "Timer List Version: v0.10\nHRTIMER_MAX_CLOCK_BASES: 8\nnow at 1910809239799 nsecs\n\ncpu: 0\n jiffies: 4295369936\n";
        assert_eq!(timer_list_sample(text), Some((1910809239799, 4295369936)));
        assert_eq!(timer_list_sample("nothing"), None);
    }

    #[test]
    fn hz_from_two_samples_snaps_to_kconfig_rates() {
        // 200 ms at HZ=250 is 50 ticks; one tick of sampling skew is still 250.
        assert_eq!(hz_from_samples((0, 1000), (200_000_000, 1050)), Some(250));
        assert_eq!(hz_from_samples((0, 1000), (200_000_000, 1051)), Some(250));
        assert_eq!(hz_from_samples((0, 0), (1_000_000_000, 1000)), Some(1000));
        // A rate Kconfig does not offer on x86 is reported as measured.
        assert_eq!(hz_from_samples((0, 0), (1_000_000_000, 24)), Some(24));
        assert_eq!(hz_from_samples((5, 7), (5, 7)), None);
    }

    #[test]
    fn flag_value_from_print_flags() {
        let fmt = r#"__print_flags(REC->prev_state & 255, "|", { 0x00000001, "S" }, { 0x00000002, "D" }, { 0x00000004, "T" }) : "R""#;
        assert_eq!(print_flag_value(fmt, "D"), Some(2));
        assert_eq!(print_flag_value(fmt, "S"), Some(1));
        // "R" is not a table entry.
        assert_eq!(print_flag_value(fmt, "R"), None);
        assert_eq!(print_flag_value(fmt, "X"), None);
        assert_eq!(print_flag_value("{ 16, \"X\" }", "X"), Some(16));
    }
}
