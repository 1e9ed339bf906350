//! A whole per-CPU array in one `BPF_MAP_LOOKUP_BATCH` system call (5.6+).
//!
//! aya reads an array element by element, one `bpf(2)` call each. The slot arrays in front of
//! the busiest aggregates (`probe_common::slots`) have 32 elements, read at every scrape and,
//! for the device writes, by the stall-context sampler ten times a second: element by element
//! that is most of the daemon's system calls. A kernel without batch lookups (`EINVAL`) is
//! read element by element, as before.

use std::os::fd::{AsFd as _, AsRawFd as _};

use aya::{
    Pod,
    maps::{IterableMap as _, MapData, PerCpuArray},
};

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
}

/// Every element of `map`, in index order, each as one value per possible CPU.
pub fn per_cpu_array<V: Pod>(map: &PerCpuArray<MapData, V>) -> Result<Vec<Vec<V>>, BatchError> {
    let entries = map.len();
    let cpus = aya::util::nr_cpus()
        .map_err(|(_, e)| BatchError::Cpus(e))?
        .get() as usize;
    // The kernel lays out each CPU's copy of a per-CPU value rounded up to 8 bytes.
    let stride = size_of::<V>().next_multiple_of(8);
    let mut keys = vec![0u32; entries as usize];
    let mut values = vec![0u8; entries as usize * cpus * stride];
    let mut out_batch = 0u32;
    let mut attr = BatchAttr {
        in_batch: 0,
        out_batch: (&raw mut out_batch) as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count: entries,
        map_fd: map.map().fd().as_fd().as_raw_fd() as u32,
        elem_flags: 0,
        flags: 0,
    };
    // SAFETY: `attr` is a valid `bpf_attr` prefix of the size passed; `keys` has room for
    // `count` keys and `values` for `count` values of `cpus` copies of `stride` bytes, which is
    // what the kernel writes for a per-CPU array of `V`; `out_batch` is a key-sized output.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_BATCH,
            &raw mut attr,
            size_of::<BatchAttr>(),
        )
    };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            // The end of the array was reached: every element was copied.
            Some(libc::ENOENT) => {}
            Some(libc::EINVAL | ENOTSUPP) => return Err(BatchError::Unsupported),
            _ => return Err(BatchError::Lookup(err)),
        }
    }
    if attr.count != entries {
        return Err(BatchError::Short {
            got: attr.count,
            want: entries,
        });
    }
    Ok((0..entries as usize)
        .map(|element| {
            (0..cpus)
                .map(|cpu| {
                    let offset = (element * cpus + cpu) * stride;
                    // SAFETY: `offset + size_of::<V>()` is inside `values` (see its length);
                    // `V: Pod` may take any bytes, and read_unaligned has no alignment need.
                    unsafe { std::ptr::read_unaligned(values.as_ptr().add(offset).cast::<V>()) }
                })
                .collect()
        })
        .collect())
}
