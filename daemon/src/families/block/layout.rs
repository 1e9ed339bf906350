//! Resolving the block probes' layout from kernel BTF: struct offsets, `req_flag_bits`,
//! `req_op`, `QUEUE_FLAG_STATS` and the tp_btf argument indexes. Nothing here is a constant of
//! some kernel version; what is missing becomes a probe gap or a documented degradation.

use std::collections::BTreeMap;

use probe_common::{
    block::bio_disk::BioDiskLayout,
    block::{
        BlockLayout, DISK_IN_REQUEST, FLAGS, HAS_IO_START_TIME, HAS_START_TIME, HAS_STATS_FLAG,
    },
};

use crate::kernel::{
    LayoutError,
    btf::Btf,
    layout::{member_offset, request_op_enum},
};

/// What was resolved, with the reason for each part that was not.
pub struct Resolved {
    pub layout: BlockLayout,
    /// Request probes (issue, requeue, complete) can run.
    pub rq: Result<(), LayoutError>,
    /// The bio probe can run.
    pub bio: Result<(), LayoutError>,
    /// Set where bios name their disk rather than their block device (before 5.12).
    pub bio_disk: Option<BioDiskLayout>,
    /// `op` label by raw `req_op` value (ops not listed are `other`).
    pub op_labels: BTreeMap<u32, &'static str>,
}

/// The `op` label values and the `enum req_op` enumerators they stand for (docs/metrics.md).
const OPS: [(&str, &str); 5] = [
    ("read", "REQ_OP_READ"),
    ("write", "REQ_OP_WRITE"),
    ("flush", "REQ_OP_FLUSH"),
    ("discard", "REQ_OP_DISCARD"),
    ("write_zeroes", "REQ_OP_WRITE_ZEROES"),
];

/// Resolves everything; never fails as a whole.
pub fn resolve(btf: &Btf) -> Resolved {
    let mut layout = BlockLayout::ZERO;
    let common = resolve_common(btf, &mut layout);
    resolve_flags(btf, &mut layout);
    let rq = common
        .clone()
        .and_then(|()| resolve_request(btf, &mut layout));
    let mut bio_disk = None;
    let bio = common.and_then(|()| resolve_bio(btf, &mut layout, &mut bio_disk));
    layout.rq_resolved = u32::from(rq.is_ok());
    layout.bio_resolved = u32::from(bio.is_ok());
    Resolved {
        layout,
        rq,
        bio,
        bio_disk,
        op_labels: op_labels(btf),
    }
}

fn enum_u32(btf: &Btf, name: &str, variant: &str) -> Result<u32, LayoutError> {
    let value = btf.enum_value(name, variant)?;
    u32::try_from(value).map_err(|_| LayoutError::OutOfRange {
        what: format!("{name}::{variant}"),
        value,
    })
}

/// The op mask and the op values the probes compare against.
fn resolve_common(btf: &Btf, l: &mut BlockLayout) -> Result<(), LayoutError> {
    // The flag bits start right above the op (`__REQ_FAILFAST_DEV = REQ_OP_BITS`), so the op
    // mask follows from the first flag bit rather than from a REQ_OP_BITS we would have to assume.
    let op_bits = enum_u32(btf, "req_flag_bits", "__REQ_FAILFAST_DEV")?;
    if !(1..32).contains(&op_bits) {
        return Err(LayoutError::Unhandled(format!(
            "__REQ_FAILFAST_DEV = {op_bits} is not a plausible op width"
        )));
    }
    l.op_mask = (1u32 << op_bits) - 1;
    let ops = request_op_enum(btf);
    l.op_read = enum_u32(btf, ops, "REQ_OP_READ")?;
    l.op_write = enum_u32(btf, ops, "REQ_OP_WRITE")?;
    // Passthrough ops; an impossible value where the kernel has none.
    l.op_drv_in = enum_u32(btf, ops, "REQ_OP_DRV_IN").unwrap_or(u32::MAX);
    l.op_drv_out = enum_u32(btf, ops, "REQ_OP_DRV_OUT").unwrap_or(u32::MAX);
    Ok(())
}

/// One mask per counted flag; a flag this kernel lacks keeps mask 0 (its counters stay 0, and
/// `wbscope check` lists it as absent).
fn resolve_flags(btf: &Btf, l: &mut BlockLayout) {
    for (i, (_, variant)) in FLAGS.iter().enumerate() {
        if let Ok(bit) = enum_u32(btf, "req_flag_bits", variant)
            && bit < 32
        {
            l.flag_masks[i] = 1 << bit;
        }
    }
}

fn resolve_request(btf: &Btf, l: &mut BlockLayout) -> Result<(), LayoutError> {
    l.rq_q = member_offset(btf, "request", "q", 8)?;
    l.rq_cmd_flags = member_offset(btf, "request", "cmd_flags", 4)?;
    l.rq_data_len = member_offset(btf, "request", "__data_len", 4)?;
    // `rq->rq_disk` until 5.17, then `rq->q->disk`.
    if let Ok(disk) = member_offset(btf, "request", "rq_disk", 8) {
        l.disk = disk;
        l.features |= DISK_IN_REQUEST;
    } else {
        l.disk = member_offset(btf, "request_queue", "disk", 8)?;
    }
    l.disk_major = member_offset(btf, "gendisk", "major", 4)?;
    l.disk_first_minor = member_offset(btf, "gendisk", "first_minor", 4)?;
    l.issue_arg = arg_index(btf, "block_rq_issue", "request")?;
    l.requeue_arg = arg_index(btf, "block_rq_requeue", "request")?;
    // The probe reads (rq, error, nr_bytes) as arguments 0, 1, 2.
    let complete = arg_index(btf, "block_rq_complete", "request")?;
    if complete != 0 {
        return Err(LayoutError::prototype(
            "block_rq_complete",
            format!(": `struct request *` is argument {complete}, expected 0"),
        ));
    }
    if let Ok(off) = member_offset(btf, "request", "start_time_ns", 8) {
        l.rq_start_time_ns = off;
        l.features |= HAS_START_TIME;
    }
    if let Ok(off) = member_offset(btf, "request", "io_start_time_ns", 8) {
        l.rq_io_start_time_ns = off;
        l.features |= HAS_IO_START_TIME;
    }
    let stats = btf
        .enumerator_value("QUEUE_FLAG_STATS")
        .ok()
        .and_then(|bit| u32::try_from(bit).ok())
        .filter(|bit| *bit < 64);
    if let (Some(bit), Ok(off)) = (stats, member_offset(btf, "request_queue", "queue_flags", 8)) {
        l.q_queue_flags = off;
        l.stats_flag_mask = 1 << bit;
        l.features |= HAS_STATS_FLAG;
    }
    Ok(())
}

fn resolve_bio(
    btf: &Btf,
    l: &mut BlockLayout,
    disk: &mut Option<BioDiskLayout>,
) -> Result<(), LayoutError> {
    l.bio_bi_opf = member_offset(btf, "bio", "bi_opf", 4)?;
    l.bio_queue_arg = arg_index(btf, "block_bio_queue", "bio")?;
    // `bio->bi_bdev` since 5.12; before, `bi_disk` + `bi_partno`.
    match member_offset(btf, "bio", "bi_bdev", 8) {
        Ok(off) => {
            l.bio_bi_bdev = off;
            l.bdev_bd_dev = member_offset(btf, "block_device", "bd_dev", 4)?;
        }
        Err(no_bdev) => {
            *disk = Some(bio_disk_layout(btf).map_err(|e| {
                LayoutError::Unhandled(format!("{no_bdev}, and for bi_disk + bi_partno: {e}"))
            })?);
        }
    }
    Ok(())
}

/// The offsets for a bio's device on kernels before 5.12 (`probe_common::block::bio_disk`).
fn bio_disk_layout(btf: &Btf) -> Result<BioDiskLayout, LayoutError> {
    let offset = |ty: &str, name: &str| btf.member_offset(ty, name);
    Ok(BioDiskLayout {
        bio_bi_disk: member_offset(btf, "bio", "bi_disk", 8)?,
        bio_bi_partno: member_offset(btf, "bio", "bi_partno", 1)?,
        disk_major: member_offset(btf, "gendisk", "major", 4)?,
        disk_first_minor: member_offset(btf, "gendisk", "first_minor", 4)?,
        disk_part_tbl: member_offset(btf, "gendisk", "part_tbl", 8)?,
        part_tbl_len: member_offset(btf, "disk_part_tbl", "len", 4)?,
        // A flexible array: its size says nothing, the slots are pointers.
        part_tbl_part: offset("disk_part_tbl", "part")?,
        part_devt: offset("hd_struct", "__dev")? + member_offset(btf, "device", "devt", 4)?,
        resolved: 1,
        _reserved: 0,
    })
}

fn arg_index(btf: &Btf, event: &str, struct_name: &str) -> Result<u32, LayoutError> {
    let index = btf.tp_btf_arg_index(event, struct_name)?;
    // The probes read the pointer from argument 0 or 1.
    if index > 1 {
        return Err(LayoutError::prototype(
            event,
            format!(": `struct {struct_name} *` is argument {index}"),
        ));
    }
    Ok(index)
}

/// `op` labels by raw value, from the kernel's `enum req_op` (or `req_opf`).
fn op_labels(btf: &Btf) -> BTreeMap<u32, &'static str> {
    let ops = request_op_enum(btf);
    OPS.iter()
        .filter_map(|(label, variant)| Some((enum_u32(btf, ops, variant).ok()?, *label)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On this kernel everything resolves, with the values 6.18 has.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(btf) = Btf::from_file(std::path::Path::new(crate::kernel::VMLINUX_BTF)) else {
            eprintln!("skipped: no kernel BTF");
            return;
        };
        let r = resolve(&btf);
        assert!(r.rq.is_ok(), "{:?}", r.rq);
        assert!(r.bio.is_ok(), "{:?}", r.bio);
        assert!(
            r.layout.flag_masks.iter().all(|m| *m != 0),
            "{:?}",
            r.layout.flag_masks
        );
        assert_eq!(r.layout.op_mask, 0xff);
        assert_eq!(r.layout.flag_masks[0], 1 << 11, "__REQ_SYNC");
        assert_eq!(r.op_labels.get(&2), Some(&"flush"));
        assert_eq!(r.layout.issue_arg, 0);
        let all = HAS_START_TIME | HAS_IO_START_TIME | HAS_STATS_FLAG;
        assert_eq!(r.layout.features & all, all);
        assert_eq!(r.layout.features & DISK_IN_REQUEST, 0);
    }
}
