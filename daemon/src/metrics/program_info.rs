//! A program's run-time statistics from `BPF_OBJ_GET_INFO_BY_FD`: one system call per program,
//! where reading `/proc/self/fdinfo/<fd>` costs an open, a stat, several reads and a close (a
//! scrape read 36 programs: about 250 system calls, most of a scrape's).
//!
//! Like the fdinfo entry it needs no capability beyond holding the descriptor, so it works
//! after the service drops CAP_SYS_ADMIN (listing the kernel's programs would not).

use std::os::fd::{AsRawFd as _, BorrowedFd};

/// `BPF_OBJ_GET_INFO_BY_FD` (include/uapi/linux/bpf.h, `enum bpf_cmd`).
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// The head of `struct bpf_prog_info` up to `run_cnt` (uapi, so the offsets never move; both
/// members since 5.1). The kernel fills at most `info_len` bytes, so asking for this prefix
/// only is valid on every kernel that has the members.
#[repr(C)]
struct ProgInfoHead {
    /// `type` … `prog_tags`: not read.
    _before: [u8; 192],
    run_time_ns: u64,
    run_cnt: u64,
}

/// The `info` member of `union bpf_attr`.
#[repr(C)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// Run time (ns) and run count of the program behind `fd`: 0 and 0 while BPF statistics are
/// off (`kernel.bpf_stats_enabled`).
pub fn run_stats(fd: BorrowedFd<'_>) -> std::io::Result<(u64, u64)> {
    let mut info = ProgInfoHead {
        _before: [0; 192],
        run_time_ns: 0,
        run_cnt: 0,
    };
    let attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: size_of::<ProgInfoHead>() as u32,
        info: (&raw mut info) as u64,
    };
    // SAFETY: `attr` is a valid `union bpf_attr` prefix for this command, and `info` a writable
    // buffer of `info_len` bytes that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &raw const attr,
            size_of::<InfoAttr>(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((info.run_time_ns, info.run_cnt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_sit_where_the_uapi_puts_them() {
        assert_eq!(std::mem::offset_of!(ProgInfoHead, run_time_ns), 192);
        assert_eq!(std::mem::offset_of!(ProgInfoHead, run_cnt), 200);
    }

    #[test]
    fn a_descriptor_that_is_not_a_bpf_object_is_an_error() {
        let file = std::fs::File::open("/proc/self/stat").expect("open");
        use std::os::fd::AsFd as _;
        assert!(run_stats(file.as_fd()).is_err());
    }
}
