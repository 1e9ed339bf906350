//! Keeping the daemon's resident memory small on a fleet of hosts.
//!
//! Start-up is the daemon's only big allocation burst: two parses of the kernel's BTF (ours for
//! layouts, aya's for tp_btf attach targets, several MiB each) plus the object's relocations.
//! All of it is freed once the probes are attached, but glibc malloc keeps freed heap pages
//! mapped: measured here, the main arena held 24 MB of which 0.6 MB was in use, so the
//! daemon sat at ~32 MB RSS while it needed ~11 MB. Scrapes afterwards only allocate a few
//! hundred KiB at a time.

/// Fixes glibc malloc's tuning before any thread starts. Call once, first thing in `main`.
///
/// - A fixed mmap threshold turns off glibc's dynamic one: after a multi-MiB block (the BTF
///   file's contents) is freed, glibc would otherwise raise the threshold to that size and the
///   trim threshold to twice it, so later large buffers land in the heap and up to ~10 MiB of
///   free heap is never returned. With the default 128 KiB fixed, big buffers are mmapped and
///   unmapped on free, and free heap at the top is trimmed above 128 KiB.
/// - One arena: the runtime's two worker threads, the main thread and the stall-context sampler
///   share the main heap, which the trim threshold and `malloc_trim` keep small. glibc would give
///   a thread that contends an arena of its own, which keeps its own free pages: with two
///   arenas, a second one grew to about 550 KiB under load and stayed there. Small allocations
///   come from each thread's cache without the lock, and the daemon's allocation rate is far too
///   low for the lock to matter.
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    {
        const MMAP_THRESHOLD: libc::c_int = 128 * 1024;
        // SAFETY: mallopt only changes malloc parameters; it is called before the runtime
        // starts other threads, and an unsupported parameter just returns 0.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Returns the heap freed by start-up to the kernel (glibc only; elsewhere a no-op).
///
/// Called once the probes are attached and the BTF parses are dropped: free chunks below
/// live ones are not released by the automatic trim, only by `malloc_trim`, which also
/// `madvise`s free pages in the middle of the heap away.
pub fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory to the kernel; it is thread-safe (it locks
    // each arena) and leaves allocated blocks alone.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Unmaps the pages of the daemon's own executable that start-up touched: the code that parses
/// BTF, relocates and loads the eBPF object, and the embedded object itself (about 1.3 MiB that
/// nothing reads again until a reload). They are clean file pages, so the kernel keeps them in
/// its page cache and maps a page back on its next use with a minor fault; what stays resident
/// is the code the running daemon really executes (measured here: 7.5 MiB of the executable
/// resident after start-up, most of it never run again).
///
/// Only mappings that are never written are touched — the executable's code segment and the
/// page-aligned interior of the embedded object in read-only data. The read-only segment that
/// holds relocated data (RELRO) is private dirty memory: discarding it would lose the
/// relocations, so it is left alone.
pub fn release_start_up_pages() {
    let object = crate::probes::OBJECT;
    let start = object.as_ptr() as usize;
    let mut ranges = vec![page_interior(start, start + object.len())];
    ranges.extend(own_code_segments());
    for (start, end) in ranges {
        if end <= start {
            continue;
        }
        // SAFETY: [start, end) is page-aligned and lies inside a read-only or read-execute
        // private file mapping of our own executable that no code writes: MADV_DONTNEED drops
        // this process's mapping of the pages and a later access faults the same file contents
        // back in.
        let rc =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if rc != 0 {
            tracing::debug!(
                "madvise(MADV_DONTNEED) of start-up pages: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The whole pages inside `[start, end)`.
fn page_interior(start: usize, end: usize) -> (usize, usize) {
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    };
    (start.div_ceil(page) * page, end / page * page)
}

/// The read-execute mappings of the running executable, from `/proc/self/maps`.
fn own_code_segments() -> Vec<(usize, usize)> {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return Vec::new();
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    code_segments(&maps, &exe.to_string_lossy())
}

/// The `r-xp` ranges of `exe` in a maps listing.
fn code_segments(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            if perms != "r-xp" || path != exe {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some((
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(end, 16).ok()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_executables_code_segments_are_chosen() {
        let maps = "\
5555d000-5556a000 r--p 00000000 fe:01 123 /usr/bin/wbscope
5556a000-55600000 r-xp 0000d000 fe:01 123 /usr/bin/wbscope
55600000-55610000 r--p 000a3000 fe:01 123 /usr/bin/wbscope
55610000-55611000 rw-p 000b3000 fe:01 123 /usr/bin/wbscope
7f000000-7f100000 r-xp 00028000 fe:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f200000-7f300000 rw-p 00000000 00:00 0 \n";
        assert_eq!(
            code_segments(maps, "/usr/bin/wbscope"),
            vec![(0x5556a000, 0x55600000)]
        );
    }

    #[test]
    fn partial_pages_at_either_end_are_left_mapped() {
        let (start, end) = page_interior(4096 + 10, 5 * 4096 - 1);
        assert_eq!((start, end), (2 * 4096, 4 * 4096));
    }
}
