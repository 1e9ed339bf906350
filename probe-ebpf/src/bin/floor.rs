//! Empty programs: the benchmark's floor.
//!
//! `wbscope bench-floor` attaches one of these to every hook the daemon uses, so that the
//! benchmark can measure what merely running a BPF program on each hook costs on the host (the
//! kernel's dispatch, the run-time statistics, and for classic tracepoints the trace record that
//! is built before the program runs) in the same run as wbscope's own programs. What wbscope costs
//! above this floor is the work its programs do; the floor itself no program can remove.
#![no_std]
#![no_main]

use aya_ebpf::{
    macros::{btf_tracepoint, tracepoint},
    programs::{BtfTracePointContext, TracePointContext},
};

/// For classic tracepoints; attached to each event in turn by the loader.
#[tracepoint]
pub fn floor_tracepoint(_ctx: TracePointContext) -> u32 {
    0
}

/// For BTF tracepoints; the attach target is chosen when the program is loaded.
#[btf_tracepoint]
pub fn floor_btf(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // Nothing above can panic; the handler only satisfies no_std.
    loop {}
}

/// The same license as the main object, so that both load under the same rules.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
