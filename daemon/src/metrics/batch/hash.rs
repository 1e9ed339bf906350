//! A whole per-CPU hash in a few batch calls, each CPU's values added up as they are copied
//! out, so no value is allocated on its own.

use aya::{
    Pod,
    maps::{IterableMap as _, MapData, PerCpuHashMap},
};

use super::{
    Batch, BatchAttr, BatchError, lookup_batch, per_cpu_copies, per_cpu_stride, possible_cpus,
    scratch::with_scratch,
};

/// The buffer one call fills, at most: a few calls read a map of small values on a host with
/// few CPUs, and a host with many CPUs still gets [`MIN_CHUNK`] elements per call.
const CHUNK_BYTES: usize = 32 * 1024;

/// The fewest elements asked for per call: a hash bucket holds one or two keys.
const MIN_CHUNK: usize = 8;

/// More elements than any of the daemon's hashes can hold: a bucket that does not fit a call of
/// this many is an error, not a reason to grow further.
const MAX_CHUNK: u32 = 1 << 16;

/// Every key of `map` with its CPUs' values added up by `merge` from `zero`, in the kernel's
/// bucket order: in batch calls, or key by key on a kernel without batch lookups.
pub fn per_cpu_hash<K: Pod, V: Pod>(
    map: &PerCpuHashMap<MapData, K, V>,
    merge: impl Fn(&mut V, &V),
    zero: V,
) -> Result<Vec<(K, V)>, BatchError> {
    match in_batches(map, &merge, zero) {
        Err(BatchError::Unsupported) => map
            .iter()
            .map(|entry| {
                let (key, values) = entry?;
                let mut total = zero;
                values.iter().for_each(|value| merge(&mut total, value));
                Ok((key, total))
            })
            .collect(),
        done => done,
    }
}

/// The whole hash in batch calls.
fn in_batches<K: Pod, V: Pod>(
    map: &PerCpuHashMap<MapData, K, V>,
    merge: impl Fn(&mut V, &V),
    zero: V,
) -> Result<Vec<(K, V)>, BatchError> {
    let cpus = possible_cpus()?;
    let stride = per_cpu_stride::<V>();
    let element_bytes = cpus * stride;
    let mut chunk = (CHUNK_BYTES / element_bytes).max(MIN_CHUNK) as u32;
    with_scratch(|scratch| {
        let mut out = Vec::new();
        // The kernel's batch token for a hash is a u32 bucket index; none starts at the first.
        let mut token: Option<u32> = None;
        loop {
            scratch.reserve(
                chunk as usize * size_of::<K>(),
                chunk as usize * element_bytes,
            );
            let mut next = 0u32;
            let mut attr = BatchAttr::new(scratch, chunk, token.as_ref(), &mut next);
            // SAFETY: the buffers have room for `chunk` keys of `size_of::<K>()` bytes (the
            // kernel packs them at the key size) and `chunk` values of `cpus` copies of
            // `stride` bytes; a hash's batch token is a u32, as `token` and `next` are.
            let batch = unsafe { lookup_batch(map.map(), &mut attr)? };
            if batch == Batch::NoRoom {
                // One bucket holds more keys than a call had room for: ask for more at once.
                if chunk >= MAX_CHUNK {
                    return Err(BatchError::BucketTooLarge(chunk));
                }
                chunk = chunk.saturating_mul(2);
                continue;
            }
            let copied = attr.count as usize;
            let keys = scratch.keys[..copied * size_of::<K>()].chunks_exact(size_of::<K>());
            let values = scratch.values[..copied * element_bytes].chunks_exact(element_bytes);
            for (key, per_cpu) in keys.zip(values) {
                // SAFETY: `key` is `size_of::<K>()` bytes; `K: Pod` may take any bytes, and
                // read_unaligned has no alignment need.
                let key = unsafe { std::ptr::read_unaligned(key.as_ptr().cast::<K>()) };
                let mut total = zero;
                per_cpu_copies::<V>(per_cpu).for_each(|value| merge(&mut total, &value));
                out.push((key, total));
            }
            if batch == Batch::End {
                return Ok(out);
            }
            token = Some(next);
        }
    })
}
