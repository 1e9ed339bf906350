//! Parsers for the kernel text files the dirty-memory family reads at scrape time: /proc/vmstat,
//! /proc/meminfo, debugfs `bdi/MAJ:MIN/stats` and /proc/pressure/io. Lines that do not parse are
//! skipped, never guessed: a kernel that renames or re-units a field loses that one series.

use std::collections::BTreeMap;

/// `name value` lines (/proc/vmstat): counts, in pages where the name says so. The names borrow
/// from `text`: a scrape parses vmstat's ~180 lines and keeps six, so no name is copied.
pub fn name_values(text: &str) -> BTreeMap<&str, u64> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (name, value) = (words.next()?, words.next()?);
            if words.next().is_some() {
                return None;
            }
            Some((name, value.parse().ok()?))
        })
        .collect()
}

/// `Name:   value [unit]` lines (/proc/meminfo, debugfs bdi stats), converted to bytes (or bytes
/// per second) using the unit the kernel printed. Lines without a unit, or with one this parser
/// does not know, are left out: their values are not byte amounts. The names borrow from `text`.
pub fn byte_values(text: &str) -> BTreeMap<&str, u64> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let mut words = rest.split_whitespace();
            let value: u64 = words.next()?.parse().ok()?;
            let scale = unit_scale(words.next()?)?;
            if words.next().is_some() {
                return None;
            }
            Some((name.trim(), value.checked_mul(scale)?))
        })
        .collect()
}

/// Bytes per unit for the units the kernel prints in these files (`kB` is KiB in both; the
/// bandwidth line says `kBps`).
fn unit_scale(unit: &str) -> Option<u64> {
    match unit {
        "B" | "Bps" => Some(1),
        "kB" | "KB" | "kBps" | "KBps" | "kB/s" => Some(1 << 10),
        "MB" | "MBps" | "MB/s" => Some(1 << 20),
        _ => None,
    }
}

/// Totals of /proc/pressure/io in microseconds: `(some, full)`, each `None` when its line is
/// missing or malformed.
pub fn psi_totals(text: &str) -> (Option<u64>, Option<u64>) {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let slot = match words.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        *slot = words
            .find_map(|w| w.strip_prefix("total="))
            .and_then(|v| v.parse().ok());
    }
    (some, full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmstat_lines() {
        let v = name_values("nr_dirty 159004\nnr_writeback 0\nbroken line here\nnr_x abc\n");
        assert_eq!(v.get("nr_dirty"), Some(&159004));
        assert_eq!(v.get("nr_writeback"), Some(&0));
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn bdi_stats_in_the_units_the_kernel_prints() {
        let text = "BdiWriteback:                0 kB\nBdiReclaimable:         690584 kB\n\
                    BdiDirtyThresh:        4585580 kB\nBdiWriteBandwidth:       22280 kBps\n\
                    b_dirty:                  1676\nstate:                       5\n\
                    Weird:                  7 furlongs\n";
        let v = byte_values(text);
        assert_eq!(v.get("BdiWriteback"), Some(&0));
        assert_eq!(v.get("BdiReclaimable"), Some(&(690584 << 10)));
        assert_eq!(v.get("BdiDirtyThresh"), Some(&(4585580 << 10)));
        assert_eq!(v.get("BdiWriteBandwidth"), Some(&(22280 << 10)));
        // Counts and unknown units are not byte amounts.
        assert_eq!(v.get("b_dirty"), None);
        assert_eq!(v.get("Weird"), None);
    }

    #[test]
    fn meminfo_lines() {
        let v = byte_values("MemTotal:       24684084 kB\nHugePages_Total:       0\n");
        assert_eq!(v.get("MemTotal"), Some(&(24684084 << 10)));
        assert_eq!(v.get("HugePages_Total"), None);
    }

    #[test]
    fn psi_io_totals() {
        let text = "some avg10=0.00 avg60=1.45 avg300=3.72 total=66416079\n\
                    full avg10=0.00 avg60=1.10 avg300=3.23 total=59885035\n";
        assert_eq!(psi_totals(text), (Some(66416079), Some(59885035)));
        assert_eq!(
            psi_totals("some avg10=0.00 total=5\n"),
            (Some(5), None),
            "older kernels have no full line"
        );
        assert_eq!(psi_totals(""), (None, None));
    }
}
