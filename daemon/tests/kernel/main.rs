//! Privileged kernel tests: real probes on the real kernel, provoked on loop-device filesystems
//! that the fixtures create and remove (also on panic). Each assertion is filtered by the test's
//! own device. Run as root through `cargo xtask test` (they are `#[ignore]`d otherwise, so
//! nothing privileged runs by accident).

mod block;
mod bpftrace;
mod cgroups;
mod degrade;
mod device_writes;
mod dirty_memory;
mod dirty_throttle;
mod harness;
mod journal;
mod map_pressure;
mod nfs;
mod series_budget;
mod stall_context;
mod stall_verdicts;
mod stalls;
mod submissions;
mod sync_all_calls;
mod sync_call_hooks;
mod sync_calls;
mod top;
mod writeback;
mod writeback_wait;
