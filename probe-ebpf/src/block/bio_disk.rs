//! A bio's partition device on kernels before 5.12 (`bio->bi_disk` + `bio->bi_partno`, see
//! `probe_common::block::bio_disk`). The disk is reached by plain loads through the BTF-typed bio;
//! the partition table slot is a variable offset, read with `bpf_probe_read_kernel`.

use probe_common::block::bio_disk::BioDiskLayout;

use crate::kernel::{
    btf_load::{load, read},
    globals::load_time,
};

/// A plain static (not a `Global`), so that [`in_use`], asked by every bio on every kernel,
/// reads one member instead of copying the struct. `#[used]`: never merged with a promoted
/// constant (see `kernel::globals`).
#[unsafe(no_mangle)]
#[used]
static BIO_DISK_LAYOUT: BioDiskLayout = BioDiskLayout::ZERO;

/// Whether this kernel's bios name their disk (the daemon resolved this layout).
#[inline(always)]
pub fn in_use() -> bool {
    load_time!(BIO_DISK_LAYOUT.resolved) != 0
}

/// The kernel `dev_t` of the partition `bio` (a BTF-typed `struct bio *`) was queued on.
#[inline(always)]
pub fn dev(bio: u64) -> Option<u32> {
    // SAFETY: a read of an initialised static, volatile as in `load_time!`; only kernels before
    // 5.12 get here, and they need most of its members.
    let l = unsafe { core::ptr::read_volatile(&raw const BIO_DISK_LAYOUT) };
    if l.resolved == 0 {
        return None;
    }
    let disk: u64 = load(bio, l.bio_bi_disk);
    if disk == 0 {
        return None;
    }
    let partno = load::<u8>(bio, l.bio_bi_partno) as u64;
    if partno == 0 {
        let major: u32 = load(disk, l.disk_major);
        let minor: u32 = load(disk, l.disk_first_minor);
        return Some(major << 20 | minor);
    }
    let table: u64 = read(disk + l.disk_part_tbl as u64)?;
    let len: i32 = read(table + l.part_tbl_len as u64)?;
    if partno >= len as u64 {
        return None;
    }
    let part: u64 = read(table + l.part_tbl_part as u64 + partno * 8)?;
    read(part + l.part_devt as u64)
}
