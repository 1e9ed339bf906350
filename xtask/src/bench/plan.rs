//! How long and how often each phase runs: the full benchmark, and the `--quick` variant that
//! runs every phase briefly (under 3 minutes) so the test tier can check that it completes.

use std::time::Duration;

use super::workloads::Sizes;

/// Which phases a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phases {
    /// Every phase of the plan.
    All,
    /// The soak alone (`--soak-only`).
    SoakOnly,
    /// The per-bio cost of the device-writes family alone (`--bio-cost-only`).
    BioCostOnly { rounds: usize },
    /// The daemon's own CPU, memory and scrape latency alone (`--daemon-cost-only`).
    DaemonCostOnly,
}

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

    /// What a run of `phases` measures, with the parameters a reader needs to judge the figures.
    pub fn describe_phases(&self, phases: Phases) -> String {
        match phases {
            Phases::All => self.describe(),
            Phases::SoakOnly => format!("soak only: {} s", self.soak_secs),
            Phases::BioCostOnly { rounds } => format!(
                "per-bio phase only: {rounds} rounds of fio {} s on a {} MiB file under two \
                 daemons at once",
                self.sizes.fio_secs, self.sizes.fio_file_mib
            ),
            Phases::DaemonCostOnly => format!(
                "daemon-cost phase only: {} s idle and {} s under fio, one scrape a second; \
                 {} back-to-back scrapes, then {} scrapers × {}",
                self.daemon_phase_secs,
                self.daemon_phase_secs,
                self.scrapes_single,
                self.scrapers,
                self.scrapes_each
            ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_run_says_which_phases_it_measured() {
        let plan = Plan::full(8, 30);
        let bio = plan.describe_phases(Phases::BioCostOnly { rounds: 8 });
        assert!(
            bio.starts_with("per-bio phase only: 8 rounds of fio 20 s"),
            "{bio}"
        );
        assert!(!bio.contains("soak"), "{bio}");
        assert_eq!(plan.describe_phases(Phases::SoakOnly), "soak only: 1800 s");
        let daemon = plan.describe_phases(Phases::DaemonCostOnly);
        assert!(
            daemon.starts_with("daemon-cost phase only: 60 s idle"),
            "{daemon}"
        );
        assert!(!daemon.contains("soak"), "{daemon}");
        assert_eq!(plan.describe_phases(Phases::All), plan.describe());
    }
}
