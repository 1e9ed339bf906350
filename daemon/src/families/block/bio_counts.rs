//! The bio counters (`BLOCK_BIO_COUNTS` behind its slots), which two families read: the block
//! family (bio-level flags, by device and op) and the device-writes family (bytes and bios by
//! writeback source). `block_bio_queue` updates one counter per bio for both (see
//! `probe_common::block::BioKey`), so the map is taken out of the object once and shared.

use std::sync::{Arc, OnceLock};

use aya::Ebpf;
use probe_common::block::{
    BioCounts, BioKey,
    maps::{BLOCK_BIO_COUNTS, BLOCK_BIO_SLOTS},
};

use crate::metrics::{MapErrors, Slotted};

/// The shared map pair.
pub type BioCountMaps = Arc<Slotted<BioKey, BioCounts>>;

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
                Arc::new(Slotted::take(ebpf, BLOCK_BIO_SLOTS, BLOCK_BIO_COUNTS))
            })
            .clone()
    }
}

/// Every bio key's counts since load, CPUs, slots and hash added up; `None` if a map could not
/// be read.
pub fn read(maps: &BioCountMaps, errors: &MapErrors) -> Option<Vec<(BioKey, BioCounts)>> {
    maps.read(
        errors,
        |acc: &mut BioCounts, v| acc.merge(v),
        BioCounts::ZERO,
    )
}
