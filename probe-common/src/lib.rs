//! Types shared by wbscope's eBPF programs (`probe-ebpf`) and its daemon.
//!
//! Every type that crosses the kernel/user boundary is defined here once: `#[repr(C)]`, fixed-width
//! fields, no `bool`, no implicit padding, with its size asserted at compile time. The `user`
//! feature adds `aya::Pod` so the daemon can read these types out of maps and write the layout
//! globals.
#![no_std]

pub mod bio_disk;
pub mod block;
pub mod cgroups;
pub mod device_write;
pub mod dirty;
pub mod flusher_work;
pub mod hist;
pub mod journal;
pub mod layout;
pub mod map_overflow;
pub mod nfs;
pub mod object_names;
pub mod stall;
pub mod submission;
pub mod sync_call;
pub mod sync_layout;
pub mod task;
pub mod top;
pub mod writeback;

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
