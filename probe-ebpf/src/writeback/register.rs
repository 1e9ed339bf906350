//! The flusher register: which threads are executing a flusher work item, looked up from the
//! current task's address alone, so that the per-bio attribution of device writes
//! (`device_writes`) can tell a workqueue worker that is not a flusher (most kworker bios: loop,
//! dm-crypt, md, filesystem workers) without a task storage lookup, which reads cold lines far
//! into the task and its storage on every such bio.
//!
//! A shared array of [`FLUSHER_SLOTS`] slots, indexed by a hash of the task's address, as the
//! untyped `bpf_get_current_task()` returns it (no memory read; the verifier allows no
//! arithmetic on a typed task pointer). Opening an item adds one to its slot's `claims`; the
//! thread that brings `claims` from 0 to 1 owns the slot and writes its address and the item's
//! sync mode and reason there; closing the item clears the address (owner) and subtracts the claim. Without compare-and-swap (BPF cpu v1, for
//! 5.10), ownership is decided by reading `claims` back after the add: of threads that add
//! concurrently at most one reads 1, since every later add makes the value at least 2.
//!
//! A bio's submitter then finds one of:
//! - its own address in the slot: it owns the slot, and the slot carries its item;
//! - `claims == 0`: no thread that maps to the slot has an item open, so it has none;
//! - anything else (a collision, or a thread whose item opened before the probes): the exact
//!   answer is in the thread's own item (`open_item_of_task`), which is always kept as well.
//!
//! Before any of that, one counter of the claims held in the whole register
//! ([`FLUSHER_CLAIMS`]) answers for every thread while no flusher item is open anywhere, the
//! usual state between writeback passes: a load, without the helper call that fetches the
//! task's address (a helper call costs a return through the kernel's return thunk, several
//! nanoseconds on CPUs with return-stack mitigations).
//!
//! Atomics run only when an item opens or closes (a few times a second per flusher thread),
//! never per bio; the per-bio read is one load while no item is open, else two more of a line
//! that is written that rarely.

use aya_ebpf::{macros::map, maps::Array};
use probe_common::writeback::{
    FLUSHER_SLOTS, FlusherItem, FlusherSlot, NO_CLAIM, SLOT_OWNED, SLOT_SHARED, flusher_slot,
};

use aya_ebpf::helpers::generated;

use crate::kernel::atomic;

/// The current task's address, the register's name for a thread: a task is not freed while it
/// runs, so no other thread has this address while it has an item open.
#[inline(always)]
pub fn current() -> u64 {
    // SAFETY: bpf_get_current_task has no preconditions; the value is only compared and hashed.
    unsafe { generated::bpf_get_current_task() }
}

/// The register (see the module documentation).
#[map]
static FLUSHER_REGISTER: Array<FlusherSlot> = Array::with_max_entries(FLUSHER_SLOTS, 0);

/// The claims held in [`FLUSHER_REGISTER`] in all, one element: 0 while no thread holds one.
/// Changed with the claims, by atomic adds.
#[map]
static FLUSHER_CLAIMS: Array<u64> = Array::with_max_entries(1, 0);

/// What the register says of a thread.
pub enum Registered {
    /// It executes a flusher work item of this `(sync_mode, reason)`.
    Item(u32, u32),
    /// It executes no flusher work item.
    NoItem,
    /// Ask its own item.
    Unknown,
}

/// The register's answer for the current task: [`Registered::NoItem`] from the claim count
/// alone while no thread holds a claim, else [`lookup`] of the task's address.
#[inline(always)]
pub fn lookup_current() -> Registered {
    if let Some(total) = FLUSHER_CLAIMS.get_ptr(0) {
        // SAFETY: an array element, valid for the map's lifetime; changed only by atomic adds.
        if atomic::read(total) == 0 {
            return Registered::NoItem;
        }
    }
    lookup(current())
}

/// The register's answer for the task at `task` ([`current`]).
#[inline(always)]
fn lookup(task: u64) -> Registered {
    let Some(slot) = FLUSHER_REGISTER.get_ptr(flusher_slot(task)) else {
        return Registered::Unknown;
    };
    // SAFETY: an array element, valid for the map's lifetime; read member by member.
    let owner = unsafe { core::ptr::read_volatile(&raw const (*slot).task) };
    if owner == task {
        // SAFETY: as above; only the owner, this thread, writes these members while it owns it.
        return unsafe { Registered::Item((*slot).sync_mode, (*slot).reason) };
    }
    // SAFETY: as above.
    if atomic::read(unsafe { &raw const (*slot).claims }) == 0 {
        Registered::NoItem
    } else {
        Registered::Unknown
    }
}

/// The task at `task` ([`current`]) opens `item`: claims the task's slot, and records in the item
/// which claim it holds.
#[inline(always)]
pub fn claim(task: u64, item: &mut FlusherItem) {
    item.register = NO_CLAIM;
    if task == 0 {
        // 0 marks a slot without owner.
        return;
    }
    let Some(slot) = FLUSHER_REGISTER.get_ptr_mut(flusher_slot(task)) else {
        return;
    };
    let Some(total) = FLUSHER_CLAIMS.get_ptr_mut(0) else {
        return;
    };
    // Counted before the slot is claimed, so that no reader sees a claim the total misses.
    atomic::add(total, 1);
    // SAFETY: an array element, valid for the map's lifetime; `claims` changes only through
    // atomic adds, the other members only by the owner.
    unsafe {
        let claims = &raw mut (*slot).claims;
        atomic::add(claims, 1);
        if atomic::read(claims) == 1 {
            (*slot).sync_mode = item.key.sync_mode;
            (*slot).reason = item.key.reason;
            core::ptr::write_volatile(&raw mut (*slot).task, task);
            item.register = SLOT_OWNED;
        } else {
            item.register = SLOT_SHARED;
        }
    }
}

/// The task at `task` closes `item`: gives back the claim it holds.
#[inline(always)]
pub fn release(task: u64, item: &FlusherItem) {
    if item.register == NO_CLAIM {
        return;
    }
    let Some(slot) = FLUSHER_REGISTER.get_ptr_mut(flusher_slot(task)) else {
        return;
    };
    // SAFETY: as in `claim`. The owner clears its address before its claim goes, so no thread
    // can own the slot while it still names this one.
    unsafe {
        if item.register == SLOT_OWNED {
            core::ptr::write_volatile(&raw mut (*slot).task, 0);
        }
        atomic::add(&raw mut (*slot).claims, u64::MAX);
    }
    // After the slot's claim: the total never drops below the claims it counts.
    if let Some(total) = FLUSHER_CLAIMS.get_ptr_mut(0) {
        atomic::add(total, u64::MAX);
    }
}
