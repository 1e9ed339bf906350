//! Whole per-CPU maps in a few `BPF_MAP_LOOKUP_BATCH` system calls (5.6+), into buffers reused
//! from one read to the next.
//!
//! aya reads a map element by element: for a hash, a `BPF_MAP_GET_NEXT_KEY` and a
//! `BPF_MAP_LOOKUP_ELEM` call per key, and two allocations for each value. Every scrape reads
//! some twenty maps, and the stall-context sampler reads the bio counters several times a
//! second between scrapes: element by element that was most of the daemon's system calls and
//! most of what its idle sampler spent in malloc. A kernel without batch lookups (`EINVAL`) is
//! read element by element through aya, as before, here rather than by each caller.

mod array;
mod hash;
mod scratch;

pub use array::per_cpu_array;
pub use hash::per_cpu_hash;

use std::os::fd::{AsFd as _, AsRawFd as _};

use aya::{Pod, maps::MapData};

/// `BPF_MAP_LOOKUP_BATCH` (include/uapi/linux/bpf.h, `enum bpf_cmd`).
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// `ENOTSUPP` (524), the kernel-internal errno map types without batch operations return;
/// libc does not define it.
const ENOTSUPP: i32 = 524;

/// The `batch` member of `union bpf_attr` (include/uapi/linux/bpf.h).
#[repr(C)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

impl BatchAttr {
    /// A call asking for `count` elements into `scratch`'s buffers, from the batch token at
    /// `in_batch` (the map's start when `None`), the next token to go to `out_batch`.
    fn new(
        scratch: &mut scratch::Scratch,
        count: u32,
        in_batch: Option<&u32>,
        out_batch: &mut u32,
    ) -> BatchAttr {
        BatchAttr {
            in_batch: in_batch.map_or(0, |token| std::ptr::from_ref(token) as u64),
            out_batch: std::ptr::from_mut(out_batch) as u64,
            keys: scratch.keys.as_mut_ptr() as u64,
            values: scratch.values.as_mut_ptr() as u64,
            count,
            map_fd: 0,
            elem_flags: 0,
            flags: 0,
        }
    }
}

/// Why a batch read gave no values.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The kernel has no batch lookups for this map type: read element by element.
    #[error("batch lookups are not supported by this kernel")]
    Unsupported,
    #[error("counting the possible CPUs: {0}")]
    Cpus(std::io::Error),
    #[error("BPF_MAP_LOOKUP_BATCH: {0}")]
    Lookup(std::io::Error),
    #[error("BPF_MAP_LOOKUP_BATCH returned {got} of {want} elements")]
    Short { got: u32, want: u32 },
    #[error("BPF_MAP_LOOKUP_BATCH: one hash bucket holds more than {0} elements")]
    BucketTooLarge(u32),
    /// An element read failed (a kernel without batch lookups, or one known slot or counter).
    #[error(transparent)]
    Element(#[from] aya::maps::MapError),
}

/// How one batch call ended.
#[derive(Debug, PartialEq, Eq)]
enum Batch {
    /// `count` elements were copied and the map has more: call again from `out_batch`.
    More,
    /// The end of the map was reached (`ENOENT`): `count` elements were copied, maybe 0.
    End,
    /// The next hash bucket holds more elements than `count` had room for (`ENOSPC`);
    /// nothing was copied.
    NoRoom,
}

/// One `BPF_MAP_LOOKUP_BATCH` call on `map` with `attr`'s buffers; the kernel writes back
/// `attr.count` (elements copied) and the `out_batch` token.
///
/// # Safety
/// `attr.keys` and `attr.values` must have room for `attr.count` keys and values as the kernel
/// lays them out for this map, and `attr.in_batch` (when not 0) and `attr.out_batch` must point
/// at batch tokens of the size the map type uses.
unsafe fn lookup_batch(map: &MapData, attr: &mut BatchAttr) -> Result<Batch, BatchError> {
    attr.map_fd = map.fd().as_fd().as_raw_fd() as u32;
    // SAFETY: `attr` is a valid `bpf_attr` prefix of the size passed, and its pointers are
    // valid for what the kernel writes (the caller's contract).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_BATCH,
            std::ptr::from_mut(attr),
            size_of::<BatchAttr>(),
        )
    };
    if rc >= 0 {
        return Ok(Batch::More);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOENT) => Ok(Batch::End),
        Some(libc::ENOSPC) => Ok(Batch::NoRoom),
        Some(libc::EINVAL | ENOTSUPP) => Err(BatchError::Unsupported),
        _ => Err(BatchError::Lookup(err)),
    }
}

/// The number of possible CPUs, which the kernel copies one value for in a per-CPU map.
fn possible_cpus() -> Result<usize, BatchError> {
    aya::util::nr_cpus()
        .map(|n| n.get() as usize)
        .map_err(|(_, e)| BatchError::Cpus(e))
}

/// The bytes the kernel gives one CPU's copy of a per-CPU value: its size rounded up to 8.
const fn per_cpu_stride<V>() -> usize {
    size_of::<V>().next_multiple_of(8)
}

/// Each CPU's copy of one per-CPU value as the kernel lays them out: `cpus` copies of
/// [`per_cpu_stride`] bytes.
fn per_cpu_copies<V: Pod>(element: &[u8]) -> impl Iterator<Item = V> + '_ {
    element.chunks_exact(per_cpu_stride::<V>()).map(|copy| {
        // SAFETY: each chunk is `per_cpu_stride::<V>() >= size_of::<V>()` bytes; `V: Pod` may
        // take any bytes, and read_unaligned has no alignment need.
        unsafe { std::ptr::read_unaligned(copy.as_ptr().cast::<V>()) }
    })
}
