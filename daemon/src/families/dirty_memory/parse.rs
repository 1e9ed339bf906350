//! Parsers for the kernel text files the dirty-memory family reads at scrape time: /proc/vmstat,
//! /proc/meminfo, debugfs `bdi/MAJ:MIN/stats` and /proc/pressure/io. Lines that do not parse are
//! skipped, never guessed: a kernel that renames or re-units a field loses that one series.

/// The values of the `name value` lines (/proc/vmstat: counts, in pages where the name says
/// so) named in `names`, in their order: a scrape keeps six of vmstat's ~180 lines, so nothing
/// is collected for the others (no map, no copy).
pub fn name_values<const N: usize>(text: &str, names: [&str; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(name), Some(value), None) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if let Some(i) = names.iter().position(|n| *n == name) {
            out[i] = value.parse().ok();
        }
    }
    out
}

/// The values of the `Name:   value [unit]` lines (/proc/meminfo, debugfs bdi stats) named in
/// `names`, in their order, converted to bytes (or bytes per second) using the unit the kernel
/// printed. Lines without a unit, or with one this parser does not know, give `None`: their
/// values are not byte amounts.
pub fn byte_values<const N: usize>(text: &str, names: [&str; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(i) = names.iter().position(|n| *n == name.trim()) else {
            continue;
        };
        out[i] = byte_amount(rest);
    }
    out
}

/// `value unit` in bytes.
fn byte_amount(rest: &str) -> Option<u64> {
    let mut words = rest.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    let scale = unit_scale(words.next()?)?;
    if words.next().is_some() {
        return None;
    }
    value.checked_mul(scale)
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

/// The `(major, minor)` of every block device /proc/partitions lists: the kernel lists only
/// devices with a medium (a detached loop device, an empty drive are left out).
pub fn partitions(text: &str) -> std::collections::BTreeSet<(u32, u32)> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let major = words.next()?.parse().ok()?;
            let minor = words.next()?.parse().ok()?;
            Some((major, minor))
        })
        .collect()
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
        let text = "nr_dirty 159004\nnr_writeback 0\nbroken line here\nnr_x abc\n";
        assert_eq!(
            name_values(
                text,
                ["nr_writeback", "nr_dirty", "nr_x", "broken", "nr_absent"]
            ),
            [Some(0), Some(159004), None, None, None]
        );
    }

    #[test]
    fn bdi_stats_in_the_units_the_kernel_prints() {
        let text = "BdiWriteback:                0 kB\nBdiReclaimable:         690584 kB\n\
                    BdiDirtyThresh:        4585580 kB\nBdiWriteBandwidth:       22280 kBps\n\
                    b_dirty:                  1676\nstate:                       5\n\
                    Weird:                  7 furlongs\n";
        let v = byte_values(
            text,
            [
                "BdiWriteback",
                "BdiReclaimable",
                "BdiDirtyThresh",
                "BdiWriteBandwidth",
            ],
        );
        assert_eq!(
            v,
            [
                Some(0),
                Some(690584 << 10),
                Some(4585580 << 10),
                Some(22280 << 10)
            ]
        );
        // Counts and unknown units are not byte amounts.
        assert_eq!(byte_values(text, ["b_dirty", "Weird", "Absent"]), [None; 3]);
    }

    #[test]
    fn meminfo_lines() {
        let text = "MemTotal:       24684084 kB\nHugePages_Total:       0\n";
        assert_eq!(
            byte_values(text, ["MemTotal", "HugePages_Total"]),
            [Some(24684084 << 10), None]
        );
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

    #[test]
    fn partitions_lists_devices_with_a_medium() {
        let text = "major minor  #blocks  name\n\n 254        0   41943040 vda\n 254        1   \
                    41942016 vda1\n   7        3      65536 loop3\n";
        let devices = partitions(text);
        assert_eq!(
            devices.into_iter().collect::<Vec<_>>(),
            vec![(7, 3), (254, 0), (254, 1)]
        );
        assert!(partitions("").is_empty());
    }
}
