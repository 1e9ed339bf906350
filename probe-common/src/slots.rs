//! Direct-mapped per-CPU slot arrays: the fast path of the aggregates updated once per bio.
//!
//! A per-CPU hash lookup costs tens of nanoseconds; an array element is a bounds check and a
//! load. So an aggregate keyed by an 8-byte key keeps its first keys in a per-CPU array of
//! [`SLOT_COUNT`] slots, tagged with the key's bits. Each key has two candidate slots (two hashes
//! of its bits, [`slot_indexes`]): with one, a host's handful of busy keys collide in 32 slots
//! more often than not (8 keys: about a 60 % chance that two share a slot), and the loser pays
//! the hash lookup on every event. The first key to reach a free slot on a CPU takes it for good (per CPU: no other CPU writes
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

/// The two candidate slots of a key: two fields of the Fibonacci hash of its bits (the keys
/// differ in few low bits: device minors, ops, sources), the second made to differ from the
/// first.
#[inline(always)]
pub const fn slot_indexes(bits: u64) -> (u32, u32) {
    let product = bits.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let first = (product >> (64 - SLOT_BITS)) as u32;
    let second = (product >> (64 - 2 * SLOT_BITS)) as u32 & (SLOT_COUNT - 1);
    // Equal fields would give the key one slot: the neighbour is its second.
    let second = if second == first { first ^ 1 } else { second };
    (first, second)
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
                slot_indexes(key_bits(&Key {
                    dev: (7 << 20) | minor,
                    op: 1,
                    sync: 0,
                }))
                .0
            })
            .collect();
        assert!(used.iter().all(|s| *s < SLOT_COUNT));
        assert!(used.len() >= 10, "16 loop devices in {} slots", used.len());
    }

    /// Claims slots the way the probes do (first candidate, then second, first come first
    /// served) and returns how many of `keys` got one.
    fn placed(keys: &[Key]) -> usize {
        let mut taken = [None::<u64>; SLOT_COUNT as usize];
        keys.iter()
            .filter(|k| {
                let bits = key_bits(*k);
                let (a, b) = slot_indexes(bits);
                [a, b].into_iter().any(|i| {
                    let slot = &mut taken[i as usize];
                    if slot.is_none() {
                        *slot = Some(bits);
                    }
                    *slot == Some(bits)
                })
            })
            .count()
    }

    #[test]
    fn a_hosts_busy_keys_all_get_a_slot() {
        // Two disks and two loop devices (vda, vdb, loop0, loop1), each with sync and non-sync
        // writes, flushes (op 2) and reads: 16 keys, the block family's busiest case here.
        let devs = [(254 << 20), (254 << 20) | 16, (7 << 20), (7 << 20) | 1];
        let keys: std::vec::Vec<Key> = devs
            .iter()
            .flat_map(|&dev| {
                [(1, 0), (1, 1), (2, 1), (0, 0)].map(|(op, sync)| Key { dev, op, sync })
            })
            .collect();
        let (a, b) = slot_indexes(key_bits(&keys[0]));
        assert_ne!(a, b);
        assert!(
            placed(&keys[..8]) == 8,
            "8 keys: {} placed",
            placed(&keys[..8])
        );
        assert!(placed(&keys) >= 15, "16 keys: {} placed", placed(&keys));
    }
}
