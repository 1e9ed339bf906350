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
/// - Two arenas: the runtime has two worker threads plus the main thread; glibc would give
///   each thread that contends its own arena (each holding its own free pages). The daemon's
///   allocation rate is far too low for arena contention to matter.
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    {
        const MMAP_THRESHOLD: libc::c_int = 128 * 1024;
        // SAFETY: mallopt only changes malloc parameters; it is called before the runtime
        // starts other threads, and an unsupported parameter just returns 0.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_ARENA_MAX, 2);
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
