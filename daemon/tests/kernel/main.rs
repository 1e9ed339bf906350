//! Privileged kernel tests: real probes on the real kernel, provoked on loop-device filesystems
//! that the fixtures create and remove (also on panic). Each assertion is filtered by the test's
//! own device. Run as root through `cargo xtask test` (they are `#[ignore]`d otherwise, so
//! nothing privileged runs by accident).

mod bpftrace;
mod dirty_memory;
mod dirty_throttle;
mod harness;
mod sync_calls;
mod writeback;
mod writeback_wait;
