//! The limits a VM enforces while it runs ([`Limits`]: depth, re-entry, steps, registers),
//! interrupts from other threads and signals (the poll hook), and the native stack.

use super::VirtualMachine;
use crate::error::{ErrorKind, Result};
pub use crate::input_file::PollHook;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The limits one VM enforces: call depth, re-entry, steps, registers
/// ([`VirtualMachine::limits_mut`]). Whether the VM may be profiled is not a limit: see
/// [`VirtualMachine::set_profiling_enabled`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The deepest chain of bytecode frames before a call fails with a stack-overflow error.
    pub max_call_depth: usize,
    /// How many times packed functions may re-enter the VM, nested, (each uses native stack).
    pub max_reentry: usize,
    /// Steps one top-level invocation may take, counting every bytecode call and backward
    /// jump (the points every long-running program passes through); `None` is unlimited.
    pub step_budget: Option<u64>,
    /// The most registers all frames may hold together (16 bytes each): a call that needs more
    /// fails with an allocation error. Without it, a function declaring a million registers
    /// that recursed would exhaust memory long before the depth limit.
    pub max_stack_registers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_call_depth: 100_000, max_reentry: 200, step_budget: None, max_stack_registers: 1 << 24 }
    }
}

/// The native stack a call into the interpreter must find left: enough for the interpreter,
/// a packed function and the host code (e.g. Python's) between it and the next entry.
pub const MIN_NATIVE_STACK: usize = 64 << 10;

/// Refuses to enter the interpreter with less than [`MIN_NATIVE_STACK`] bytes of native stack
/// left: a thread with a small stack (a Python thread made with `threading.stack_size`) would
/// otherwise overflow it, a SIGSEGV. Public for embedders' own call paths that nest on the
/// thread's stack without entering the VM (the Python binding's calls of registered functions,
/// which can call each other back through Python).
#[inline]
pub fn check_native_stack() -> Result<()> {
    match stacker::remaining_stack() {
        Some(remaining) if remaining < MIN_NATIVE_STACK => {
            Err(ErrorKind::NativeStack { remaining, needed: MIN_NATIVE_STACK }.into())
        }
        _ => Ok(()),
    }
}

/// How many steps (bytecode calls and backward jumps) pass between calls of the poll hook.
pub const POLL_INTERVAL: u32 = 1024;

/// Stops a running VM from another thread: the VM checks it every [`POLL_INTERVAL`] steps
/// (backward jumps and calls) and whenever a long builtin polls.
#[derive(Clone, Debug, Default)]
pub struct InterruptHandle(Arc<AtomicBool>);

impl InterruptHandle {
    /// Asks the VM to stop with [`ErrorKind::Interrupted`] as soon as it checks.
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(super) fn take(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed)
    }
}

impl VirtualMachine {
    /// The limits this VM enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Changes the limits (they apply from the next call on).
    pub fn limits_mut(&mut self) -> &mut Limits {
        // What entries worked out from the limits is worked out again at the next call.
        self.forget_entry_limits();
        &mut self.limits
    }

    /// Checks, now, for what the interpreter checks every few steps: an interrupt (an
    /// [`ErrorKind::Interrupted`] error) and the poll hook (Ctrl-C in Python). For loops outside
    /// the interpreter that run for long — a builtin's inner loop, a benchmark's repetitions.
    pub fn poll(&mut self) -> Result<()> {
        // The hook first: it may wait (for Python's GIL) while another thread interrupts.
        if let Some(poll) = &self.poll {
            poll()?;
        }
        if self.interrupt.take() {
            return Err(ErrorKind::Interrupted.into());
        }
        Ok(())
    }

    /// Called at every backward jump and bytecode call, the points every long run passes
    /// through. One counter is decremented; when it runs out, [`refuel`](Self::refuel) does
    /// what must happen every few steps: the step budget, the interrupt flag, the poll hook.
    #[inline(always)]
    pub(super) fn count_step(&mut self) -> Result<()> {
        self.fuel -= 1;
        if self.fuel == 0 {
            return self.refuel();
        }
        Ok(())
    }

    /// Starts counting steps for a top-level invocation with the configured budget.
    pub(super) fn start_counting(&mut self) {
        let Some(budget) = self.limits.step_budget else { return self.start_counting_unlimited() };
        self.steps_left = budget;
        self.interrupt.take();
        self.issue_fuel();
    }

    /// [`start_counting`](Self::start_counting) for a VM without a step budget (the caller
    /// knows it has none): stores of constants, with no look at the limits.
    #[inline(always)]
    pub(super) fn start_counting_unlimited(&mut self) {
        debug_assert!(self.limits.step_budget.is_none());
        // What `issue_fuel` issues for an unlimited budget.
        self.steps_left = u64::MAX;
        self.issued = POLL_INTERVAL;
        self.fuel = POLL_INTERVAL;
        self.interrupt.take();
    }

    /// The steps until the next check: at most [`POLL_INTERVAL`], and one past the budget, so
    /// that the step that would exceed it is the one that checks.
    fn issue_fuel(&mut self) {
        self.issued = self.steps_left.saturating_add(1).min(u64::from(POLL_INTERVAL)) as u32;
        self.fuel = self.issued;
    }

    /// The checks every [`POLL_INTERVAL`] steps (and at the step past the budget).
    #[cold]
    #[inline(never)]
    fn refuel(&mut self) -> Result<()> {
        // `issued` steps were taken since fuel was issued, this one included.
        if u64::from(self.issued) > self.steps_left {
            // Every later step fails the same way (a packed function may go on after the error).
            self.fuel = 1;
            return Err(ErrorKind::StepBudget(self.limits.step_budget.unwrap_or(0)).into());
        }
        self.steps_left -= u64::from(self.issued);
        self.issue_fuel();
        if self.interrupt.take() {
            return Err(ErrorKind::Interrupted.into());
        }
        if let Some(poll) = &self.poll {
            poll()?;
        }
        Ok(())
    }
}
