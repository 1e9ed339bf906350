//! A whole per-CPU array in one batch call.
//!
//! The slot arrays in front of the busiest aggregates (`probe_common::slots`) have 33 or 129
//! elements, read whole when a key took a slot since their last whole read
//! (`crate::metrics::Slotted`).

use aya::{
    Pod,
    maps::{IterableMap as _, MapData, PerCpuArray},
};

use super::{
    Batch, BatchAttr, BatchError, lookup_batch, per_cpu_copies, per_cpu_stride, possible_cpus,
    scratch::with_scratch,
};

/// Calls `each(index, value)` for every CPU's copy of every element of `map`, in index order:
/// in one batch call, or element by element on a kernel without batch lookups. On an error the
/// caller must drop what `each` saw (an element-by-element read may fail part way).
pub fn per_cpu_array<V: Pod>(
    map: &PerCpuArray<MapData, V>,
    mut each: impl FnMut(u32, V),
) -> Result<(), BatchError> {
    match in_one_call(map, &mut each) {
        Err(BatchError::Unsupported) => {
            for index in 0..map.len() {
                map.get(&index, 0)?
                    .iter()
                    .for_each(|value| each(index, *value));
            }
            Ok(())
        }
        done => done,
    }
}

/// The whole array in one batch call; nothing is visited when it fails.
fn in_one_call<V: Pod>(
    map: &PerCpuArray<MapData, V>,
    each: &mut impl FnMut(u32, V),
) -> Result<(), BatchError> {
    let entries = map.len();
    let cpus = possible_cpus()?;
    let stride = per_cpu_stride::<V>();
    let element_bytes = cpus * stride;
    with_scratch(|scratch| {
        scratch.reserve(
            entries as usize * size_of::<u32>(),
            entries as usize * element_bytes,
        );
        let mut out_batch = 0u32;
        let mut attr = BatchAttr::new(scratch, entries, None, &mut out_batch);
        // SAFETY: the buffers have room for `entries` u32 keys and `entries` values of `cpus`
        // copies of `stride` bytes, which is what the kernel writes for a per-CPU array of `V`;
        // an array's batch token is a u32 key, and `out_batch` is one.
        let batch = unsafe { lookup_batch(map.map(), &mut attr)? };
        // An array reports its end (ENOENT) when the call reaches it; a full array in one call
        // is also complete.
        if matches!(batch, Batch::NoRoom) || attr.count != entries {
            return Err(BatchError::Short {
                got: attr.count,
                want: entries,
            });
        }
        let elements =
            scratch.values[..entries as usize * element_bytes].chunks_exact(element_bytes);
        for (index, element) in (0u32..).zip(elements) {
            per_cpu_copies(element).for_each(|value| each(index, value));
        }
        Ok(())
    })
}
