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
/// The lock is the `holder` word itself: 0 when free, else the holder's thread id, taken with
/// one compare-and-swap and given back with one store. (A `Mutex` beside a holder word cost a
/// second atomic exchange per call, a tenth of a short call's time.) It also tells a re-entrant
/// call (the holder is this thread) from a busy VM. Threads that must wait sleep on a condvar.
pub struct Shared {
    vm: UnsafeCell<VirtualMachine>,
    holder: AtomicUsize,
    /// Threads sleeping in `hold_blocking`; a release wakes them only when there are some.
    waiting: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    /// Stops the running call from any thread.
    pub interrupt: InterruptHandle,
}

// SAFETY: the VM inside is reached only through `Held`, which exists only for the one thread
// whose compare-and-swap set `holder` from 0, until it stores 0 again (Acquire/Release order
// the accesses of successive holders). `VirtualMachine` is `Send`, so moving access between
// threads this way is sound.
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

    /// Takes the VM if it is free, without blocking.
    #[inline]
    fn try_hold(&self, me: usize) -> TryHold<'_> {
        match self.holder.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => TryHold::Held(Held { shared: self }),
            Err(holder) if holder == me => TryHold::Reentrant,
            Err(_) => TryHold::Busy,
        }
    }

    /// Waits for the VM. Only ever called with the GIL released: the holder may need the GIL
    /// for a callback before it can let go.
    fn hold_blocking(&self, me: usize) -> Held<'_> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut g = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
        while self.holder.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).is_err() {
            g = self.wake.wait_timeout(g, RECHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
        drop(g);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        Held { shared: self }
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
                TryHold::Held(mut held) => return f(held.vm()).py_err(py),
                TryHold::Reentrant => return Err(reentrant_error()),
                TryHold::Busy => {}
            }
        }
        let r = py.detach(|| match self.try_hold(me) {
            TryHold::Held(mut held) => Ok(f(held.vm())),
            TryHold::Busy => Ok(f(self.hold_blocking(me).vm())),
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
