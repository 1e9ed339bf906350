//! Direct-mapped per-CPU slot arrays: the fast path of the aggregates updated once per bio.
//!
//! A per-CPU hash lookup costs tens of nanoseconds; an array element is a bounds check and a
//! load. So an aggregate keyed by an 8-byte key keeps its first keys in a per-CPU array of
//! slots ([`SLOT_COUNT`] unless the aggregate says otherwise), tagged with the key's bits. Each
//! key has [`SLOT_CHOICES`] candidate slots (fields of one hash of its bits, [`slot_indexes`]):
//! with one, a host's handful of busy keys collide in 32 slots more often than not (8 keys:
//! about a 60 % chance that two share a slot); with two, a key of 12 still finds both taken
//! about one time in 25, and a busy key that does pays the hash lookup on every event of that
//! CPU for the daemon's life (a run of the benchmark met exactly that: half of one CPU's fsync
//! bios went through the hash). With three, one time in 100. The first key to reach a free slot
//! on a CPU takes it for good (per CPU: no other CPU writes that copy, so claiming needs no
//! atomics); a key whose candidates other keys hold goes to the aggregate's per-CPU hash as
//! before. User space adds both up by key, so a collision costs speed, never a count.

/// log2 of the slots per array.
pub const SLOT_BITS: u32 = 5;
/// Slots per array.
pub const SLOT_COUNT: u32 = 1 << SLOT_BITS;

/// Elements of an array of `1 << slot_bits` slots: the slots, then the claim counter
/// ([`claims_index`]).
pub const fn array_len(slot_bits: u32) -> u32 {
    (1 << slot_bits) + 1
}

/// The element after the slots, which no key can take (candidates are masked to the slots):
/// its `key` counts, per CPU, the slots taken on that CPU. A slot once taken is never freed, so
/// while the CPUs' sum stays the same, user space knows every used slot from its last whole
/// read and reads only those (a handful of 32 or 128), and reads the whole array again when the
/// sum moves. Written only when a key takes a slot, a few times per key for the daemon's life:
/// nothing on the per-event path.
pub const fn claims_index(slot_bits: u32) -> u32 {
    1 << slot_bits
}

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

/// Candidate slots per key.
pub const SLOT_CHOICES: usize = 3;

/// The candidate slots of a key in an array of `1 << slot_bits` slots (`slot_bits` ≥ 2), in the
/// order they are tried: three fields from the top of the Fibonacci hash of its bits, made to
/// differ from each other. The keys differ in a few bits anywhere in their 8 bytes (device
/// minors low, sources and flusher reasons in the top bytes); a product carries a bit only
/// upwards, so the high half is folded onto the low half first, or keys that differ only in
/// their top byte would share their second and third candidates.
#[inline(always)]
pub const fn slot_indexes(bits: u64, slot_bits: u32) -> [u32; SLOT_CHOICES] {
    let mask = (1u32 << slot_bits) - 1;
    let product = (bits ^ bits >> 31).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let first = (product >> (64 - slot_bits)) as u32 & mask;
    let second = (product >> (64 - 2 * slot_bits)) as u32 & mask;
    let third = (product >> (64 - 3 * slot_bits)) as u32 & mask;
    // An equal field would give the key a candidate less: a neighbour of the first replaces it
    // (of `first ^ 2` and `first ^ 3`, at most one can be the second).
    let second = if second == first { first ^ 1 } else { second };
    let third = if third != first && third != second {
        third
    } else if first ^ 2 != second {
        first ^ 2
    } else {
        first ^ 3
    };
    [first, second, third]
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
    fn no_key_can_take_the_claim_counter() {
        for slot_bits in [SLOT_BITS, 7] {
            assert_eq!(array_len(slot_bits), claims_index(slot_bits) + 1);
            let mut state = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..100_000 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                assert!(
                    slot_indexes(state, slot_bits)
                        .iter()
                        .all(|s| *s < claims_index(slot_bits)),
                    "{state:#x}"
                );
            }
        }
    }

    #[test]
    fn nearby_keys_spread_over_the_slots() {
        let used: std::collections::BTreeSet<u32> = (0..16u32)
            .map(|minor| {
                slot_indexes(
                    key_bits(&Key {
                        dev: (7 << 20) | minor,
                        op: 1,
                        sync: 0,
                    }),
                    SLOT_BITS,
                )[0]
            })
            .collect();
        assert!(used.iter().all(|s| *s < SLOT_COUNT));
        assert!(used.len() >= 10, "16 loop devices in {} slots", used.len());
    }

    /// Claims slots the way the probes do (candidates in order, first come first served) and
    /// returns how many of `keys` got one.
    fn placed(keys: &[Key]) -> usize {
        let mut taken = [None::<u64>; SLOT_COUNT as usize];
        keys.iter()
            .filter(|k| {
                let bits = key_bits(*k);
                slot_indexes(bits, SLOT_BITS).into_iter().any(|i| {
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
        assert!(
            placed(&keys[..8]) == 8,
            "8 keys: {} placed",
            placed(&keys[..8])
        );
        assert!(placed(&keys) >= 15, "16 keys: {} placed", placed(&keys));
    }

    #[test]
    fn a_keys_candidates_differ_and_stay_in_the_array() {
        for slot_bits in [2, SLOT_BITS, 7] {
            for bits in (0..5000u64).map(|n| n.wrapping_mul(0x1234_5678_9abc_def1) ^ n) {
                let [a, b, c] = slot_indexes(bits, slot_bits);
                assert!(a != b && b != c && a != c, "{bits:#x}: {a} {b} {c}");
                assert!([a, b, c].iter().all(|i| *i < 1 << slot_bits));
            }
        }
    }
}
