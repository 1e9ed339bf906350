//! The bio counters (`BLOCK_BIO_COUNTS` behind its slots), which two families read: the block
//! family (bio-level flags, by device and op) and the device-writes family (bytes and bios by
//! writeback source). `block_bio_queue` updates one counter per bio for both (see
//! `probe_common::block::BioKey`), so the map is taken out of the object once and shared.
//!
//! A scrape reads the counters for both families, and the stall-context sampler reads them too,
//! up to ten times a second: each read is the hash, the slot array's claim counter and the used
//! slots (`crate::metrics::Slotted`), several system calls. A scrape's families therefore share
//! one read: a scrape's read younger than [`SCRAPE_REUSE`] serves the next family (or a
//! concurrent scrape) again. The sampler's reads are its own, neither reused nor kept: a scrape
//! right after a workload must count every bio queued before it, not what the sampler saw a
//! moment earlier.

use std::{
    sync::{Arc, Mutex, OnceLock},
    time::{Duration, Instant},
};

use aya::Ebpf;
use probe_common::block::{
    BioCounts, BioKey,
    maps::{BLOCK_BIO_COUNTS, BLOCK_BIO_SLOTS},
};

use crate::metrics::{MapErrors, Slotted};

/// The shared map pair, with its last read.
pub type BioCountMaps = Arc<SharedBioCounts>;

/// Every bio key's counts, CPUs, slots and hash added up.
pub type BioCountsRead = Vec<(BioKey, BioCounts)>;

/// The maps and the last read of them.
pub struct SharedBioCounts {
    maps: Slotted<BioKey, BioCounts>,
    last: Mutex<Option<(Instant, BioCountsRead)>>,
}

/// How old a read may be and still serve a scrape: the families of one scrape are gathered
/// within a millisecond or two; counters this much older are as good for a Prometheus sample.
pub const SCRAPE_REUSE: Duration = Duration::from_millis(50);

/// How fresh a read must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Read now, and keep nothing (the stall-context sampler, which stamps its samples with
    /// the time).
    Now,
    /// Another scrape's read at most [`SCRAPE_REUSE`] old will do; a new read is kept for the
    /// next.
    Scrape,
}

/// Where the first family to ask leaves the maps for the other (a [`super::super::CollectorContext`]
/// member).
#[derive(Clone, Default)]
pub struct BioCountsSlot(Arc<OnceLock<BioCountMaps>>);

impl BioCountsSlot {
    /// The maps, taken out of `ebpf` (and registered for read-error counting) on the first
    /// call.
    pub fn get(&self, ebpf: &mut Ebpf, errors: &MapErrors) -> BioCountMaps {
        self.0
            .get_or_init(|| {
                errors.register(BLOCK_BIO_COUNTS);
                Arc::new(SharedBioCounts {
                    maps: Slotted::take(ebpf, BLOCK_BIO_SLOTS, BLOCK_BIO_COUNTS),
                    last: Mutex::new(None),
                })
            })
            .clone()
    }
}

/// Every bio key's counts since load, CPUs, slots and hash added up; `None` if a map could not
/// be read.
pub fn read(
    maps: &BioCountMaps,
    errors: &MapErrors,
    freshness: Freshness,
) -> Option<BioCountsRead> {
    read_at(maps, freshness, Instant::now(), || {
        maps.maps.read(
            errors,
            |acc: &mut BioCounts, v| acc.merge(v),
            BioCounts::ZERO,
        )
    })
}

/// [`read`] at `now`, with `read_maps` for the maps themselves.
fn read_at(
    maps: &SharedBioCounts,
    freshness: Freshness,
    now: Instant,
    read_maps: impl FnOnce() -> Option<BioCountsRead>,
) -> Option<BioCountsRead> {
    if freshness == Freshness::Now {
        return read_maps();
    }
    if let Ok(last) = maps.last.lock()
        && let Some((at, counts)) = last.as_ref()
        && now.saturating_duration_since(*at) < SCRAPE_REUSE
    {
        return Some(counts.clone());
    }
    let counts = read_maps()?;
    if let Ok(mut last) = maps.last.lock() {
        *last = Some((now, counts.clone()));
    }
    Some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> SharedBioCounts {
        SharedBioCounts {
            maps: Slotted::new("slots", None, "map", None),
            last: Mutex::new(None),
        }
    }

    fn counts(bios: u64) -> Option<BioCountsRead> {
        let key = BioKey {
            dev: 1,
            op: 1,
            source: 2,
            sync_mode: 0,
            reason: 0,
        };
        Some(vec![(
            key,
            BioCounts {
                bios,
                ..BioCounts::ZERO
            },
        )])
    }

    #[test]
    fn a_scrape_reuses_a_recent_scrape_read_and_never_the_samplers() {
        let maps = shared();
        let t0 = Instant::now();
        let bios = |c: Option<BioCountsRead>| c.map(|v| v[0].1.bios);
        // The sampler's read is not kept for a scrape.
        assert_eq!(
            bios(read_at(&maps, Freshness::Now, t0, || counts(1))),
            Some(1)
        );
        assert_eq!(
            bios(read_at(&maps, Freshness::Scrape, t0, || counts(2))),
            Some(2)
        );
        // The next family of the same scrape reuses it; the sampler reads anew.
        let soon = t0 + SCRAPE_REUSE / 2;
        assert_eq!(
            bios(read_at(&maps, Freshness::Scrape, soon, || counts(3))),
            Some(2)
        );
        assert_eq!(
            bios(read_at(&maps, Freshness::Now, soon, || counts(4))),
            Some(4)
        );
        // Older than SCRAPE_REUSE: read again.
        let later = t0 + SCRAPE_REUSE;
        assert_eq!(
            bios(read_at(&maps, Freshness::Scrape, later, || counts(5))),
            Some(5)
        );
        // A failed read serves nothing; the next scrape reads again.
        let after = later + SCRAPE_REUSE;
        assert_eq!(
            bios(read_at(&maps, Freshness::Scrape, after, || None)),
            None
        );
        assert_eq!(
            bios(read_at(&maps, Freshness::Scrape, after, || counts(6))),
            Some(6)
        );
    }
}
