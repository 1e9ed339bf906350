//! Resolving, from the running kernel, every layout fact the probes need, as load-time globals.
//!
//! Each fact is resolved independently: a missing event or struct member disables only the probes
//! that need it, and the reason is what `wbscope check` prints.

use std::collections::BTreeMap;

use probe_common::layout::{FdDevLayout, SysEnterFdFormat, WbWorkFormat};

use super::{btf::Btf, tracefs::Tracefs};

/// The events of `writeback_work_class` whose records the writeback probes read.
pub const WB_WORK_EVENTS: [&str; 4] = [
    "writeback_queue",
    "writeback_exec",
    "writeback_start",
    "writeback_written",
];

/// Everything resolved from the running kernel. Each `Err` holds why that part is unavailable.
#[derive(Debug)]
pub struct KernelLayout {
    pub wb_work: Result<WbWorkFormat, String>,
    /// `enum wb_reason` value → label (`background`, `sync`, …), from the kernel itself.
    pub wb_reasons: BTreeMap<u32, String>,
    pub fsync_enter: Result<SysEnterFdFormat, String>,
    pub fdatasync_enter: Result<SysEnterFdFormat, String>,
    pub fd_dev: Result<FdDevLayout, String>,
}

impl KernelLayout {
    /// Resolves every part; never fails as a whole.
    pub fn resolve(tracefs: &Tracefs, btf: Result<&Btf, &str>) -> KernelLayout {
        KernelLayout {
            wb_work: wb_work_format(tracefs),
            wb_reasons: wb_reason_names(tracefs, btf.ok()),
            fsync_enter: sys_enter_fd(tracefs, "sys_enter_fsync"),
            fdatasync_enter: sys_enter_fd(tracefs, "sys_enter_fdatasync"),
            fd_dev: match btf {
                Ok(btf) => fd_dev_layout(btf),
                Err(why) => Err(format!("no kernel BTF: {why}")),
            },
        }
    }
}

/// Offset of `field`, checking its size: a size we do not expect means a layout we do not know,
/// and reading it with the wrong width would produce wrong numbers silently.
fn field_offset(
    format: &super::tracefs::EventFormat,
    field: &str,
    size_ok: impl Fn(u32) -> bool,
) -> Result<u32, String> {
    let f = format.require(field).map_err(|e| e.to_string())?;
    if !size_ok(f.size) {
        return Err(format!(
            "{}: field `{field}` has unexpected size {}",
            format.name, f.size
        ));
    }
    Ok(f.offset)
}

fn wb_work_format(tracefs: &Tracefs) -> Result<WbWorkFormat, String> {
    let mut resolved: Option<WbWorkFormat> = None;
    for event in WB_WORK_EVENTS {
        let format = tracefs
            .event_format("writeback", event)
            .map_err(|e| e.to_string())?;
        let int = |n: u32| n == 4;
        let this = WbWorkFormat {
            name: field_offset(&format, "name", |n| n >= 16)?,
            nr_pages: field_offset(&format, "nr_pages", |n| n == 8)?,
            sb_dev: field_offset(&format, "sb_dev", int)?,
            sync_mode: field_offset(&format, "sync_mode", int)?,
            for_kupdate: field_offset(&format, "for_kupdate", int)?,
            range_cyclic: field_offset(&format, "range_cyclic", int)?,
            for_background: field_offset(&format, "for_background", int)?,
            reason: field_offset(&format, "reason", int)?,
        };
        // The probes share one set of offsets for the whole event class.
        match resolved {
            None => resolved = Some(this),
            Some(first) if first != this => {
                return Err(format!(
                    "writeback/{event} record layout differs from writeback/{}",
                    WB_WORK_EVENTS[0]
                ));
            }
            Some(_) => {}
        }
    }
    resolved.ok_or_else(|| "no writeback work events".to_string())
}

/// `wb_reason` names from the tracepoint's own `__print_symbolic` table, or else from BTF
/// `enum wb_reason` (`WB_REASON_FS_FREE_SPACE` → `fs_free_space`). Never from a built-in table:
/// the numbering changed in 5.8.
fn wb_reason_names(tracefs: &Tracefs, btf: Option<&Btf>) -> BTreeMap<u32, String> {
    if let Ok(format) = tracefs.event_format("writeback", "writeback_start")
        && let Some(table) = format.symbolic_table("reason")
        && !table.is_empty()
    {
        return table
            .into_iter()
            .filter_map(|(v, name)| Some((u32::try_from(v).ok()?, name)))
            .collect();
    }
    btf.and_then(|btf| btf.enum_variants("wb_reason").ok())
        .map(|variants| reason_names_from_enum(&variants))
        .unwrap_or_default()
}

/// Turns `enum wb_reason` enumerators into label values, skipping the `WB_REASON_MAX` sentinel.
pub fn reason_names_from_enum(variants: &[(String, i64)]) -> BTreeMap<u32, String> {
    variants
        .iter()
        .filter(|(name, _)| name != "WB_REASON_MAX")
        .filter_map(|(name, value)| {
            let label = name.strip_prefix("WB_REASON_")?.to_ascii_lowercase();
            Some((u32::try_from(*value).ok()?, label))
        })
        .collect()
}

fn sys_enter_fd(tracefs: &Tracefs, event: &str) -> Result<SysEnterFdFormat, String> {
    let format = tracefs
        .event_format("syscalls", event)
        .map_err(|e| e.to_string())?;
    // Syscall arguments are recorded as longs whatever their C type.
    Ok(SysEnterFdFormat {
        fd: field_offset(&format, "fd", |n| n == 8)?,
        _reserved: 0,
    })
}

fn fd_dev_layout(btf: &Btf) -> Result<FdDevLayout, String> {
    let member = |ty: &str, name: &str, size: u32| -> Result<u32, String> {
        let actual = btf.member_size(ty, name).map_err(|e| e.to_string())?;
        if actual != size {
            return Err(format!("{ty}.{name} has size {actual}, expected {size}"));
        }
        btf.member_offset(ty, name).map_err(|e| e.to_string())
    };
    Ok(FdDevLayout {
        task_files: member("task_struct", "files", 8)?,
        files_fdt: member("files_struct", "fdt", 8)?,
        fdt_max_fds: member("fdtable", "max_fds", 4)?,
        fdt_fd: member("fdtable", "fd", 8)?,
        file_f_inode: member("file", "f_inode", 8)?,
        inode_i_mode: member("inode", "i_mode", 2)?,
        inode_i_rdev: member("inode", "i_rdev", 4)?,
        inode_i_sb: member("inode", "i_sb", 8)?,
        sb_s_dev: member("super_block", "s_dev", 4)?,
        resolved: 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_strip_prefix_and_sentinel() {
        let v = vec![
            ("WB_REASON_BACKGROUND".to_string(), 0),
            ("WB_REASON_FS_FREE_SPACE".to_string(), 5),
            ("WB_REASON_MAX".to_string(), 8),
        ];
        let names = reason_names_from_enum(&v);
        assert_eq!(names.get(&0).map(String::as_str), Some("background"));
        assert_eq!(names.get(&5).map(String::as_str), Some("fs_free_space"));
        assert_eq!(names.len(), 2);
    }

    /// On a machine with tracefs and BTF, everything the probes need resolves.
    #[test]
    fn resolves_on_the_running_kernel() {
        let Ok(tracefs) = Tracefs::locate_or_mount() else {
            eprintln!("skipped: no tracefs (not root?)");
            return;
        };
        let btf = Btf::from_file(std::path::Path::new("/sys/kernel/btf/vmlinux"));
        let layout = KernelLayout::resolve(&tracefs, btf.as_ref().map_err(|_| "no btf"));
        let wb = layout.wb_work.expect("writeback work format");
        assert!(wb.nr_pages > wb.name);
        assert!(
            layout.wb_reasons.values().any(|n| n == "sync"),
            "{:?}",
            layout.wb_reasons
        );
        assert!(layout.fsync_enter.expect("fsync enter").fd > 0);
        if btf.is_ok() {
            assert_eq!(layout.fd_dev.expect("fd → dev layout").resolved, 1);
        }
    }
}
