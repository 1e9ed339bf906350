//! The registry of kernel changes a fixture must revert, run in reverse order on drop.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Mutex, PoisonError};

use crate::error::Result;

/// One registered revert step, with a description for the "could not undo" report.
struct UndoAction {
    what: String,
    revert: Box<dyn FnOnce() -> Result<()> + Send>,
}

/// A stack of revert steps. A `Mutex` rather than a `RefCell` keeps `LoopFs` `Sync`, so a
/// test may share it with a writer thread while a helper registers another change.
#[derive(Default)]
pub(crate) struct UndoStack {
    actions: Mutex<Vec<UndoAction>>,
}

impl UndoStack {
    /// Registers `revert`, to run before every step registered earlier.
    pub(crate) fn push(
        &self,
        what: impl Into<String>,
        revert: impl FnOnce() -> Result<()> + Send + 'static,
    ) {
        // A poisoned lock only means another thread panicked while pushing; the Vec is
        // still consistent, and losing an undo step would leak a kernel change.
        let mut actions = self.actions.lock().unwrap_or_else(PoisonError::into_inner);
        actions.push(UndoAction {
            what: what.into(),
            revert: Box::new(revert),
        });
    }

    /// Runs every step, newest first, and returns a description of each one that failed.
    /// Steps run even after a failure, because each reverts an independent setting.
    pub(crate) fn run_all(&self) -> Vec<String> {
        let actions = {
            let mut guard = self.actions.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::take(&mut *guard)
        };
        let mut failures = Vec::new();
        for action in actions.into_iter().rev() {
            let UndoAction { what, revert } = action;
            // Called from Drop, possibly during unwinding, where a second panic aborts the
            // whole test binary; catching here turns a buggy step into a reported failure.
            match panic::catch_unwind(AssertUnwindSafe(revert)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("{what}: {e}")),
                Err(_) => failures.push(format!("{what}: revert step panicked")),
            }
        }
        failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::Arc;

    #[test]
    fn runs_in_reverse_and_reports_failures() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let stack = UndoStack::default();
        for i in 0..3 {
            let order = Arc::clone(&order);
            stack.push(format!("step {i}"), move || {
                order.lock().unwrap().push(i);
                if i == 1 {
                    Err(Error::Invalid("boom".into()))
                } else {
                    Ok(())
                }
            });
        }
        let failures = stack.run_all();
        assert_eq!(*order.lock().unwrap(), vec![2, 1, 0]);
        assert_eq!(failures, vec!["step 1: invalid: boom".to_owned()]);
        assert!(stack.run_all().is_empty(), "steps must run only once");
    }
}
