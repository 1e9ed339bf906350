//! Resolving the NFS probes' layout from the running kernel: the `nfs` tracepoints' record
//! offsets from tracefs (the events exist only while the `nfs` module is loaded) and
//! `writeback_control.sync_mode` from BTF.

use probe_common::nfs::NfsFormat;

use crate::kernel::{
    KernelInfo, LayoutError,
    layout::{field_offset, member_offset},
    tracefs::EventFormat,
};

/// The tracepoint category the `nfs` module registers.
pub const CATEGORY: &str = "nfs";

/// Why the NFS tracepoints are missing when the module is not loaded: said once, plainly,
/// rather than as a missing format file.
pub fn module_missing(kernel: &KernelInfo) -> Option<String> {
    if kernel.tracefs.event_exists(CATEGORY, "nfs_initiate_write") {
        return None;
    }
    Some(
        "the nfs module is not loaded (no tracepoint nfs/nfs_initiate_write); its tracepoints \
         appear when it loads, and wbscope attaches at start, so restart wbscope after the first \
         NFS mount"
            .into(),
    )
}

/// `dev_t dev` is 4 bytes, `fileid` and `offset` 8.
fn dev_fileid_offset(
    kernel: &KernelInfo,
    event: &str,
) -> Result<(EventFormat, u32, u32, u32), LayoutError> {
    let format = kernel.event_format(CATEGORY, event)?;
    let dev = field_offset(&format, "dev", |n| n == 4)?;
    let fileid = field_offset(&format, "fileid", |n| n == 8)?;
    let offset = field_offset(&format, "offset", |n| n == 8)?;
    Ok((format, dev, fileid, offset))
}

/// The WRITE part: `nfs_initiate_write` and `nfs_writeback_done`.
pub fn writes(kernel: &KernelInfo, f: &mut NfsFormat) -> Result<(), LayoutError> {
    if let Some(why) = module_missing(kernel) {
        return Err(LayoutError::Unhandled(why));
    }
    let (start, dev, fileid, offset) = dev_fileid_offset(kernel, "nfs_initiate_write")?;
    let count = field_offset(&start, "count", |n| n == 4)?;
    // `unsigned long stable` (`enum nfs3_stable_how` on some kernels): 4 or 8 bytes, read as
    // the low word.
    let stable = field_offset(&start, "stable", |n| n == 4 || n == 8)?;
    let (done, done_dev, done_fileid, done_offset) =
        dev_fileid_offset(kernel, "nfs_writeback_done")?;
    let error = reply_status(&done)?;
    f.write_dev = dev;
    f.write_fileid = fileid;
    f.write_offset = offset;
    f.write_count = count;
    f.write_stable = stable;
    f.write_done_dev = done_dev;
    f.write_done_fileid = done_fileid;
    f.write_done_offset = done_offset;
    f.write_done_error = error;
    f.writes_resolved = 1;
    Ok(())
}

/// The reply's status in a `*_done` event: `int error` (the RPC's `tk_status`, negative on
/// error; the probes only test its sign). Older kernels such as 5.10 call it `status`: there the
/// NFS probes stay off on purpose. With them attached through `status`, a 5.10 guest soft-locked
/// for minutes in wbscope's detach thread after the random-writes test; until that is
/// understood, not attaching is the safe answer.
fn reply_status(done: &EventFormat) -> Result<u32, LayoutError> {
    match field_offset(done, "error", |n| n == 4) {
        Ok(offset) => Ok(offset),
        Err(error) if done.require("status").is_ok() => Err(LayoutError::Unhandled(format!(
            "{error} (this kernel's `status` variant is not used: detaching the NFS probes \
             soft-locked a 5.10 guest)"
        ))),
        Err(error) => Err(error),
    }
}

/// The COMMIT part: `nfs_initiate_commit` and `nfs_commit_done`.
pub fn commits(kernel: &KernelInfo, f: &mut NfsFormat) -> Result<(), LayoutError> {
    if let Some(why) = module_missing(kernel) {
        return Err(LayoutError::Unhandled(why));
    }
    let (_, dev, fileid, offset) = dev_fileid_offset(kernel, "nfs_initiate_commit")?;
    let (done, done_dev, done_fileid, done_offset) = dev_fileid_offset(kernel, "nfs_commit_done")?;
    let error = reply_status(&done)?;
    f.commit_dev = dev;
    f.commit_fileid = fileid;
    f.commit_offset = offset;
    f.commit_done_dev = done_dev;
    f.commit_done_fileid = done_fileid;
    f.commit_done_offset = done_offset;
    f.commit_done_error = error;
    f.commits_resolved = 1;
    Ok(())
}

/// The sync-mode part: `tp_btf/wbc_writepage(struct writeback_control *, …)` and the member.
/// Only wanted where WRITEs are counted: it runs once per folio of every writepages pass.
pub fn pass_mode(kernel: &KernelInfo, f: &mut NfsFormat) -> Result<(), LayoutError> {
    if let Some(why) = module_missing(kernel) {
        return Err(LayoutError::Unhandled(why));
    }
    let btf = kernel.btf()?;
    let wbc = btf.tp_btf_arg_index("wbc_writepage", "writeback_control")?;
    if wbc != 0 {
        return Err(LayoutError::prototype(
            "wbc_writepage",
            format!(": writeback_control * is argument {wbc}, expected 0"),
        ));
    }
    f.wbc_sync_mode = member_offset(btf, "writeback_control", "sync_mode", 4)?;
    f.wbc_resolved = 1;
    Ok(())
}
