//! wbscope's eBPF programs.
//!
//! Hooks are classic tracepoints (their record layout comes from the running kernel's format files)
//! and BTF tracepoints on hot paths (struct offsets from the kernel's BTF), both injected as
//! load-time globals, so that the same object loads on every kernel with BTF. Everything is
//! aggregated in per-CPU maps that the daemon reads when Prometheus scrapes; the only per-event
//! records that leave the kernel are stall events (operations over a threshold, `stall_events`).
#![no_std]
#![no_main]
// Atomic add on map values (see writeback_wait.rs): the BPF target lacks compare-and-swap, so
// core's atomics offer no fetch_add there.
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod block;
mod cgroups;
mod device_writes;
mod dirty_throttle;
mod flusher_work;
mod hist;
mod journal;
mod kernel;
mod nfs;
mod stall_events;
mod submissions;
mod sync_calls;
mod top_processes;
mod writeback;
mod writeback_wait;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // Unreachable in a verified program: a reachable panic makes the verifier reject the program
    // ("last insn is not an exit or jmp"), which is how we find out at load time.
    loop {}
}

/// bpf_probe_read_kernel and friends are GPL-only helpers.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
