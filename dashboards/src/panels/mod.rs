//! Panel definitions, one file per subject. Each function takes the dashboard's [`Scope`] so the
//! same panel serves the fleet overview and the one-device investigation.
//!
//! [`Scope`]: crate::scope::Scope

pub mod block;
pub mod flusher;
pub mod health;
pub mod memory;
pub mod nfs;
pub mod syncs;
pub mod waits;
