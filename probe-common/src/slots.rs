//! Direct-mapped per-CPU slot arrays: the fast path of the aggregates updated once per bio.
//!
//! A per-CPU hash lookup costs tens of nanoseconds; an array element is a bounds check and a
//! load. So an aggregate keyed by an 8-byte key keeps its first keys in a per-CPU array of
//! [`SLOT_COUNT`] slots, the slot chosen by a hash of the key's bits and tagged with them.
//! The first key to reach a free slot on a CPU takes it for good (per CPU: no other CPU writes
//! that copy, so claiming needs no atomics); a key whose slot another key holds goes to the
//! aggregate's per-CPU hash as before. User space adds both up by key, so a collision costs
//! speed, never a count.

/// log2 of the slots per array.
pub const SLOT_BITS: u32 = 5;
/// Slots per array.
pub const SLOT_COUNT: u32 = 1 << SLOT_BITS;

/// One slot: the key's bits, whether a key holds it, and that key's value on this CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot<V> {
    pub key: u64,
    /// 0: free (the kernel zeroes array elements); 1: `key` holds it.
    pub used: u64,
    pub value: V,
}

/// The bits of an 8-byte key.
#[inline(always)]
pub fn key_bits<K: Copy>(key: &K) -> u64 {
    const { assert!(core::mem::size_of::<K>() == 8) };
    // SAFETY: `K` is 8 bytes (asserted above) of plain integers (every slot-able key is a
    // `#[repr(C)]` struct of integers without padding); read_unaligned has no alignment need.
    unsafe { core::ptr::read_unaligned((key as *const K).cast::<u64>()) }
}

/// The key whose bits are `bits` (user space, reading slots back).
#[inline(always)]
pub fn key_from_bits<K: Copy>(bits: u64) -> K {
    const { assert!(core::mem::size_of::<K>() == 8) };
    // SAFETY: as in `key_bits`: every bit pattern of 8 bytes is a valid key of plain integers.
    unsafe { core::ptr::read_unaligned((&bits as *const u64).cast::<K>()) }
}

/// The slot of a key: Fibonacci hashing of its bits (the keys differ in few low bits: device
/// minors, ops, sources).
#[inline(always)]
pub const fn slot_index(bits: u64) -> u32 {
    (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOT_BITS)) as u32
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Key {
        dev: u32,
        op: u16,
        sync: u16,
    }

    #[test]
    fn keys_round_trip_through_their_bits() {
        let k = Key {
            dev: (7 << 20) | 3,
            op: 1,
            sync: 1,
        };
        assert_eq!(key_from_bits::<Key>(key_bits(&k)), k);
    }

    #[test]
    fn nearby_keys_spread_over_the_slots() {
        let used: std::collections::BTreeSet<u32> = (0..16u32)
            .map(|minor| {
                slot_index(key_bits(&Key {
                    dev: (7 << 20) | minor,
                    op: 1,
                    sync: 0,
                }))
            })
            .collect();
        assert!(used.iter().all(|s| *s < SLOT_COUNT));
        assert!(used.len() >= 10, "16 loop devices in {} slots", used.len());
    }
}
