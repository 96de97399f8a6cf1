//! When a call releases the GIL: releasing and re-taking it costs about as much as running a
//! few instructions, so a function that only moves values, calls constant-time builtins and
//! calls Python keeps it; anything that may run long releases it. The analysis is
//! `relaxvm::long_calls` (Rust embedders holding a lock of their own use it too); this file
//! names the Python callables and the process-wide registry. Functions the analysis cannot
//! bound (kernels whose cost depends on symbolic input shapes) keep the GIL when their last
//! call with the same shapes ran short ([`relaxvm::short_calls::ShortRecord`]); such a call
//! runs marked (`crate::kept_call`), so that the VM's poll hook hands the GIL to other threads if
//! it turns out long.

use crate::convert::PyClosure;
use crate::registry::is_python_backed;
use relaxvm::long_calls::{callee_costs, may_run_long, CalleeCost};
use relaxvm::{Callable, Cost, Executable};
use std::collections::HashSet;

/// Per function-table entry of `exe`, what calling it costs with the GIL held (Python
/// functions are callbacks).
pub fn gil_costs(exe: &Executable) -> Vec<CalleeCost> {
    // Found before the registry is locked for reading: `is_python_backed` reads it too, and a
    // second read lock on one thread can wait for a writer queued behind the first.
    let python: HashSet<&str> = exe.packed_function_names().into_iter().filter(|n| is_python_backed(n)).collect();
    callee_costs(exe, &relaxvm::registry::global(), |n| python.contains(n))
}

/// Whether calling bytecode function `start` should release the GIL (see
/// [`relaxvm::long_calls::may_run_long`]).
pub fn needs_release(exe: &Executable, costs: &[CalleeCost], start: usize) -> bool {
    may_run_long(exe, costs, start)
}

impl PyClosure {
    /// Whether every call of this function from Python keeps the GIL: a constant-time packed
    /// function's does (others follow their record of short calls).
    pub(crate) fn keeps_gil_always(&self) -> bool {
        matches!(&self.0.callable, Callable::Packed(p) if p.cost() == Cost::Constant)
    }
}
