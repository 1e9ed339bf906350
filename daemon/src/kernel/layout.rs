//! Helpers for resolving layout facts from the running kernel, shared by the families.

use probe_common::kernel::{FdDevLayout, InodeDevLayout};

use super::{LayoutError, btf::Btf, tracefs::EventFormat};

/// Offset of `field` in `format`, checking its size: a size we do not expect means a layout we
/// do not know, and reading it with the wrong width would produce wrong numbers silently.
pub fn field_offset(
    format: &EventFormat,
    field: &str,
    size_ok: impl Fn(u32) -> bool,
) -> Result<u32, LayoutError> {
    let f = format.require(field)?;
    if !size_ok(f.size) {
        return Err(LayoutError::FieldSize {
            event: format.name.clone(),
            field: field.to_owned(),
            size: f.size,
        });
    }
    Ok(f.offset)
}

/// The name of the kernel's request-operation enum: `enum req_op` since 6.0, `enum req_opf`
/// before. Every family that reads a request or bio operation asks here, so that one kernel's
/// rename cannot be handled in one family and missed in another.
pub fn request_op_enum(btf: &Btf) -> &'static str {
    if btf.enum_variants("req_op").is_ok() {
        "req_op"
    } else {
        "req_opf"
    }
}

/// Offset and size of a struct member from BTF, checking the size.
pub fn member_offset(btf: &Btf, ty: &str, name: &str, size: u32) -> Result<u32, LayoutError> {
    let actual = btf.member_size(ty, name)?;
    if actual != size {
        return Err(LayoutError::MemberSize {
            ty: ty.to_owned(),
            member: name.to_owned(),
            actual,
            expected: size,
        });
    }
    Ok(btf.member_offset(ty, name)?)
}

/// The struct offsets that take an inode to its filesystem's (or, for a block device inode, its
/// own) device in the kernel. Called once, by [`super::KernelInfo::discover`]: every family that
/// needs an inode's device gets this result from `KernelInfo::inode_dev`.
pub fn inode_dev_layout(btf: &Btf) -> Result<InodeDevLayout, LayoutError> {
    Ok(InodeDevLayout {
        inode_i_mode: member_offset(btf, "inode", "i_mode", 2)?,
        inode_i_rdev: member_offset(btf, "inode", "i_rdev", 4)?,
        inode_i_sb: member_offset(btf, "inode", "i_sb", 8)?,
        sb_s_dev: member_offset(btf, "super_block", "s_dev", 4)?,
        resolved: 1,
        inode_i_ino: member_offset(btf, "inode", "i_ino", 8)?,
    })
}

/// The struct offsets for resolving a file descriptor of the current task to its filesystem's
/// device in the kernel: the fd table's, followed by `inode` (the one inode → device resolution).
pub fn fd_dev_layout(btf: &Btf, inode: InodeDevLayout) -> Result<FdDevLayout, LayoutError> {
    Ok(FdDevLayout {
        task_files: member_offset(btf, "task_struct", "files", 8)?,
        files_fdt: member_offset(btf, "files_struct", "fdt", 8)?,
        fdt_max_fds: member_offset(btf, "fdtable", "max_fds", 4)?,
        fdt_fd: member_offset(btf, "fdtable", "fd", 8)?,
        file_f_inode: member_offset(btf, "file", "f_inode", 8)?,
        resolved: 1,
        inode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_dev_layout_resolves_on_the_running_kernel() {
        let Ok(btf) = Btf::from_file(std::path::Path::new(super::super::VMLINUX_BTF)) else {
            eprintln!("skipped: no kernel BTF");
            return;
        };
        let inode = inode_dev_layout(&btf).expect("inode → dev layout");
        assert_eq!(inode.resolved, 1);
        assert!(inode.inode_i_sb > 0 && inode.inode_i_rdev > 0);
        let layout = fd_dev_layout(&btf, inode).expect("fd → dev layout");
        assert_eq!(layout.resolved, 1);
        assert!(layout.task_files > 0);
        assert_eq!(layout.inode, inode);
    }
}
