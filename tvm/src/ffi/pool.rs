//! The thread pool that runs TVM's parallel launches (`TVMBackendParallelLaunch`).
//!
//! TVM's contract: a launch of `n` tasks runs every task *concurrently* (a task may wait at
//! `TVMBackendParallelBarrier` for all the others), returns when all have finished, and a task
//! divides the work by the `num_task` its environment reports. So:
//!
//! - one pool per process, of `RELAXVM_NUM_THREADS` threads (default: the number of cores),
//!   the caller counting as one: `n - 1` workers plus the calling thread run a launch;
//! - a launch asks for `min(requested, pool size)` tasks (0 means all);
//! - a launch that cannot have the pool — one already running (from another thread, or nested
//!   inside a task) — runs as a single task on the calling thread with `num_task = 1`, which
//!   covers all the work (the barrier of a one-task group returns at once); it never waits for
//!   the pool, so concurrent launches cannot deadlock. TVM itself keeps one pool per launching
//!   thread and refuses a launch from inside a worker ("Cannot launch parallel job inside
//!   worker"); running such launches as one inline task computes the same result;
//! - a task that fails raises its error on the thread that ran it: a worker's error is handed
//!   to the launching thread, so the kernel (and relaxvm) report it as TVM's pool does.

use super::abi::{ParallelLambda, TVMParallelGroupEnv};
use relaxvm::{Error, Result};
use std::ffi::c_void;
use std::sync::{Arc, Barrier, Condvar, Mutex, MutexGuard, OnceLock, TryLockError};

/// The environment variable that sets the pool size.
pub const NUM_THREADS_VAR: &str = "RELAXVM_NUM_THREADS";

/// The pool size `RELAXVM_NUM_THREADS` asks for, or the number of cores; an error for a value
/// that is not a positive integer.
pub fn configured_threads() -> Result<usize> {
    match std::env::var(NUM_THREADS_VAR) {
        Ok(v) => v.trim().parse::<usize>().ok().filter(|n| (1..=1024).contains(n)).ok_or_else(|| {
            Error::value(format!("{NUM_THREADS_VAR}={v:?}: expected a positive integer (at most 1024)"))
        }),
        Err(std::env::VarError::NotPresent) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        Err(e) => Err(Error::value(format!("{NUM_THREADS_VAR}: {e}"))),
    }
}

/// One launch, shared by the threads that run its tasks.
struct Job {
    lambda: ParallelLambda,
    cdata: *mut c_void,
    num_task: i32,
    barrier: Barrier,
}

// SAFETY: a Job is only reached through the pool while its launcher blocks in `launch`, and
// `cdata` is the kernel's closure data, which TVM's contract lets every task read concurrently.
unsafe impl Send for Job {}
// SAFETY: see `Send`; the barrier is Sync and the other fields are read-only.
unsafe impl Sync for Job {}

impl Job {
    /// Runs task `task_id`; non-zero is failure.
    fn run(&self, task_id: i32) -> i32 {
        let mut env = TVMParallelGroupEnv {
            sync_handle: (&self.barrier as *const Barrier).cast_mut().cast(),
            num_task: self.num_task,
        };
        // SAFETY: `lambda` and `cdata` come from the kernel's launch call, which promises a
        // function callable with any task id below `num_task`; `env` outlives the call.
        let rc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            (self.lambda)(task_id, &mut env, self.cdata)
        }));
        rc.unwrap_or(-1)
    }
}

#[derive(Default)]
struct State {
    generation: u64,
    job: Option<Arc<Job>>,
    pending: usize,
    failed: bool,
    /// The error the first failing worker task raised (on its own thread), for the launcher.
    error: Option<(String, String)>,
}

/// A fixed set of worker threads.
pub struct Pool {
    threads: usize,
    state: Mutex<State>,
    wake: Condvar,
    done: Condvar,
    /// Held by the thread whose launch owns the workers.
    busy: Mutex<()>,
    /// How many threads, the caller included, were started.
    started: OnceLock<usize>,
}

thread_local! {
    /// True inside a task run by the pool (nested launches then run inline).
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// The process's pool (created on first use with [`configured_threads`], or one thread when
/// that is invalid — `Library::open` reports the invalid setting before any kernel runs).
pub fn global() -> &'static Pool {
    POOL.get_or_init(|| Pool::new(configured_threads().unwrap_or(1)))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// A pool of `threads` threads counting the caller (`threads - 1` workers are spawned).
    pub fn new(threads: usize) -> Pool {
        Pool {
            threads: threads.max(1),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            busy: Mutex::new(()),
            started: OnceLock::new(),
        }
    }

    /// How many tasks a launch can run at once.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Starts the workers once; how many threads (the caller included) a launch can use.
    fn spawn_workers(&'static self) -> usize {
        *self.started.get_or_init(|| {
            let mut started = 1;
            for worker in 1..self.threads {
                let spawned =
                    std::thread::Builder::new().name(format!("relaxvm-pool-{worker}")).spawn(move || self.work(worker));
                // A worker that cannot start lowers the pool's width instead of stalling it.
                if spawned.is_err() {
                    break;
                }
                started += 1;
            }
            started
        })
    }

    fn work(&self, worker: usize) {
        IN_TASK.with(|t| t.set(true));
        let mut seen = 0;
        loop {
            let job = {
                let mut s = lock(&self.state);
                while s.generation == seen {
                    s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                seen = s.generation;
                s.job.clone()
            };
            let Some(job) = job else { continue };
            if worker as i32 >= job.num_task {
                continue;
            }
            let rc = job.run(worker as i32);
            // A task's error is recorded on this worker's thread: hand it to the launcher.
            let error = if rc != 0 { super::raised::take_raw() } else { None };
            let mut s = lock(&self.state);
            s.failed |= rc != 0;
            if s.error.is_none() {
                s.error = error;
            }
            s.pending -= 1;
            if s.pending == 0 {
                self.done.notify_all();
            }
        }
    }

    /// Runs a launch of `num_task` tasks (0: all) of `lambda`; 0 when every task returned 0.
    pub fn launch(&'static self, lambda: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
        let want = if num_task <= 0 { self.threads } else { (num_task as usize).min(self.threads) };
        let guard = if want > 1 && !IN_TASK.with(|t| t.get()) {
            match self.busy.try_lock() {
                Ok(g) => Some(g),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            }
        } else {
            None
        };
        let Some(_guard) = guard else {
            // One task with num_task = 1 covers the whole iteration space.
            let job = Job { lambda, cdata, num_task: 1, barrier: Barrier::new(1) };
            return run_inline(&job);
        };
        let want = want.min(self.spawn_workers());
        let job = Arc::new(Job { lambda, cdata, num_task: want as i32, barrier: Barrier::new(want) });
        {
            let mut s = lock(&self.state);
            s.generation += 1;
            s.job = Some(Arc::clone(&job));
            s.pending = want - 1;
            s.failed = false;
            s.error = None;
            self.wake.notify_all();
        }
        let rc0 = run_inline_task(&job, 0);
        let mut s = lock(&self.state);
        while s.pending > 0 {
            s = self.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.job = None;
        if rc0 == 0 {
            // Task 0's own error, if any, is already on this thread; else a worker's.
            if let Some((kind, message)) = s.error.take() {
                super::raised::set(kind, message);
            }
        }
        i32::from(s.failed || rc0 != 0).wrapping_neg()
    }
}

fn run_inline(job: &Job) -> i32 {
    run_inline_task(job, 0)
}

/// Runs task `id` on this thread, marked as inside a task (so nested launches run inline).
fn run_inline_task(job: &Job, id: i32) -> i32 {
    let was = IN_TASK.with(|t| t.replace(true));
    let rc = job.run(id);
    IN_TASK.with(|t| t.set(was));
    rc
}

/// `TVMBackendParallelBarrier(task_id, env)`: waits until every task of the group arrives.
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
    barrier.wait();
    0
}

/// `TVMBackendParallelLaunch(lambda, cdata, num_task)` on the global pool.
///
/// # Safety
/// `lambda` must be callable with any task id below the number of tasks and `cdata`.
pub unsafe extern "C" fn parallel_launch(lambda: ParallelLambda, cdata: *mut c_void, num_task: i32) -> i32 {
    global().launch(lambda, cdata, num_task)
}
