//! Types shared by wbscope's eBPF programs (`probe-ebpf`) and its daemon.
//!
//! Every type that crosses the kernel/user boundary is defined here once: `#[repr(C)]`, fixed-width
//! fields, no `bool`, no implicit padding, with its size asserted at compile time. The `user`
//! feature adds `aya::Pod` so the daemon can read these types out of maps and write the layout
//! globals.
#![no_std]

pub mod block;
pub mod cgroups;
pub mod device_writes;
pub mod dirty_throttle;
pub mod flusher_work;
pub mod hist;
pub mod journal;
pub mod kernel;
pub mod map_overflow;
pub mod nfs;
pub mod object_names;
pub mod slots;
pub mod stall_events;
pub mod submissions;
pub mod sync_calls;
pub mod top_processes;
pub mod writeback;
pub mod writeback_wait;

/// Implements `aya::Pod` for the listed types on the user side only.
macro_rules! user_pod {
    ($($t:ty),* $(,)?) => {
        $(
            #[cfg(feature = "user")]
            // SAFETY: the type is `#[repr(C)]`, made only of integers and arrays of integers, and
            // has no padding (sizes are asserted next to each definition), so every bit pattern
            // is a valid value.
            unsafe impl aya::Pod for $t {}
        )*
    };
}
pub(crate) use user_pod;
