//! The device of a bio on kernels before 5.12, where a bio names its disk and partition number
//! (`bio->bi_disk`, `bio->bi_partno`) rather than its `block_device` (`bio->bi_bdev`).

use crate::user_pod;

/// Struct member offsets (bytes, from BTF) for `bi_disk` + `bi_partno` → the partition's
/// kernel `dev_t`.
///
/// Partition 0 is the whole disk, `MKDEV(disk->major, disk->first_minor)`. Other partitions
/// are looked up in the disk's partition table, `disk->part_tbl->part[partno]->__dev.devt`:
/// their minors need not follow the disk's (extended dev_t, major 259).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BioDiskLayout {
    pub bio_bi_disk: u32,
    /// `u8 bi_partno`.
    pub bio_bi_partno: u32,
    pub disk_major: u32,
    pub disk_first_minor: u32,
    /// `gendisk.part_tbl` (`struct disk_part_tbl *`).
    pub disk_part_tbl: u32,
    /// `disk_part_tbl.len` (`int`): the number of slots in `part`.
    pub part_tbl_len: u32,
    /// `disk_part_tbl.part`: the array of `struct hd_struct *`.
    pub part_tbl_part: u32,
    /// `hd_struct.__dev.devt`.
    pub part_devt: u32,
    /// Non-zero once the daemon has filled in the fields above.
    pub resolved: u32,
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<BioDiskLayout>() == 40);

impl BioDiskLayout {
    /// Unresolved: bios are read through `bi_bdev` (5.12+).
    pub const ZERO: BioDiskLayout = BioDiskLayout {
        bio_bi_disk: 0,
        bio_bi_partno: 0,
        disk_major: 0,
        disk_first_minor: 0,
        disk_part_tbl: 0,
        part_tbl_len: 0,
        part_tbl_part: 0,
        part_devt: 0,
        resolved: 0,
        _reserved: 0,
    };
}

user_pod!(BioDiskLayout);
