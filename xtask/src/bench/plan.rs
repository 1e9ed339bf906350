//! How long and how often each phase runs: the full benchmark, and the `--quick` variant that
//! runs every phase briefly (under 3 minutes) so the test tier can check that it completes.

use std::time::Duration;

use super::workloads::Sizes;

/// Sizes, repetitions and durations of every phase.
#[derive(Debug, Clone)]
pub struct Plan {
    pub quick: bool,
    pub sizes: Sizes,
    /// A/B pairs per workload.
    pub pairs: usize,
    /// Without/with pairs of getppid trials.
    pub syscall_pairs: usize,
    /// getppid calls per trial.
    pub syscall_calls: u64,
    /// Length of the idle and the loaded daemon-cost phase.
    pub daemon_phase_secs: u64,
    /// Back-to-back scrapes of the single scraper.
    pub scrapes_single: usize,
    /// Concurrent scrapers, and scrapes by each.
    pub scrapers: usize,
    pub scrapes_each: usize,
    /// Soak length (0: no soak).
    pub soak_secs: u64,
    /// Pause between sync storms in the soak.
    pub storm_every: Duration,
}

impl Plan {
    /// The full benchmark.
    pub fn full(pairs: usize, soak_minutes: u64) -> Plan {
        Plan {
            quick: false,
            sizes: Sizes {
                fio_secs: 20,
                fio_file_mib: 256,
                buffered_mib: 1024,
            },
            pairs,
            syscall_pairs: 5,
            syscall_calls: 5_000_000,
            daemon_phase_secs: 60,
            scrapes_single: 300,
            scrapers: 50,
            scrapes_each: 10,
            soak_secs: soak_minutes * 60,
            storm_every: Duration::from_secs(10),
        }
    }

    /// Every phase, briefly: one A/B pair, seconds-long workloads, a 15 s soak.
    pub fn quick() -> Plan {
        Plan {
            quick: true,
            sizes: Sizes {
                fio_secs: 3,
                fio_file_mib: 64,
                buffered_mib: 128,
            },
            pairs: 1,
            syscall_pairs: 1,
            syscall_calls: 1_000_000,
            daemon_phase_secs: 5,
            scrapes_single: 20,
            scrapers: 50,
            scrapes_each: 2,
            soak_secs: 15,
            storm_every: Duration::from_secs(3),
        }
    }

    /// `full` or `quick`, with the parameters a reader needs to judge the figures.
    pub fn describe(&self) -> String {
        let soak = if self.soak_secs == 0 {
            "no soak".to_owned()
        } else {
            format!("{} s soak", self.soak_secs)
        };
        format!(
            "{}: fio {} s on a {} MiB file, buffered {} MiB, {} A/B pair(s) per workload, \
             {} s daemon-cost phases, {soak}",
            if self.quick { "quick" } else { "full" },
            self.sizes.fio_secs,
            self.sizes.fio_file_mib,
            self.sizes.buffered_mib,
            self.pairs,
            self.daemon_phase_secs,
        )
    }
}
