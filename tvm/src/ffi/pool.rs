//! TVM's parallel launches (`TVMBackendParallelLaunch`, `TVMBackendParallelBarrier`) on the
//! process's thread pool, [`relaxvm::pool`], which `vm.op.*` builtins share.
//!
//! TVM's contract: a launch of `n` tasks runs every task *concurrently* (a task may wait at
//! `TVMBackendParallelBarrier` for all the others), returns when all have finished, and a task
//! divides the work by the `num_task` its environment reports. The pool provides exactly that
//! (see its documentation): `RELAXVM_NUM_THREADS` threads, the caller counting as one; a
//! launch asks for `min(requested, pool size)` tasks (0 means all); a launch that cannot have
//! the pool — busy, or nested inside a task — runs as a single task on the calling thread with
//! `num_task = 1`, which covers all the work. TVM itself keeps one pool per launching thread
//! and refuses a launch from inside a worker ("Cannot launch parallel job inside worker");
//! running such launches as one inline task computes the same result.
//!
//! What this adapter adds is the error path: a task that fails raises its error on the thread
//! that ran it, so a worker's error is taken there and handed to the launching thread, where
//! the kernel (and relaxvm) report it as TVM's pool does.

use super::abi::{ParallelLambda, TVMParallelGroupEnv};
use relaxvm::pool::{Barrier, Failure, Pool, Task};
use relaxvm::CallCtx;
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;

pub use relaxvm::pool::{configured_threads, global, NUM_THREADS_VAR};

/// One launch's lambda and closure data, shared by the threads that run its tasks.
struct Launch {
    lambda: ParallelLambda,
    cdata: *mut c_void,
}

// SAFETY: a Launch is only reached while its launcher blocks in `launch`, and `cdata` is the
// kernel's closure data, which TVM's contract lets every task read concurrently.
unsafe impl Sync for Launch {}

impl Launch {
    /// Runs `task`; true when the lambda returned 0.
    fn run(&self, task: &Task<'_>) -> bool {
        let mut env = TVMParallelGroupEnv {
            sync_handle: (task.barrier() as *const Barrier).cast_mut().cast(),
            // The pool caps a launch at its width, at most `MAX_THREADS`, which fits an i32.
            num_task: task.count() as i32,
        };
        // SAFETY: `lambda` and `cdata` come from the kernel's launch call, which promises a
        // function callable with any task id below `num_task`; `env` outlives the call. The
        // task runs under the kernel-call guard (a write to a constant is an error).
        match unsafe { super::guard::lambda(self.lambda, task.id() as i32, &mut env, self.cdata) } {
            Ok(rc) => rc == 0,
            Err(fault) => {
                super::raised::set_error(&fault.error(&format!("task {} of a parallel kernel", task.id())));
                false
            }
        }
    }
}

/// A failed task's raised error, when it was taken from a worker's thread.
type Raised = Option<super::raised::Pending>;

thread_local! {
    /// The call context of the kernel this thread is running (lifetime erased), while it runs:
    /// how a launch's wait polls the VM that called the kernel (see [`PollScope`]).
    static KERNEL_CTX: Cell<Option<NonNull<CallCtx<'static>>>> = const { Cell::new(None) };
}

/// What the embedder does when Ctrl-C (a failed poll) ends a launch's wait: `true` on the
/// launching thread once the poll failed — end the waits for the VMs this thread holds, which
/// the launch's workers may be waiting for — and `false` once the launch is over.
static ON_INTERRUPTED_LAUNCH: OnceLock<fn(bool)> = OnceLock::new();

/// Sets what ends the waits for the launching thread's VMs when a poll fails during a
/// launch (Python: the waits of other threads for the VM the main thread holds). The first
/// call wins.
pub fn on_interrupted_launch(hook: fn(bool)) {
    let _ = ON_INTERRUPTED_LAUNCH.set(hook);
}

/// Makes a kernel call's context reachable by the parallel launches the kernel makes on
/// this thread, for as long as the scope lives (nested kernel calls stack).
pub struct PollScope {
    previous: Option<NonNull<CallCtx<'static>>>,
}

impl PollScope {
    /// Enters the scope of a kernel called with `ctx`. The caller must not use `ctx` while the
    /// scope lives (the kernel's launches poll through it) and must drop the scope before
    /// `ctx` goes.
    pub fn enter(ctx: &mut CallCtx<'_>) -> Self {
        let ptr = NonNull::from(ctx).cast::<CallCtx<'static>>();
        PollScope { previous: KERNEL_CTX.with(|c| c.replace(Some(ptr))) }
    }

    /// As [`enter`](Self::enter), for a caller that itself keeps `ctx` as a raw pointer (a VM
    /// TIR function's frame, whose callbacks reach the context through it while the scope
    /// lives): no `&mut` is made here, so the two raw pointers, copies of one, stay valid.
    ///
    /// # Safety
    /// `ctx` points to a live `CallCtx` that outlives the scope, and while the scope lives the
    /// context is used only through copies of `ctx`, one use at a time (on this thread).
    pub unsafe fn enter_raw(ctx: NonNull<CallCtx<'_>>) -> Self {
        PollScope { previous: KERNEL_CTX.with(|c| c.replace(Some(ctx.cast::<CallCtx<'static>>()))) }
    }
}

impl Drop for PollScope {
    fn drop(&mut self) {
        KERNEL_CTX.with(|c| c.set(self.previous));
    }
}

/// Polls the VM running the kernel on this thread (Ctrl-C, `vm.interrupt()`), if any.
fn poll_caller() -> relaxvm::Result<()> {
    let Some(mut ctx) = KERNEL_CTX.with(Cell::get) else { return Ok(()) };
    // SAFETY: `PollScope` set the pointer from a live `&mut CallCtx` that its owner does not
    // use while the scope lives (the kernel runs, and this launch is part of it, on this
    // thread); the scope restores the previous value before that borrow ends, so the pointer
    // is valid and unaliased here.
    unsafe { ctx.as_mut() }.check_interrupt()
}

/// Runs a launch of `num_task` tasks (0: all) of `lambda` on `pool`; 0 when every task
/// returned 0, else -1 with the error raised on this thread. While it waits for its workers
/// the launching thread polls the VM that called the kernel: when that fails (Ctrl-C), it
/// ends the waits for the VMs it holds — which its workers' callbacks may be stuck in — and,
/// once every worker has finished, fails with the poll's error.
pub fn launch(pool: &Pool, lambda: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
    let job = Launch { lambda, cdata };
    let requested = usize::try_from(num_task).unwrap_or(0);
    let worker = |task: &Task<'_>| -> Result<(), Raised> {
        // A task's error is recorded on this worker's thread: take it for the launcher.
        if job.run(task) {
            Ok(())
        } else {
            Err(super::raised::take_pending())
        }
    };
    // Task 0's error, if any, stays on this thread, where the kernel's caller looks for it.
    let caller = &mut |task: &Task<'_>| if job.run(task) { Ok(()) } else { Err(None) };
    let mut interrupted: Option<relaxvm::Error> = None;
    let mut poll = || {
        if interrupted.is_none() {
            if let Err(e) = poll_caller() {
                interrupted = Some(e);
                if let Some(hook) = ON_INTERRUPTED_LAUNCH.get() {
                    hook(true);
                }
            }
        }
    };
    let outcome = pool.run_with_caller_polling(requested, &worker, caller, &mut poll);
    if let Some(e) = interrupted {
        if let Some(hook) = ON_INTERRUPTED_LAUNCH.get() {
            hook(false);
        }
        super::raised::set_error(&e);
        return -1;
    }
    let Err(failures) = outcome else { return 0 };
    let own = super::raised::take_pending();
    let handed = failures.into_iter().find_map(|f| match f.failure {
        Failure::Error(raised) => raised,
        Failure::Panic(message) => Some(super::raised::Pending::new(
            "RuntimeError".to_string(),
            format!("a parallel task panicked: {message}"),
        )),
    });
    if let Some(p) = own.or(handed) {
        super::raised::restore(p);
    }
    -1
}

/// `TVMBackendParallelBarrier(task_id, env)`: waits until every task of the group arrives;
/// -1 when a task of the group failed (the group can no longer meet).
///
/// # Safety
/// `env` is the environment the pool passed to the calling task.
pub unsafe extern "C" fn parallel_barrier(_task_id: i32, env: *mut TVMParallelGroupEnv) -> i32 {
    if env.is_null() {
        return -1;
    }
    // SAFETY: `env` is the live environment of the calling task, whose sync handle points at
    // the launch's barrier, alive until every task has returned.
    let barrier = unsafe { &*((*env).sync_handle as *const Barrier) };
    match barrier.wait() {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

/// `TVMBackendParallelLaunch(lambda, cdata, num_task)` on the global pool.
///
/// # Safety
/// `lambda` must be callable with any task id below the number of tasks and `cdata`.
pub unsafe extern "C" fn parallel_launch(lambda: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
    // The pool's Rust frames are never jumped over: each task has a guard of its own.
    let _unguarded = super::guard::Unguarded::enter();
    launch(global(), lambda, cdata, num_task)
}
