//! Block layer: the layout global the block probes read, their map keys and values, and the flag
//! table (label names in a fixed order; the bit each one stands for comes from the running
//! kernel's BTF `enum req_flag_bits`).

use crate::{hist::Log2Hist, user_pod};

pub mod bio_disk;

/// Number of request flags wbscope counts.
pub const FLAG_COUNT: usize = 8;

/// The counted flags: (`flag` label, `enum req_flag_bits` enumerator). The index into this table
/// is the index into [`BlockLayout::flag_masks`] and into the per-key flag counters.
pub const FLAGS: [(&str, &str); FLAG_COUNT] = [
    ("sync", "__REQ_SYNC"),
    ("meta", "__REQ_META"),
    ("fua", "__REQ_FUA"),
    ("preflush", "__REQ_PREFLUSH"),
    ("idle", "__REQ_IDLE"),
    ("background", "__REQ_BACKGROUND"),
    ("rahead", "__REQ_RAHEAD"),
    ("nowait", "__REQ_NOWAIT"),
];

/// Index of `sync` in [`FLAGS`]; also what the `sync` label of request series is made of.
pub const FLAG_SYNC: usize = 0;

/// [`BlockLayout::features`] bit: `request.io_start_time_ns` exists (map-free latency possible).
pub const HAS_IO_START_TIME: u32 = 1 << 0;
/// [`BlockLayout::features`] bit: `request.start_time_ns` exists (queue latency).
pub const HAS_START_TIME: u32 = 1 << 1;
/// [`BlockLayout::features`] bit: `QUEUE_FLAG_STATS` is known, so issue can tell whether the
/// kernel will stamp `io_start_time_ns` for this request.
pub const HAS_STATS_FLAG: u32 = 1 << 2;
/// [`BlockLayout::features`] bit: the disk is `request.rq_disk` (before 5.17), not `q->disk`.
pub const DISK_IN_REQUEST: u32 = 1 << 3;

/// Kernel layout for the block probes, resolved from BTF by the daemon.
///
/// Offsets are bytes into `struct request`, `struct request_queue`, `struct gendisk`,
/// `struct bio` and `struct block_device`; `*_arg` are argument indexes (0 or 1) of the tp_btf
/// prototypes (`block_rq_issue(rq)` since 5.11, `(q, rq)` before).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockLayout {
    /// Non-zero once the request part below is filled in.
    pub rq_resolved: u32,
    /// Non-zero once the bio part below is filled in.
    pub bio_resolved: u32,
    /// `HAS_*` / `DISK_IN_REQUEST` bits.
    pub features: u32,
    pub rq_q: u32,
    /// `request.rq_disk` when [`DISK_IN_REQUEST`] is set, else `request_queue.disk`.
    pub disk: u32,
    pub rq_cmd_flags: u32,
    pub rq_data_len: u32,
    pub rq_start_time_ns: u32,
    pub rq_io_start_time_ns: u32,
    pub q_queue_flags: u32,
    /// `1 << QUEUE_FLAG_STATS` (queue_flags is an unsigned long bitmap; the bit is below 64).
    pub stats_flag_mask: u64,
    pub disk_major: u32,
    pub disk_first_minor: u32,
    pub bio_bi_opf: u32,
    pub bio_bi_bdev: u32,
    pub bdev_bd_dev: u32,
    /// `REQ_OP_MASK`: `(1 << __REQ_FAILFAST_DEV) - 1`, the flags start right above the op.
    pub op_mask: u32,
    pub op_read: u32,
    pub op_write: u32,
    /// Passthrough ops (`blk_rq_is_passthrough`): the kernel never stamps their issue time.
    pub op_drv_in: u32,
    pub op_drv_out: u32,
    pub issue_arg: u32,
    pub requeue_arg: u32,
    pub bio_queue_arg: u32,
    /// Explicit padding (`block_rq_complete(rq, error, nr_bytes)` needs no index: `rq` has been
    /// its first argument since tp_btf exists).
    pub _reserved: u32,
    /// `1 << bit` per [`FLAGS`] entry; 0 when the kernel has no such flag.
    pub flag_masks: [u32; FLAG_COUNT],
}
const _: () = assert!(core::mem::size_of::<BlockLayout>() == 24 * 4 + 8 + FLAG_COUNT * 4);

impl BlockLayout {
    /// Nothing resolved: the probes do nothing.
    pub const ZERO: BlockLayout = BlockLayout {
        rq_resolved: 0,
        bio_resolved: 0,
        features: 0,
        rq_q: 0,
        disk: 0,
        rq_cmd_flags: 0,
        rq_data_len: 0,
        rq_start_time_ns: 0,
        rq_io_start_time_ns: 0,
        q_queue_flags: 0,
        stats_flag_mask: 0,
        disk_major: 0,
        disk_first_minor: 0,
        bio_bi_opf: 0,
        bio_bi_bdev: 0,
        bdev_bd_dev: 0,
        op_mask: 0,
        op_read: 0,
        op_write: 0,
        op_drv_in: 0,
        op_drv_out: 0,
        issue_arg: 0,
        requeue_arg: 0,
        bio_queue_arg: 0,
        _reserved: 0,
        flag_masks: [0; FLAG_COUNT],
    };
}

/// Aggregation key of request and bio series: the kernel `dev_t`, the raw `req_op` value, and
/// REQ_SYNC (0/1; always 0 where the metric has no `sync` label).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    pub dev: u32,
    pub op: u16,
    pub sync: u16,
}
const _: () = assert!(core::mem::size_of::<BlockKey>() == 8);

/// Per-CPU request counters for one [`BlockKey`], updated at issue and complete.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RqCounts {
    /// `block_rq_issue` events.
    pub requests: u64,
    /// `request.__data_len` at issue.
    pub bytes: u64,
    /// Completions with a non-zero status (each request once).
    pub errors: u64,
    /// Issued requests carrying each [`FLAGS`] flag in `cmd_flags`.
    pub flags: [u64; FLAG_COUNT],
}
const _: () = assert!(core::mem::size_of::<RqCounts>() == (3 + FLAG_COUNT) * 8);

impl RqCounts {
    pub const ZERO: RqCounts = RqCounts {
        requests: 0,
        bytes: 0,
        errors: 0,
        flags: [0; FLAG_COUNT],
    };

    /// Adds another CPU's (or another key's) counts into this one.
    pub fn merge(&mut self, other: &RqCounts) {
        self.requests = self.requests.wrapping_add(other.requests);
        self.bytes = self.bytes.wrapping_add(other.bytes);
        self.errors = self.errors.wrapping_add(other.errors);
        for (mine, theirs) in self.flags.iter_mut().zip(other.flags.iter()) {
            *mine = mine.wrapping_add(*theirs);
        }
    }
}

/// Aggregation key of bios: the partition device (kernel `dev_t`), the raw `req_op` value (ops
/// are 8 bits), and the device-writes family's attribution of a write bio
/// (`crate::device_writes`): its raw `WriteSource` and, for flusher work, the item's sync mode
/// and reason (`NO_WORK` otherwise). One key, so that `block_bio_queue` updates one counter per
/// bio for both families: [`NOT_ATTRIBUTED`] where the bio is not one the device counts as
/// written, or where that family is off.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BioKey {
    pub dev: u32,
    pub op: u8,
    pub source: u8,
    pub sync_mode: u8,
    pub reason: u8,
}
const _: () = assert!(core::mem::size_of::<BioKey>() == 8);

/// [`BioKey::source`] of a bio the device-writes family does not count (no `WriteSource` is 0).
pub const NOT_ATTRIBUTED: u8 = 0;

/// log2 of the slots in front of the bio counters (`crate::slots`): four times the other
/// aggregates', since the writes of one device split by source (a loop device under fio alone
/// had five write keys and its backing disk three, with the reads and flushes beside them), and
/// a busy key that finds its candidates taken pays a hash lookup on every bio. 128 slots of
/// 96 bytes: 12 KiB per CPU.
pub const BIO_SLOT_BITS: u32 = 7;
/// Slots in front of the bio counters.
pub const BIO_SLOT_COUNT: u32 = 1 << BIO_SLOT_BITS;

/// Per-CPU bio counters for one [`BioKey`], updated at `block_bio_queue`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BioCounts {
    pub bios: u64,
    /// `bio->bi_iter.bi_size` summed, for attributed bios only (0 for the rest).
    pub bytes: u64,
    /// Bios carrying each [`FLAGS`] flag in `bi_opf`.
    pub flags: [u64; FLAG_COUNT],
}
const _: () = assert!(core::mem::size_of::<BioCounts>() == (2 + FLAG_COUNT) * 8);

impl BioCounts {
    pub const ZERO: BioCounts = BioCounts {
        bios: 0,
        bytes: 0,
        flags: [0; FLAG_COUNT],
    };

    /// Adds another CPU's counts into this one.
    pub fn merge(&mut self, other: &BioCounts) {
        self.bios = self.bios.wrapping_add(other.bios);
        self.bytes = self.bytes.wrapping_add(other.bytes);
        for (mine, theirs) in self.flags.iter_mut().zip(other.flags.iter()) {
            *mine = mine.wrapping_add(*theirs);
        }
    }
}

/// Everything the request probes keep per [`BlockKey`], in one per-CPU map value so that issue
/// and completion each do a single map lookup.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RqStats {
    pub counts: RqCounts,
    /// Allocation → issue latency. Keyed by (dev, op, sync) like the rest of the value; the
    /// metric has no `sync` label, so the daemon sums the two.
    pub queue: Log2Hist,
    /// Issue → complete latency.
    pub latency: Log2Hist,
}
const _: () = assert!(
    core::mem::size_of::<RqStats>()
        == core::mem::size_of::<RqCounts>() + 2 * core::mem::size_of::<Log2Hist>()
);

impl RqStats {
    pub const ZERO: RqStats = RqStats {
        counts: RqCounts::ZERO,
        queue: Log2Hist::ZERO,
        latency: Log2Hist::ZERO,
    };

    /// Adds another CPU's value into this one.
    pub fn merge(&mut self, other: &RqStats) {
        self.counts.merge(&other.counts);
        self.queue.merge(&other.queue);
        self.latency.merge(&other.latency);
    }
}

user_pod!(
    BlockLayout,
    BlockKey,
    BioKey,
    RqCounts,
    BioCounts,
    RqStats,
    crate::slots::Slot<BioCounts>,
    crate::slots::Slot<RqStats>
);
const _: () =
    assert!(core::mem::size_of::<crate::slots::Slot<BioCounts>>() == 16 + (2 + FLAG_COUNT) * 8);

#[cfg(test)]
mod tests {
    use super::*;

    /// The bio keys of a host running fio on an ext4 loop device (the benchmark's workload)
    /// plus a second disk's, claimed in every order a CPU may meet them: each gets a slot.
    #[test]
    fn a_hosts_bio_keys_all_get_a_slot() {
        use crate::slots::{key_bits, slot_indexes};
        let key = |dev: u32, op: u8, source: u8, sync_mode: u8, reason: u8| BioKey {
            dev,
            op,
            source,
            sync_mode,
            reason,
        };
        let (loop0, vda, vdb) = (7 << 20, 254 << 20, (254 << 20) | 16);
        let mut keys = [0u64; 24];
        let mut n = 0;
        for dev in [loop0, vda, vdb] {
            // Write sources: fsync, direct, journal, kworker, other, flusher (none, two reasons;
            // all, one), and the unattributed reads and flushes.
            for k in [
                key(dev, 1, 2, 0xff, 0xff),
                key(dev, 1, 9, 0xff, 0xff),
                key(dev, 1, 10, 0xff, 0xff),
                key(dev, 1, 11, 0xff, 0xff),
                key(dev, 1, 12, 0xff, 0xff),
                key(dev, 1, 1, 0, 3),
                key(dev, 0, NOT_ATTRIBUTED, 0, 0),
                key(dev, 2, NOT_ATTRIBUTED, 0, 0),
            ] {
                keys[n] = key_bits(&k);
                n += 1;
            }
        }
        // Rotations of the arrival order: who claims first differs from CPU to CPU.
        for start in 0..keys.len() {
            let mut taken = [None::<u64>; BIO_SLOT_COUNT as usize];
            for i in 0..keys.len() {
                let bits = keys[(start + i) % keys.len()];
                let placed = slot_indexes(bits, BIO_SLOT_BITS).into_iter().any(|s| {
                    let slot = &mut taken[s as usize];
                    *slot = Some(slot.unwrap_or(bits));
                    *slot == Some(bits)
                });
                assert!(placed, "key {bits:#x} found no slot (order from {start})");
            }
        }
    }

    #[test]
    fn counts_merge() {
        let mut a = RqCounts::ZERO;
        let mut b = RqCounts::ZERO;
        b.requests = 2;
        b.bytes = 8192;
        b.flags[FLAG_SYNC] = 1;
        a.merge(&b);
        a.merge(&b);
        assert_eq!((a.requests, a.bytes, a.flags[FLAG_SYNC]), (4, 16384, 2));
        let mut c = BioCounts::ZERO;
        let mut d = BioCounts::ZERO;
        d.bios = 3;
        d.flags[7] = 1;
        c.merge(&d);
        assert_eq!((c.bios, c.flags[7]), (3, 1));
    }

    #[test]
    fn flag_labels_are_the_contract_set() {
        let labels: [&str; FLAG_COUNT] = FLAGS.map(|(l, _)| l);
        assert_eq!(
            labels,
            [
                "sync",
                "meta",
                "fua",
                "preflush",
                "idle",
                "background",
                "rahead",
                "nowait"
            ]
        );
    }
}

/// Names of this family's maps in the eBPF object (aya names a map after its `#[map]` static);
/// `object_names` lists them for the test that checks them against the object.
pub mod maps {
    pub const BLOCK_RQ_STATS: &str = "BLOCK_RQ_STATS";
    /// Bio counters of the block family and the device-writes family (see [`super::BioKey`]).
    pub const BLOCK_BIO_COUNTS: &str = "BLOCK_BIO_COUNTS";
    /// The slot array in front of it (`crate::slots`).
    pub const BLOCK_BIO_SLOTS: &str = "BLOCK_BIO_SLOTS";
    /// The slot array in front of `BLOCK_RQ_STATS`.
    pub const BLOCK_RQ_SLOTS: &str = "BLOCK_RQ_SLOTS";
    pub const BLOCK_INFLIGHT: &str = "BLOCK_INFLIGHT";
}

/// Names of this family's load-time globals in the eBPF object (`#[no_mangle]` statics that the
/// daemon sets before load).
pub mod globals {
    /// Holds [`super::BlockLayout`].
    pub const BLOCK_LAYOUT: &str = "BLOCK_LAYOUT";
    /// Holds [`super::bio_disk::BioDiskLayout`].
    pub const BIO_DISK_LAYOUT: &str = "BIO_DISK_LAYOUT";
}
