//! What the sync-call probes need from the running kernel: `sys_enter_*` argument offsets and
//! filesystem fsync event offsets from tracefs, `io_kiocb` / `io_sync` offsets and `io_uring_op`
//! values from BTF.

use crate::kernel::LayoutError;
use probe_common::sync_calls::layout::{
    FieldFormat, IoUringLayout, SfrEnterFormat, SysEnterFdFormat,
};

use crate::kernel::{
    KernelInfo,
    btf::Btf,
    layout::{field_offset, member_offset},
};

pub use crate::families::{Part, gap_of};

/// Syscall arguments are recorded as 8-byte longs whatever their C type.
fn long(n: u32) -> bool {
    n == 8
}

/// The `fd` offset of a `sys_enter_*` record.
pub fn sys_enter_fd(kernel: &KernelInfo, event: &str) -> Result<SysEnterFdFormat, LayoutError> {
    let format = kernel.event_format("syscalls", event)?;
    Ok(SysEnterFdFormat {
        fd: field_offset(&format, "fd", long)?,
        _reserved: 0,
    })
}

/// `sys_enter_sync_file_range`: `fd` and `flags`.
pub fn sfr_enter(kernel: &KernelInfo) -> Result<SfrEnterFormat, LayoutError> {
    let format = kernel.event_format("syscalls", "sys_enter_sync_file_range")?;
    Ok(SfrEnterFormat {
        fd: field_offset(&format, "fd", long)?,
        flags: field_offset(&format, "flags", long)?,
    })
}

/// One field's offset in a record, with its expected size.
pub fn field(
    kernel: &KernelInfo,
    category: &str,
    event: &str,
    name: &str,
    size: u32,
) -> Result<FieldFormat, LayoutError> {
    let format = kernel.event_format(category, event)?;
    Ok(FieldFormat {
        offset: field_offset(&format, name, |n| n == size)?,
        _reserved: 0,
    })
}

/// `struct io_kiocb` / `struct io_sync` offsets and the FSYNC / SYNC_FILE_RANGE opcodes.
pub fn io_uring(kernel: &KernelInfo) -> Result<IoUringLayout, LayoutError> {
    let btf = kernel.btf()?;
    let op = |name: &str| -> Result<u32, LayoutError> {
        let value = btf.enum_value("io_uring_op", name)?;
        u32::try_from(value).map_err(|_| LayoutError::OutOfRange {
            what: name.to_owned(),
            value,
        })
    };
    check_io_uring_prototypes(btf)?;
    // `cmd` is a union of opaque per-opcode data; its size only bounds what fits in it.
    let cmd_size = btf.member_size("io_kiocb", "cmd")?;
    let io_sync_flags = member_offset(btf, "io_sync", "flags", 4)?;
    if io_sync_flags + 4 > cmd_size {
        return Err(LayoutError::Unhandled(format!(
            "io_sync.flags (offset {io_sync_flags}) does not fit in io_kiocb.cmd ({cmd_size} bytes)"
        )));
    }
    Ok(IoUringLayout {
        kiocb_opcode: member_offset(btf, "io_kiocb", "opcode", 1)?,
        kiocb_file: member_offset(btf, "io_kiocb", "file", 8)?,
        kiocb_cmd: btf.member_offset("io_kiocb", "cmd")?,
        io_sync_flags,
        op_fsync: op("IORING_OP_FSYNC")?,
        op_sync_file_range: op("IORING_OP_SYNC_FILE_RANGE")?,
        resolved: 1,
        _reserved: 0,
    })
}

/// The probes read the request (`struct io_kiocb *`) at argument #0 of the submit event
/// (whichever name BTF has). Kernels before 5.15 or so pass the ring, opcode and `user_data`
/// there instead, with no request to follow to its file. `io_uring_complete` takes the request
/// as a `void *` (#1), which BTF cannot tell from any other pointer, so it is not checked.
fn check_io_uring_prototypes(btf: &Btf) -> Result<(), LayoutError> {
    let Some(submit) = ["io_uring_submit_req", "io_uring_submit_sqe"]
        .into_iter()
        .find(|e| btf.has_type(&format!("btf_trace_{e}")))
    else {
        // A missing hook is the loader's to report.
        return Ok(());
    };
    match btf.tp_btf_arg_index(submit, "io_kiocb") {
        Ok(0) => Ok(()),
        Ok(n) => Err(LayoutError::prototype(
            submit,
            format!(" has the request at argument #{n}, not #0"),
        )),
        Err(_) => Err(LayoutError::prototype(
            submit,
            " takes no request (struct io_kiocb) on this kernel",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine with tracefs and BTF, every part resolves.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(kernel) = KernelInfo::discover() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        assert!(sfr_enter(&kernel).is_ok());
        assert!(field(&kernel, "syscalls", "sys_enter_msync", "flags", 8).is_ok());
        assert!(field(&kernel, "ext4", "ext4_sync_file_enter", "dev", 4).is_ok());
        if kernel.btf.is_ok() {
            let l = io_uring(&kernel).expect("io_uring layout");
            assert_eq!((l.op_fsync, l.op_sync_file_range), (3, 8), "UAPI values");
        }
    }
}
