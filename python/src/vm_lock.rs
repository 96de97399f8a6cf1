//! A VM behind a lock, shared by the Python objects that use it.
//!
//! One VM shared by several Python threads serialises their calls. A thread takes the VM only
//! while it is attached to the interpreter, and waits for a busy one detached (a thread waiting
//! for the VM never blocks one that needs the GIL to finish a callback). A callback that
//! re-enters the VM it was called from gets a clear error instead of a deadlock — also from a
//! pool worker running a parallel kernel's task for the thread that holds the VM (that thread
//! waits for the task: `relaxvm::pool::is_me_or_my_launcher`). A wait ends with Ctrl-C (on the
//! main thread, where Python delivers signals) and with `vm.interrupt()`, which stops the
//! running call and every call waiting for the VM.

use crate::errors::IntoPyResult;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use relaxvm::{CallingThread, InterruptHandle, VirtualMachine};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How long a waiting thread sleeps at most before it looks at the VM again: a release that
/// raced with the waiter's registration is noticed by then.
const RECHECK: Duration = Duration::from_millis(1);

/// A VM behind a lock: the VM and the thread that holds it.
///
/// The lock is the `holder` word itself: 0 when free, else the holder's thread id, given back
/// with one store. It also tells a re-entrant call (the holder is this thread, or the thread
/// whose parallel launch this worker runs a task of) from a busy VM.
/// Threads that must wait sleep on a condvar, detached, and try again once attached.
///
/// Taking it is one load and one store where the interpreter has a GIL: every taker is
/// attached, and the GIL lets one attached thread run at a time, so no two takers race and no
/// read-modify-write is needed (a compare-and-swap was the most expensive instruction of a
/// short call, a twentieth of its time). Where it has none (a free-threaded build), attached
/// threads run in parallel and the word is taken with a compare-and-swap.
pub struct VmLock {
    vm: UnsafeCell<VirtualMachine>,
    holder: AtomicU64,
    /// Threads sleeping in `wait_free`; a release wakes them only when there are some.
    waiting: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    /// Stops the running call from any thread.
    interrupt: InterruptHandle,
    /// Bumped by each [`VmLock::interrupt`]: a waiting call that sees it move gives up.
    interrupts: AtomicU64,
}

// SAFETY: the VM inside is reached only through `Held`, which exists only for the one thread
// that set `holder` from 0 (`VmLock::take`: with the GIL serialising the takers, or with a
// compare-and-swap where there is none), until it stores 0 again; Acquire/Release order the
// accesses of successive holders. `VirtualMachine` is `Send`, so moving access between threads
// this way is sound.
unsafe impl Sync for VmLock {}

struct Held<'a> {
    lock: &'a VmLock,
}

impl Held<'_> {
    fn vm(&mut self) -> &mut VirtualMachine {
        // SAFETY: see `Sync for VmLock`: this thread holds the VM until `self` drops, and the
        // borrow of `self` keeps this the only reference.
        unsafe { &mut *self.lock.vm.get() }
    }
}

impl Drop for Held<'_> {
    /// Inline, with the wake-up out of line: a release nobody waits for is a store and a load
    /// (an out-of-line drop cost a short call a call and a stack frame).
    #[inline(always)]
    fn drop(&mut self) {
        self.lock.holder.store(0, Ordering::Release);
        if self.lock.waiting.load(Ordering::Relaxed) > 0 {
            self.lock.wake_waiters();
        }
    }
}

enum TryHold<'a> {
    Held(Held<'a>),
    Busy,
    Reentrant,
}

impl VmLock {
    /// `vm`, free.
    pub fn new(vm: VirtualMachine) -> Self {
        let interrupt = vm.interrupt_handle();
        VmLock {
            vm: UnsafeCell::new(vm),
            holder: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            interrupt,
            interrupts: AtomicU64::new(0),
        }
    }

    /// Wakes the threads sleeping in `wait_free` (the VM was released).
    #[cold]
    #[inline(never)]
    fn wake_waiters(&self) {
        let _g = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
        self.wake.notify_all();
    }

    /// `vm.interrupt()`: stops the running call at its next check, and every call waiting for
    /// the VM now (they raise without running). Ending the waits is what breaks a cycle of
    /// threads waiting for each other's VMs (thread 1 holds this VM and, in a callback, waits
    /// for VM B, which thread 2 holds while its callback waits for this VM).
    pub fn interrupt(&self) {
        self.interrupt.interrupt();
        self.interrupts.fetch_add(1, Ordering::SeqCst);
        let _g = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
        self.wake.notify_all();
    }

    /// Takes the VM if it is free, without blocking. Only attached threads take it (`_py`).
    #[inline]
    fn try_hold(&self, _py: Python<'_>, me: u64) -> TryHold<'_> {
        match self.take(me) {
            Ok(()) => TryHold::Held(Held { lock: self }),
            Err(holder) if holder == me || holder == relaxvm::pool::launcher() => TryHold::Reentrant,
            Err(_) => TryHold::Busy,
        }
    }

    /// Sets `holder` from 0 to `me`, or says who holds it.
    #[cfg(not(Py_GIL_DISABLED))]
    #[inline(always)]
    fn take(&self, me: u64) -> Result<(), u64> {
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
    fn take(&self, me: u64) -> Result<(), u64> {
        self.holder.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).map(|_| ())
    }

    /// Sleeps, detached, until the VM looks free, an interrupt moves `interrupts` on from
    /// `seen`, or [`RECHECK`] has passed (another attached thread may still take it first: the
    /// caller tries again).
    fn wait_free(&self, py: Python<'_>, seen: u64) {
        py.detach(|| {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let g = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
            // `interrupt` bumps the count before it takes `sleep` to notify: read under the
            // lock, a bump is either seen here or notified to this wait.
            if self.holder.load(Ordering::Acquire) != 0 && self.interrupts.load(Ordering::SeqCst) == seen {
                drop(self.wake.wait_timeout(g, RECHECK).unwrap_or_else(|p| p.into_inner()));
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Takes the VM, waiting (detached) while another thread holds it. Ctrl-C ends the wait
    /// (`KeyboardInterrupt`) and so does `vm.interrupt()` (`VMError`): the holder may run for
    /// as long as it likes, or wait for this thread in a cycle of VMs.
    fn hold(&self, py: Python<'_>, me: u64) -> PyResult<Held<'_>> {
        let seen = self.interrupts.load(Ordering::SeqCst);
        loop {
            match self.try_hold(py, me) {
                TryHold::Held(held) => return Ok(held),
                TryHold::Reentrant => return Err(reentrant_error()),
                TryHold::Busy => {
                    self.wait_free(py, seen);
                    py.check_signals()?;
                    if self.interrupts.load(Ordering::SeqCst) != seen {
                        return Err(interrupted_while_waiting(py));
                    }
                    if holder_abandoned(self.holder.load(Ordering::Acquire)) {
                        return Err(crate::errors::vm_error(
                            py,
                            "interrupted while waiting for this VirtualMachine: Ctrl-C stopped the thread holding it, which waits for a parallel kernel's workers".into(),
                        ));
                    }
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
        self.run_attached_on(py, |vm, _| f(vm))
    }

    /// [`Self::run_attached`] for an `f` that is given the calling thread too (named once per
    /// call: the lock's holder is its key, and the VM finds its stack's limit by it).
    #[inline]
    pub fn run_attached_on<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut VirtualMachine, CallingThread) -> relaxvm::Result<R>,
    ) -> PyResult<R> {
        let me = CallingThread::current();
        let mut held = self.take_vm_as(py, me.key())?;
        f(held.vm(), me).py_err(py)
    }

    /// Takes the VM for this thread, waiting while another thread holds it.
    #[inline]
    fn take_vm(&self, py: Python<'_>) -> PyResult<Held<'_>> {
        self.take_vm_as(py, relaxvm::pool::thread_key())
    }

    /// [`Self::take_vm`] for the thread whose key (`relaxvm::pool::thread_key`, never 0, never
    /// reused: what `holder` holds) is `me`.
    ///
    /// Inline, with what a held VM needs out of line: taking a free VM is a load and a store,
    /// and an out-of-line call returning a `PyResult` through memory cost a short call more
    /// than the taking itself.
    #[inline(always)]
    fn take_vm_as(&self, py: Python<'_>, me: u64) -> PyResult<Held<'_>> {
        match self.take(me) {
            Ok(()) => Ok(Held { lock: self }),
            Err(_) => self.take_held(py, me),
        }
    }

    /// [`Self::take_vm_as`] of a VM held when first looked at: re-entry is an error, a VM
    /// busy in another thread is waited for.
    #[cold]
    #[inline(never)]
    fn take_held(&self, py: Python<'_>, me: u64) -> PyResult<Held<'_>> {
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

/// Threads whose wait for a parallel launch's workers Ctrl-C ended while they held VMs: a
/// call waiting for a VM one of them holds gives up, since the workers may be waiting for it
/// (a callback on a worker joining a thread that calls the VM). Rarely non-empty.
static ABANDONED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// `ABANDONED.len()`, read without the lock by every wait.
static ANY_ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// The launch hook (`relaxvm_tvm::ffi::pool::on_interrupted_launch`): with `true`, the waits
/// for the VMs the calling thread holds end; with `false` (its launch is over), they no longer
/// do.
pub fn interrupted_launch(begin: bool) {
    let me = relaxvm::pool::thread_key();
    let mut abandoned = ABANDONED.lock().unwrap_or_else(|p| p.into_inner());
    if begin {
        abandoned.push(me);
    } else if let Some(i) = abandoned.iter().position(|k| *k == me) {
        abandoned.swap_remove(i);
    }
    ANY_ABANDONED.store(abandoned.len(), Ordering::SeqCst);
}

/// Whether `holder` (0: none) is a thread whose launch Ctrl-C ended.
fn holder_abandoned(holder: u64) -> bool {
    holder != 0
        && ANY_ABANDONED.load(Ordering::SeqCst) > 0
        && ABANDONED.lock().unwrap_or_else(|p| p.into_inner()).contains(&holder)
}

fn reentrant_error() -> PyErr {
    PyRuntimeError::new_err(
        "this VirtualMachine is already running on this thread (a callback re-entered it, or a callback on a thread-pool worker running a parallel kernel for it); use another VirtualMachine for nested calls",
    )
}

/// The error of a call that waited for a busy VM until `vm.interrupt()`.
fn interrupted_while_waiting(py: Python<'_>) -> PyErr {
    crate::errors::vm_error(
        py,
        "interrupted while waiting for this VirtualMachine, busy in another thread (vm.interrupt() ends the calls waiting for it too)".into(),
    )
}
