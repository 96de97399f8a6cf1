//! The guard around every call from Rust into kernel machine code: a kernel that writes to a
//! constant of the executable (which lives in pages mapped read-only, see
//! `relaxvm::storage::read_only`) faults, and the fault becomes an error of the call instead
//! of the end of the process — as wasmtime turns a guard-page fault into a trap.
//!
//! The mechanism is in `csrc/guard.c`: each guarded call arms a jump buffer (the compiler's
//! `__builtin_setjmp`) and pushes it on a per-thread stack whose top lives in this thread's
//! `thread_state` (`ffi/thread_state.rs`); a SIGSEGV/SIGBUS handler that finds the thread
//! inside a guarded call and the faulting address in registered read-only pages jumps back to
//! the innermost guard, which returns the address. Any other fault goes on to the handler
//! installed before ours (or the default action): a kernel's wild write still ends the process,
//! as it would without the guard.
//!
//! Why the jump is sound: the frames it skips are those between the innermost guard and the
//! faulting instruction. Every call from Rust into kernel code goes through a guard — a kernel
//! call ([`safe_call`]) and each task of a parallel launch ([`lambda`], from `pool.rs`) — and
//! the runtime services a kernel calls that run more Rust code or hold a lock (a packed
//! function by name, a first-use initializer, a parallel launch) run [`Unguarded`], so a fault
//! in them is never jumped over. (The other services only copy a value into memory the
//! kernel owns, never a constant. Compiled mode's AnyList functions run guarded too, at every
//! register access of a compiled function: they touch only their frame's memory, run no
//! destructor, and write to memory native code gave them last, with nothing left to drop; see
//! `crate::vmtir::frame`'s `finish`.) The skipped frames are therefore kernel frames and the C library
//! functions kernels call (`memset`, `expf`), which own nothing that must be released; the
//! faulting write itself did not happen. What a faulting kernel leaves behind: its outputs are
//! partly written, and workspace it allocated and had not freed yet is leaked.
//!
//! The cost is three stores to arm the buffer (no signal mask, no system call) and one lookup
//! of the thread-local shared with the raised-error flag per call (`clean_call`); see the
//! measurement in `docs/memory.md`.

use super::abi::{ParallelLambda, SafeCall, TVMFFIAny, TVMParallelGroupEnv};
use super::thread_state::{self, ThreadState};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

extern "C" {
    fn relaxvm_guard_install(
        check: extern "C" fn(usize) -> c_int,
        top_slot: extern "C" fn() -> *mut *mut c_void,
    ) -> c_int;
    fn relaxvm_guard_safe_call(
        slot: *mut *mut c_void,
        f: SafeCall,
        this: *mut c_void,
        args: *const TVMFFIAny,
        num_args: i32,
        result: *mut TVMFFIAny,
        fault: *mut *mut c_void,
    ) -> c_int;
    fn relaxvm_guard_lambda(
        slot: *mut *mut c_void,
        f: ParallelLambda,
        task_id: c_int,
        env: *mut TVMParallelGroupEnv,
        cdata: *mut c_void,
        fault: *mut *mut c_void,
    ) -> c_int;
}

/// A guarded call that ended with a write to read-only memory, at this address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault(pub usize);

impl Fault {
    /// The error of kernel (or task of a kernel) `what`, which wrote to read-only memory.
    pub fn error(self, what: &str) -> relaxvm::Error {
        relaxvm::Error::value(format!(
            "{what} wrote to read-only memory at {:#x} (a constant of the executable, which every VM \
             and thread shares): the call was stopped and the constant is unchanged; a program must \
             not pass a constant where a kernel writes",
            self.0
        ))
    }
}

/// The signal handler's question: is `addr` in registered read-only pages? Lock-free.
extern "C" fn is_read_only(addr: usize) -> c_int {
    c_int::from(relaxvm::storage::read_only::contains(addr))
}

/// Installs the handler once per process; an error if the system refused it (kernels are then
/// not called: a write to a constant would end the process).
fn installed() -> relaxvm::Result<()> {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    // SAFETY: installs a handler for SIGSEGV and SIGBUS that only reads atomics and thread-local
    // data, jumps to a live guard of the faulting thread, or hands the signal on (guard.c).
    let ok = *INSTALLED.get_or_init(|| unsafe { relaxvm_guard_install(is_read_only, thread_state::top_slot) } == 0);
    if ok {
        Ok(())
    } else {
        Err(relaxvm::Error::value("cannot install the SIGSEGV handler that guards kernel calls"))
    }
}

/// Calls kernel `f`: its return code, or the [`Fault`] that stopped it.
///
/// # Safety
/// As for calling `f` directly: `f` is a live kernel with the safe-call signature, `args` holds
/// `num_args` valid values, `result` is writable.
pub unsafe fn safe_call(
    f: SafeCall,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> relaxvm::Result<Result<i32, Fault>> {
    // SAFETY: the caller's contract.
    thread_state::with(|state| unsafe { safe_call_in(state, f, args, num_args, result) })
}

/// [`safe_call`] after [`raised::clear`](super::raised::clear): what a kernel call does,
/// with one lookup of the thread-local both use.
///
/// # Safety
/// As [`safe_call`].
#[inline(always)]
pub(crate) unsafe fn clean_call(
    f: SafeCall,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> relaxvm::Result<Result<i32, Fault>> {
    thread_state::with(|state| {
        super::raised::clear_in(state);
        // SAFETY: the caller's contract.
        unsafe { safe_call_in(state, f, args, num_args, result) }
    })
}

/// [`safe_call`] with this thread's state at hand.
///
/// # Safety
/// As [`safe_call`]; `state` is this thread's.
#[inline(always)]
unsafe fn safe_call_in(
    state: &ThreadState,
    f: SafeCall,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> relaxvm::Result<Result<i32, Fault>> {
    installed()?;
    let mut fault: *mut c_void = std::ptr::null_mut();
    // SAFETY: the caller's contract for `f` and its arguments; `fault` is writable; the slot is
    // this thread's, which outlives the call. The guard calls `f` directly, so only kernel
    // frames lie between it and a fault in the kernel.
    let rc =
        unsafe { relaxvm_guard_safe_call(state.top(), f, std::ptr::null_mut(), args, num_args, result, &mut fault) };
    Ok(if fault.is_null() { Ok(rc) } else { Err(Fault(fault as usize)) })
}

/// Calls task `task_id` of a parallel launch: the lambda's return code, or its [`Fault`].
///
/// # Safety
/// `f` and `cdata` come from a kernel's `TVMBackendParallelLaunch` call, `env` is the task's
/// live environment.
pub unsafe fn lambda(
    f: ParallelLambda,
    task_id: i32,
    env: *mut TVMParallelGroupEnv,
    cdata: *mut c_void,
) -> Result<i32, Fault> {
    if installed().is_err() {
        // A launch comes from a kernel, which was called through `safe_call`, which installed
        // the handler; unreachable unless a library calls the slot on its own.
        return Err(Fault(0));
    }
    let mut fault: *mut c_void = std::ptr::null_mut();
    // SAFETY: the caller's contract; `fault` is writable; the slot is this thread's; the guard
    // calls `f` directly.
    let rc =
        thread_state::with(|state| unsafe { relaxvm_guard_lambda(state.top(), f, task_id, env, cdata, &mut fault) });
    if fault.is_null() {
        Ok(rc)
    } else {
        Err(Fault(fault as usize))
    }
}

/// Rust code called back from a kernel: while it lives, the thread counts as outside guarded
/// calls, so a fault in Rust code is never jumped over (it goes to the previous handler).
pub struct Unguarded {
    /// The guard pointer `enter` took, restored by `drop`.
    outer: *mut c_void,
    /// This thread's state, where `drop` restores it (kept: no second thread-local lookup).
    state: *const ThreadState,
}

impl Unguarded {
    /// Leaves the innermost guard until the result drops.
    pub fn enter() -> Self {
        thread_state::with(Self::enter_in)
    }

    /// [`Unguarded::enter`] with this thread's state at hand (`state` is this thread's).
    #[inline]
    pub(crate) fn enter_in(state: &ThreadState) -> Self {
        // Reads and clears this thread's guard pointer; `drop` restores it.
        Unguarded { outer: state.replace_top(std::ptr::null_mut()), state }
    }
}

impl Drop for Unguarded {
    fn drop(&mut self) {
        // SAFETY: `state` is this thread's state (the value is !Send, so it drops on the thread
        // that made it), which lives until the thread exits (it has no destructor).
        let state = unsafe { &*self.state };
        // The pointer `enter` took from this thread, whose guard frame is still live: the Rust
        // code returns to the kernel before the guard returns.
        state.replace_top(self.outer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::test_signals::blocked;
    use relaxvm::storage::read_only::ReadOnlyPages;

    extern "C" {
        fn relaxvm_guard_test_store(this: *mut c_void, args: *const TVMFFIAny, n: i32, r: *mut TVMFFIAny) -> c_int;
        fn relaxvm_guard_test_store_task(task_id: c_int, env: *mut TVMParallelGroupEnv, cdata: *mut c_void) -> c_int;
    }

    fn store_at(addr: *mut u8) -> relaxvm::Result<Result<i32, Fault>> {
        let args = [TVMFFIAny { type_index: 4, small_str_len: 0, payload: addr as u64 }];
        let mut result = TVMFFIAny::NONE;
        // SAFETY: the test kernel stores one byte at the address it is given: writable memory,
        // or read-only pages whose fault the guard turns into `Fault`.
        unsafe { safe_call(relaxvm_guard_test_store, args.as_ptr(), 1, &mut result) }
    }

    #[test]
    fn a_write_to_read_only_pages_is_a_fault_and_the_bytes_stay() {
        let pages = ReadOnlyPages::filled(8192, |b| {
            b.fill(3);
            Ok(())
        })
        .unwrap();
        let at = pages.as_ptr().as_ptr().wrapping_add(5000);
        assert_eq!(store_at(at).unwrap(), Err(Fault(at as usize)));
        // SAFETY: `pages` holds 8192 readable bytes.
        assert!(unsafe { std::slice::from_raw_parts(pages.as_ptr().as_ptr(), 8192) }.iter().all(|b| *b == 3));
        // The thread is back outside any guard, and calls work again, many times.
        let mut plain = [0u8; 4];
        for _ in 0..1000 {
            assert_eq!(store_at(at).unwrap(), Err(Fault(at as usize)));
            assert_eq!(store_at(plain.as_mut_ptr()).unwrap(), Ok(0));
        }
        assert_eq!(plain[0], 7);
        let e = Fault(at as usize).error("kernel \"add\"");
        assert!(e.to_string().starts_with("kernel \"add\" wrote to read-only memory at 0x"), "{e}");
    }

    #[test]
    fn a_fault_leaves_the_signal_mask_as_it_was_on_any_thread_and_nested() {
        // The jump restores no mask: the handler (SA_NODEFER, empty mask) never changed it.
        let pages = ReadOnlyPages::filled(64, |_| Ok(())).unwrap();
        let at = pages.as_ptr().as_ptr() as usize;
        let faults_twice = move || {
            let before = blocked();
            for _ in 0..2 {
                assert_eq!(store_at(at as *mut u8).unwrap(), Err(Fault(at)));
            }
            assert_eq!(blocked(), before);
            assert!(!before.contains(&libc::SIGSEGV) && !before.contains(&libc::SIGBUS));
        };
        faults_twice();
        std::thread::spawn(faults_twice).join().unwrap();
        // Inside an outer guard (a stand-in, as when a kernel's callback calls another kernel):
        // the fault returns to the inner guard, which hands the thread back to the outer one.
        let mut stand_in = 0u8;
        let outer: *mut c_void = (&raw mut stand_in).cast();
        thread_state::with(|state| state.replace_top(outer));
        faults_twice();
        assert_eq!(thread_state::with(|state| state.replace_top(std::ptr::null_mut())), outer);
    }

    #[test]
    fn a_task_of_a_parallel_launch_is_guarded_too_and_on_any_thread() {
        let pages = ReadOnlyPages::filled(64, |_| Ok(())).unwrap();
        let at = pages.as_ptr().as_ptr() as usize;
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    // SAFETY: the test task stores one byte at `cdata`: guarded read-only pages.
                    let r =
                        unsafe { lambda(relaxvm_guard_test_store_task, 0, std::ptr::null_mut(), at as *mut c_void) };
                    assert_eq!(r, Err(Fault(at)));
                });
            }
        });
        // SAFETY: the page is readable.
        assert_eq!(unsafe { *(at as *const u8) }, 0);
    }

    #[test]
    fn a_launch_whose_tasks_fault_fails_with_the_faults_error() {
        let pages = ReadOnlyPages::filled(64, |_| Ok(())).unwrap();
        let at = pages.as_ptr().as_ptr().cast::<c_void>();
        for num_task in [0, 1, 2] {
            crate::ffi::raised::clear();
            let rc = crate::ffi::pool::launch(crate::ffi::pool::global(), relaxvm_guard_test_store_task, at, num_task);
            assert_eq!(rc, -1);
            let e = crate::ffi::raised::take("kernel \"k\"");
            assert!(e.to_string().contains("of a parallel kernel wrote to read-only memory at 0x"), "{e}");
        }
        // SAFETY: the page is readable.
        assert_eq!(unsafe { *at.cast::<u8>() }, 0);
    }

    #[test]
    fn an_unguarded_stretch_leaves_the_guard_and_restores_it() {
        // Inside `Unguarded`, the thread has no guard; afterwards the same one again.
        let top = || thread_state::with(ThreadState::top_guard);
        assert!(top().is_null());
        let mut stand_in = 0u8;
        let guard: *mut c_void = (&raw mut stand_in).cast();
        // As inside a guarded call (a stand-in guard, never jumped to).
        thread_state::with(|state| state.replace_top(guard));
        let u = Unguarded::enter();
        assert!(top().is_null());
        // Nested stretches restore what they found.
        drop(Unguarded::enter());
        assert!(top().is_null());
        drop(u);
        assert_eq!(top(), guard);
        thread_state::with(|state| state.replace_top(std::ptr::null_mut()));
        // And a guarded call that faults returns to its own guard, leaving none behind.
        let pages = ReadOnlyPages::filled(1, |_| Ok(())).unwrap();
        let at = pages.as_ptr().as_ptr();
        assert_eq!(store_at(at).unwrap(), Err(Fault(at as usize)));
        assert!(top().is_null());
    }
}
