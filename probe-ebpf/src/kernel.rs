//! The bottom of the probes: what every family needs from the kernel and nothing family-specific.
//!
//! - per-thread state: [`task_storage`] (BPF task storage and its declaration macro),
//!   [`inflight`] (the sync call each thread has in flight), [`current_task`] (members of the
//!   current task with or without a BTF-typed task);
//! - [`fd_dev`]: a file descriptor, `struct file` or inode → its filesystem's `dev_t`;
//! - [`btf_load`]: plain loads through BTF-typed pointers and helper reads;
//! - [`globals`]: the load-time globals every family reads (the inode → device layout, the
//!   daemon's own tgid).
//!
//! Families call these modules; nothing here calls a family.

pub mod atomic;
pub mod btf_load;
pub mod current_task;
pub mod fd_dev;
pub mod globals;
pub mod inflight;
pub mod task_storage;
