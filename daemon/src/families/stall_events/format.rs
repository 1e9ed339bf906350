//! One aligned human line per stall event, for `wbscope trace`.

use super::event::Stall;

/// The column header matching [`line`].
pub const HEADER: &str = "TIME (UTC)       KIND                  DEVICE      PID      COMM             \
                          DURATION   WB_WAIT  THROTTLE   JOURNAL     FLUSH  INODE  CGROUP  VERDICT";

fn ms(ns: u64) -> String {
    format!("{:.1}ms", ns as f64 / 1e6)
}

/// `HH:MM:SS.micros` of an RFC 3339 time (the date is the same for a whole session, mostly).
pub fn clock(rfc3339: &str) -> &str {
    rfc3339
        .split_once('T')
        .map_or(rfc3339, |(_, t)| t.trim_end_matches('Z'))
}

/// The event as one aligned line.
pub fn line(s: &Stall) -> String {
    let inode = if s.inode == 0 {
        "-".to_owned()
    } else {
        s.inode.to_string()
    };
    let cgroup = if s.cgroup.is_empty() {
        "-"
    } else {
        s.cgroup.as_str()
    };
    format!(
        "{:<16} {:<21} {:<11} {:<8} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9}  {}  {}{}",
        clock(&s.time),
        s.kind,
        s.device,
        s.pid,
        s.comm,
        ms(s.duration_ns),
        ms(s.writeback_wait_ns),
        ms(s.throttle_ns),
        ms(s.journal_ns),
        ms(s.flush_ns),
        inode,
        cgroup,
        if s.verdict.is_empty() {
            String::new()
        } else {
            format!("  {}", s.verdict)
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_with_the_header() {
        let s = Stall {
            time: "2026-07-01T12:00:03.123456Z".into(),
            kind: "fsync".into(),
            device: "loop3".into(),
            pid: 4242,
            tgid: 4242,
            comm: "dd".into(),
            cgroup_id: 1,
            cgroup: "/system.slice/db.service".into(),
            inode: 12,
            duration_ns: 3_012_400_000,
            journal_ns: 2_900_000_000,
            flush_ns: 100_000_000,
            ..Stall::default()
        };
        let l = line(&s);
        assert!(l.starts_with("12:00:03.123456  fsync"), "{l}");
        assert!(l.contains("3012.4ms"), "{l}");
        assert_eq!(l.find("loop3"), HEADER.find("DEVICE"));
        assert_eq!(l.find("4242"), HEADER.find("PID"));
        assert!(l.ends_with("  12  /system.slice/db.service"), "{l}");
    }
}
