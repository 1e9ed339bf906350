//! The buffers batch reads copy into, kept per thread from one read to the next.
//!
//! A scrape reads some twenty maps one after another on one thread, and the stall-context
//! sampler reads the same maps on its own thread several times a second: fresh buffers each
//! time were one `calloc` and one `free` per map read, and the bigger ones went through
//! malloc's slow paths (consolidation of freed chunks).

use std::cell::RefCell;

/// Buffers larger than this are given back after the read rather than kept: a host with many
/// CPUs and a large map must not hold the largest read's buffers for the daemon's life.
const KEEP_BYTES: usize = 256 * 1024;

/// Room for a batch of keys and their values.
#[derive(Default)]
pub struct Scratch {
    pub keys: Vec<u8>,
    pub values: Vec<u8>,
}

impl Scratch {
    /// Makes both buffers at least this long (zero-filled where they grow, so every byte the
    /// kernel may not write is still initialised).
    pub fn reserve(&mut self, key_bytes: usize, value_bytes: usize) {
        if self.keys.len() < key_bytes {
            self.keys.resize(key_bytes, 0);
        }
        if self.values.len() < value_bytes {
            self.values.resize(value_bytes, 0);
        }
    }

    fn trim(&mut self) {
        if self.keys.capacity() + self.values.capacity() > KEEP_BYTES {
            *self = Scratch::default();
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Runs `read` with this thread's buffers (fresh ones if they are in use further up the stack).
pub fn with_scratch<R>(read: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let out = read(&mut scratch);
            scratch.trim();
            out
        }
        Err(_) => read(&mut Scratch::default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_kept_unless_large_and_nested_use_gets_its_own() {
        with_scratch(|s| s.reserve(64, 1024));
        let kept = with_scratch(|s| (s.keys.len(), s.values.len()));
        assert_eq!(kept, (64, 1024));
        with_scratch(|s| s.reserve(0, KEEP_BYTES + 1));
        assert_eq!(
            with_scratch(|s| s.values.len()),
            0,
            "a large buffer is given back"
        );
        let nested = with_scratch(|outer| {
            outer.reserve(8, 8);
            with_scratch(|inner| inner.values.len())
        });
        assert_eq!(nested, 0, "a nested read gets fresh buffers");
    }
}
