//! A VM behind a lock, shared by the Python objects that use it.
//!
//! One VM shared by several Python threads serialises their calls. A thread takes the VM only
//! while it is attached to the interpreter, and waits for a busy one detached (a thread waiting
//! for the VM never blocks one that needs the GIL to finish a callback). A callback that
//! re-enters the VM it was called from gets a clear error instead of a deadlock.

use crate::errors::IntoPyResult;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use relaxvm::{InterruptHandle, VirtualMachine};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// A number unique to the calling (attached) thread while it lives: its Python thread state.
#[inline]
fn thread_id(_py: Python<'_>) -> usize {
    // SAFETY: the thread is attached (we hold a `Python` token), so it has a thread state.
    unsafe { pyo3::ffi::PyThreadState_Get() as usize }
}

/// How long a waiting thread sleeps at most before it looks at the VM again: a release that
/// raced with the waiter's registration is noticed by then.
const RECHECK: Duration = Duration::from_millis(1);

/// A VM and the thread that holds it.
///
/// The lock is the `holder` word itself: 0 when free, else the holder's thread id, given back
/// with one store. It also tells a re-entrant call (the holder is this thread) from a busy VM.
/// Threads that must wait sleep on a condvar, detached, and try again once attached.
///
/// Taking it is one load and one store where the interpreter has a GIL: every taker is
/// attached, and the GIL lets one attached thread run at a time, so no two takers race and no
/// read-modify-write is needed (a compare-and-swap was the most expensive instruction of a
/// short call, a twentieth of its time). Where it has none (a free-threaded build), attached
/// threads run in parallel and the word is taken with a compare-and-swap.
pub struct Shared {
    vm: UnsafeCell<VirtualMachine>,
    holder: AtomicUsize,
    /// Threads sleeping in `wait_free`; a release wakes them only when there are some.
    waiting: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    /// Stops the running call from any thread.
    pub interrupt: InterruptHandle,
}

// SAFETY: the VM inside is reached only through `Held`, which exists only for the one thread
// that set `holder` from 0 (`Shared::take`: with the GIL serialising the takers, or with a
// compare-and-swap where there is none), until it stores 0 again; Acquire/Release order the
// accesses of successive holders. `VirtualMachine` is `Send`, so moving access between threads
// this way is sound.
unsafe impl Sync for Shared {}

struct Held<'a> {
    shared: &'a Shared,
}

impl Held<'_> {
    fn vm(&mut self) -> &mut VirtualMachine {
        // SAFETY: see `Sync for Shared`: this thread holds the VM until `self` drops, and the
        // borrow of `self` keeps this the only reference.
        unsafe { &mut *self.shared.vm.get() }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.shared.holder.store(0, Ordering::Release);
        if self.shared.waiting.load(Ordering::Relaxed) > 0 {
            let _g = self.shared.sleep.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.wake.notify_all();
        }
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
        Shared {
            vm: UnsafeCell::new(vm),
            holder: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            interrupt,
        }
    }

    /// Takes the VM if it is free, without blocking. Only attached threads take it (`_py`).
    #[inline]
    fn try_hold(&self, _py: Python<'_>, me: usize) -> TryHold<'_> {
        match self.take(me) {
            Ok(()) => TryHold::Held(Held { shared: self }),
            Err(holder) if holder == me => TryHold::Reentrant,
            Err(_) => TryHold::Busy,
        }
    }

    /// Sets `holder` from 0 to `me`, or says who holds it.
    #[cfg(not(Py_GIL_DISABLED))]
    #[inline(always)]
    fn take(&self, me: usize) -> Result<(), usize> {
        // Every caller is attached and holds the GIL, so no other taker runs between the load
        // and the store; a holder's release (a store of 0, possibly from a detached thread)
        // only ever turns a "busy" into a "free" that the next attempt sees. Acquire pairs
        // with that release: the last holder's use of the VM happens before ours.
        match self.holder.load(Ordering::Acquire) {
            0 => {
                self.holder.store(me, Ordering::Relaxed);
                Ok(())
            }
            holder => Err(holder),
        }
    }

    /// Sets `holder` from 0 to `me`, or says who holds it.
    #[cfg(Py_GIL_DISABLED)]
    #[inline(always)]
    fn take(&self, me: usize) -> Result<(), usize> {
        self.holder.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).map(|_| ())
    }

    /// Sleeps, detached, until the VM looks free or [`RECHECK`] has passed (another attached
    /// thread may still take it first: the caller tries again).
    fn wait_free(&self, py: Python<'_>) {
        py.detach(|| {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let g = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
            if self.holder.load(Ordering::Acquire) != 0 {
                drop(self.wake.wait_timeout(g, RECHECK).unwrap_or_else(|p| p.into_inner()));
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Takes the VM, waiting (detached) while another thread holds it. Ctrl-C ends the wait
    /// (`KeyboardInterrupt`): the holder may run for as long as it likes.
    fn hold(&self, py: Python<'_>, me: usize) -> PyResult<Held<'_>> {
        loop {
            match self.try_hold(py, me) {
                TryHold::Held(held) => return Ok(held),
                TryHold::Reentrant => return Err(reentrant_error()),
                TryHold::Busy => {
                    self.wait_free(py);
                    py.check_signals()?;
                }
            }
        }
    }

    /// Runs `f` on the VM. With `release`, the GIL is released while it runs; without, it is
    /// kept (worthwhile when `f` is short or only calls back into Python). A thread that finds
    /// the VM busy in another thread releases the GIL while it waits.
    #[inline]
    pub fn run<R: Send>(
        &self,
        py: Python<'_>,
        release: bool,
        f: impl FnOnce(&mut VirtualMachine) -> relaxvm::Result<R> + Send,
    ) -> PyResult<R> {
        if !release {
            return self.run_attached(py, f);
        }
        let mut held = self.take_vm(py)?;
        // The VM is released (`held` dropped) before the GIL is taken back.
        py.detach(move || f(held.vm())).py_err(py)
    }

    /// Runs `f` on the VM, keeping the GIL, so `f` may read Python objects (a call's arguments,
    /// converted as it runs). Python code that `f` runs before any bytecode, such as a
    /// conversion calling a method, would find the VM held: a call of it from there gets the
    /// re-entrant error, so such conversions belong before `run_attached`.
    #[inline]
    pub fn run_attached<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut VirtualMachine) -> relaxvm::Result<R>,
    ) -> PyResult<R> {
        let mut held = self.take_vm(py)?;
        f(held.vm()).py_err(py)
    }

    /// Takes the VM for this thread, waiting while another thread holds it.
    #[inline]
    fn take_vm(&self, py: Python<'_>) -> PyResult<Held<'_>> {
        let me = thread_id(py);
        match self.try_hold(py, me) {
            TryHold::Held(held) => Ok(held),
            TryHold::Reentrant => Err(reentrant_error()),
            TryHold::Busy => self.hold(py, me),
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
