//! A VM behind a mutex, shared by the Python objects that use it.
//!
//! One VM shared by several Python threads serialises their calls. The lock is taken after the
//! GIL is released (a thread waiting for the VM never blocks one that needs the GIL to finish a
//! callback). A callback that re-enters the VM it was called from gets a clear error instead of
//! a deadlock.

use crate::errors::IntoPyResult;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use relaxvm::{InterruptHandle, VirtualMachine};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// A number unique to the calling (attached) thread while it lives: its Python thread state.
#[inline]
fn thread_id(_py: Python<'_>) -> usize {
    // SAFETY: the thread is attached (we hold a `Python` token), so it has a thread state.
    unsafe { pyo3::ffi::PyThreadState_Get() as usize }
}

/// A VM and the thread that holds it.
pub struct Shared {
    vm: Mutex<VirtualMachine>,
    holder: AtomicUsize,
    /// Stops the running call from any thread.
    pub interrupt: InterruptHandle,
}

struct Held<'a> {
    guard: MutexGuard<'a, VirtualMachine>,
    holder: &'a AtomicUsize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.holder.store(0, Ordering::Release);
    }
}

enum TryHold<'a> {
    Held(Held<'a>),
    Busy,
    Reentrant,
}

impl Shared {
    /// `vm`, free.
    pub fn new(vm: VirtualMachine) -> Self {
        let interrupt = vm.interrupt_handle();
        Shared { vm: Mutex::new(vm), holder: AtomicUsize::new(0), interrupt }
    }

    /// Takes the VM if it is free, without blocking.
    #[inline]
    fn try_hold(&self, me: usize) -> TryHold<'_> {
        let guard = match self.vm.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return if self.holder.load(Ordering::Acquire) == me { TryHold::Reentrant } else { TryHold::Busy };
            }
        };
        self.holder.store(me, Ordering::Release);
        TryHold::Held(Held { guard, holder: &self.holder })
    }

    /// Waits for the VM. Only ever called with the GIL released: the holder may need the GIL
    /// for a callback before it can let go.
    fn hold_blocking(&self, me: usize) -> Held<'_> {
        let guard = self.vm.lock().unwrap_or_else(|p| p.into_inner());
        self.holder.store(me, Ordering::Release);
        Held { guard, holder: &self.holder }
    }

    /// Runs `f` on the VM. With `release`, the GIL is released while it runs; without, it is
    /// kept (worthwhile when `f` is short or only calls back into Python), unless the VM is busy
    /// in another thread, in which case we release it while we wait.
    #[inline]
    pub fn run<R: Send>(
        &self,
        py: Python<'_>,
        release: bool,
        f: impl FnOnce(&mut VirtualMachine) -> relaxvm::Result<R> + Send,
    ) -> PyResult<R> {
        let me = thread_id(py);
        if !release {
            match self.try_hold(me) {
                TryHold::Held(mut held) => return f(&mut held.guard).py_err(py),
                TryHold::Reentrant => return Err(reentrant_error()),
                TryHold::Busy => {}
            }
        }
        let r = py.detach(|| match self.try_hold(me) {
            TryHold::Held(mut held) => Ok(f(&mut held.guard)),
            TryHold::Busy => Ok(f(&mut self.hold_blocking(me).guard)),
            TryHold::Reentrant => Err(()),
        });
        match r {
            Ok(res) => res.py_err(py),
            Err(()) => Err(reentrant_error()),
        }
    }

    /// Runs `f` on the VM's tables (no bytecode runs, so no callbacks).
    pub fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut VirtualMachine) -> R + Send) -> PyResult<R> {
        self.run(py, false, |vm| Ok(f(vm)))
    }
}

fn reentrant_error() -> PyErr {
    PyRuntimeError::new_err(
        "this VirtualMachine is already running on this thread (a callback re-entered it); use another VirtualMachine for nested calls",
    )
}
