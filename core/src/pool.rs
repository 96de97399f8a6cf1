//! The process's thread pool: runs a group of tasks *concurrently* and returns when all have
//! finished. TVM-compiled kernels' parallel launches (`relaxvm-tvm`) and large `vm.op.*`
//! builtins share it, so together they never use more threads than it has.
//!
//! - One pool per process ([`global`]), of `RELAXVM_NUM_THREADS` threads (default: the number
//!   of cores), the caller counting as one: `n - 1` workers plus the calling thread run a
//!   launch, and task 0 always runs on the calling thread (so it alone may touch state that
//!   cannot leave that thread, such as a call context that polls for interrupts).
//! - A launch asks for `min(requested, pool size)` tasks (0 means all). Tasks of one launch
//!   run at the same time, so they may wait for each other at the launch's [`Barrier`].
//! - A launch that cannot have the pool — one already running (from another thread, or nested
//!   inside a task) — runs as a single task on the calling thread (`count() == 1`), which must
//!   then cover all the work; it never waits for the pool, so concurrent launches cannot
//!   deadlock. Work split into pieces whose results do not depend on who computes them gives
//!   the same result either way.
//! - Work that the calling thread can finish alone — pieces taken from a shared queue — runs
//!   with [`Pool::help_caller`]: workers help while the caller works, and one that has not
//!   started when the caller runs out of work is not waited for (on a loaded machine a woken
//!   worker may wait milliseconds for a core).
//! - A task that returns an error or panics is reported to the launcher as a [`TaskFailure`]
//!   (a panic never crosses threads or aborts); it also breaks the barrier so that tasks
//!   waiting for it do not wait forever.
//! - A task on a worker runs on the launcher's behalf ([`is_me_or_my_launcher`]): a lock that
//!   refuses re-entry by its holder's thread refuses it from the holder's workers too, where
//!   waiting would deadlock (the holder waits for the worker).

mod barrier;
mod fill;
mod lineage;
#[cfg(test)]
mod tests;

pub use barrier::{Barrier, Broken};
pub use fill::{Sink, POLL_EVERY};
pub use lineage::{is_me_or_my_launcher, launcher, thread_key};

use crate::error::panic_message;
use crate::{Error, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, TryLockError};

/// The environment variable that sets the pool size.
pub const NUM_THREADS_VAR: &str = "RELAXVM_NUM_THREADS";

/// The most threads a pool may have.
pub const MAX_THREADS: usize = 1024;

/// The pool size `RELAXVM_NUM_THREADS` asks for, or the number of cores; an error for a value
/// that is not a positive integer of at most [`MAX_THREADS`].
pub fn configured_threads() -> Result<usize> {
    match std::env::var(NUM_THREADS_VAR) {
        Ok(v) => parse_threads(&v),
        Err(std::env::VarError::NotPresent) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        Err(e) => Err(Error::value(format!("{NUM_THREADS_VAR}: {e}"))),
    }
}

/// A `RELAXVM_NUM_THREADS` value as a thread count.
pub fn parse_threads(v: &str) -> Result<usize> {
    v.trim().parse::<usize>().ok().filter(|n| (1..=MAX_THREADS).contains(n)).ok_or_else(|| {
        Error::value(format!("{NUM_THREADS_VAR}={v:?}: expected a positive integer (at most {MAX_THREADS})"))
    })
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// The process's pool, created on first use with [`configured_threads`] — or one thread when
/// that setting is invalid, which is logged as a warning here (and is an error where a TVM
/// library is opened).
pub fn global() -> &'static Pool {
    POOL.get_or_init(|| {
        Pool::new(configured_threads().unwrap_or_else(|e| {
            log::warn!("{e}; the thread pool runs one thread");
            1
        }))
    })
}

/// Creates the process's pool with `threads` threads, for embedders that set the size in code
/// rather than with `RELAXVM_NUM_THREADS` (the C API's `rvm_vm_options.num_threads`). An error
/// when `threads` is not 1..=[`MAX_THREADS`], or when the pool already exists with another size
/// (it is created once per process, on first use).
pub fn init_global(threads: usize) -> Result<&'static Pool> {
    if !(1..=MAX_THREADS).contains(&threads) {
        return Err(Error::value(format!("thread count {threads}: expected 1 to {MAX_THREADS}")));
    }
    let pool = POOL.get_or_init(|| Pool::new(threads));
    if pool.threads() != threads {
        return Err(Error::value(format!(
            "the thread pool already runs {} threads (it is created once per process, on first use); \
             {threads} were asked for",
            pool.threads()
        )));
    }
    Ok(pool)
}

/// One task of a launch, as its body sees it.
pub struct Task<'a> {
    id: usize,
    count: usize,
    barrier: &'a Barrier,
}

impl<'a> Task<'a> {
    /// This task's index, below [`Task::count`]; task 0 runs on the launching thread.
    pub fn id(&self) -> usize {
        self.id
    }

    /// How many tasks the launch runs: a task divides the work by this, not by the number
    /// requested (a launch that could not have the pool runs one task).
    pub fn count(&self) -> usize {
        self.count
    }

    /// The launch's barrier, shared by its [`Task::count`] tasks.
    pub fn barrier(&self) -> &'a Barrier {
        self.barrier
    }
}

/// How a task failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<E> {
    /// The task returned this error.
    Error(E),
    /// The task panicked with this message.
    Panic(String),
}

/// A task that failed, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure<E> {
    /// The task's index.
    pub task: usize,
    /// What went wrong.
    pub failure: Failure<E>,
}

impl<E: std::fmt::Display> std::fmt::Display for TaskFailure<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.failure {
            Failure::Error(e) => write!(f, "task {} failed: {e}", self.task),
            Failure::Panic(m) => write!(f, "task {} panicked: {m}", self.task),
        }
    }
}

/// The failures of a launch's tasks, in task order (empty for a launch that succeeded).
pub type Failures<E> = Vec<TaskFailure<E>>;

/// The failures as one line, in task order: `task 1 failed: ...; task 3 panicked: ...`.
pub fn describe<E: std::fmt::Display>(failures: &[TaskFailure<E>]) -> String {
    failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// How often [`Pool::run_with_caller_polling`] polls while its caller waits for workers.
pub const POLL_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// A launch's worker-side body, its lifetime erased: it is only called while the launcher
/// waits for it (see `Pool::launch`).
#[derive(Clone, Copy)]
struct JobRef {
    body: *const (dyn Fn(usize) + Sync + 'static),
    count: usize,
}

// SAFETY: `body` points at a `Sync` closure, which any thread may call through a shared
// reference; the launcher keeps it alive until every worker that calls it has finished.
unsafe impl Send for JobRef {}

struct State {
    /// Bumped by each launch that uses the workers.
    generation: u64,
    /// The current launch's body, while workers may still start it.
    job: Option<JobRef>,
    /// Workers that started the current launch's body.
    started: usize,
    /// Workers running the current launch's body.
    running: usize,
    shutdown: bool,
}

struct PoolState {
    state: Mutex<State>,
    wake: Condvar,
    done: Condvar,
}

/// How a launch's workers take part.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every task runs, all at once (they may meet at the barrier).
    Together,
    /// Workers help the caller while it runs; latecomers are skipped.
    Helpers,
}

/// A fixed set of worker threads (started on the first launch that needs them).
pub struct Pool {
    threads: usize,
    shared: Arc<PoolState>,
    /// Held by the thread whose launch owns the workers.
    busy: Mutex<()>,
    /// How many threads, the caller included, were started.
    started: OnceLock<usize>,
}

thread_local! {
    /// True inside a task run by a pool (nested launches then run inline).
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the state consistent; tasks run outside the lock.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// A pool of `threads` threads counting the caller (at most `threads - 1` workers).
    pub fn new(threads: usize) -> Pool {
        Pool {
            threads: threads.clamp(1, MAX_THREADS),
            shared: Arc::new(PoolState {
                state: Mutex::new(State { generation: 0, job: None, started: 0, running: 0, shutdown: false }),
                wake: Condvar::new(),
                done: Condvar::new(),
            }),
            busy: Mutex::new(()),
            started: OnceLock::new(),
        }
    }

    /// How many tasks a launch can run at once.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// True on a thread that is running a pool task (a launch from it runs inline).
    pub fn in_task() -> bool {
        IN_TASK.with(|t| t.get())
    }

    /// Runs `num_tasks` tasks (0: one per thread; capped at [`Pool::threads`]) of `task` at
    /// once and waits for them; the failures of those that failed, in task order.
    pub fn run<E: Send>(
        &self,
        num_tasks: usize,
        task: &(dyn Fn(&Task<'_>) -> std::result::Result<(), E> + Sync),
    ) -> std::result::Result<(), Failures<E>> {
        self.run_with_caller(num_tasks, task, &mut |t| task(t))
    }

    /// Like [`Pool::run`], but task 0 — on the calling thread — runs `caller` instead of
    /// `task`, which lets it use what cannot be shared with other threads.
    pub fn run_with_caller<E: Send>(
        &self,
        num_tasks: usize,
        task: &(dyn Fn(&Task<'_>) -> std::result::Result<(), E> + Sync),
        caller: &mut dyn FnMut(&Task<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), Failures<E>> {
        self.launch(num_tasks, task, caller, Mode::Together, None)
    }

    /// Like [`Pool::run_with_caller`], calling `poll` on the calling thread every
    /// [`POLL_WAIT`] while it waits for the workers after its own task: an embedder's chance to
    /// notice Ctrl-C and end what the workers wait for (the launch still returns only once
    /// every worker has finished: they use the launch's closures).
    pub fn run_with_caller_polling<E: Send>(
        &self,
        num_tasks: usize,
        task: &(dyn Fn(&Task<'_>) -> std::result::Result<(), E> + Sync),
        caller: &mut dyn FnMut(&Task<'_>) -> std::result::Result<(), E>,
        poll: &mut dyn FnMut(),
    ) -> std::result::Result<(), Failures<E>> {
        self.launch(num_tasks, task, caller, Mode::Together, Some(poll))
    }

    /// Like [`Pool::run_with_caller`], for work that `caller` can finish alone (tasks taking
    /// pieces from a shared queue): workers join while `caller` runs, and one that has not
    /// started by the time `caller` returns is skipped instead of waited for — on a busy
    /// machine a worker may wait milliseconds for a core. Tasks do not all run at once here,
    /// so the barrier is broken from the start (a wait returns [`Broken`]).
    pub fn help_caller<E: Send>(
        &self,
        num_tasks: usize,
        task: &(dyn Fn(&Task<'_>) -> std::result::Result<(), E> + Sync),
        caller: &mut dyn FnMut(&Task<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), Failures<E>> {
        self.launch(num_tasks, task, caller, Mode::Helpers, None)
    }

    fn launch<E: Send>(
        &self,
        num_tasks: usize,
        task: &(dyn Fn(&Task<'_>) -> std::result::Result<(), E> + Sync),
        caller: &mut dyn FnMut(&Task<'_>) -> std::result::Result<(), E>,
        mode: Mode,
        mut poll: Option<&mut dyn FnMut()>,
    ) -> std::result::Result<(), Failures<E>> {
        let want = if num_tasks == 0 { self.threads } else { num_tasks.min(self.threads) };
        let guard = if want > 1 && !Pool::in_task() {
            match self.busy.try_lock() {
                Ok(g) => Some(g),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            }
        } else {
            None
        };
        let count = if guard.is_some() { want.min(self.spawn_workers()) } else { 1 };
        let barrier = Barrier::new(count);
        if mode == Mode::Helpers && count > 1 {
            barrier.break_group();
        }
        let failures = Mutex::new(Vec::new());
        if count == 1 {
            run_task(&Task { id: 0, count: 1, barrier: &barrier }, &failures, caller);
            return finish(failures);
        }
        // Workers run their tasks on this thread's behalf (it waits for them): see `lineage`.
        let on_behalf_of = match lineage::launcher() {
            0 => lineage::thread_key(),
            root => root,
        };
        let body = |id: usize| {
            let _working_for = lineage::WorkingFor::enter(on_behalf_of);
            run_task(&Task { id, count, barrier: &barrier }, &failures, &mut |t| task(t))
        };
        let body: &(dyn Fn(usize) + Sync + '_) = &body;
        // SAFETY: only the lifetime changes. Workers reach `body` only through `job` and this
        // function does not return — `run_task` catches the caller's panics — before `job` is
        // cleared and no worker that took it is still running it.
        let body: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(body) };
        {
            let mut s = lock(&self.shared.state);
            s.generation += 1;
            s.job = Some(JobRef { body, count });
            s.started = 0;
            self.shared.wake.notify_all();
        }
        run_task(&Task { id: 0, count, barrier: &barrier }, &failures, caller);
        let mut s = lock(&self.shared.state);
        if mode == Mode::Helpers {
            // Workers that have not taken the job yet will not.
            s.job = None;
        }
        while s.running > 0 || (mode == Mode::Together && s.started < count - 1) {
            match poll.as_mut() {
                None => s = self.shared.done.wait(s).unwrap_or_else(|p| p.into_inner()),
                Some(poll) => {
                    let (g, waited) = self.shared.done.wait_timeout(s, POLL_WAIT).unwrap_or_else(|p| p.into_inner());
                    s = g;
                    if waited.timed_out() {
                        // Outside the lock: the hook may take the GIL or end other threads' waits.
                        drop(s);
                        poll();
                        s = lock(&self.shared.state);
                    }
                }
            }
        }
        s.job = None;
        drop(s);
        drop(guard);
        finish(failures)
    }

    /// Starts the workers once; how many threads (the caller included) a launch can use.
    fn spawn_workers(&self) -> usize {
        *self.started.get_or_init(|| {
            // Called with `busy` held: no launch moves the generation while workers start.
            let seen = lock(&self.shared.state).generation;
            let mut started = 1;
            for worker in 1..self.threads {
                let shared = Arc::clone(&self.shared);
                let spawned = std::thread::Builder::new()
                    .name(format!("relaxvm-pool-{worker}"))
                    .spawn(move || work(&shared, worker, seen));
                // A worker that cannot start lowers the pool's width instead of stalling it.
                if spawned.is_err() {
                    break;
                }
                started += 1;
            }
            started
        })
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.wake.notify_all();
    }
}

/// A worker's loop: waits for launches and runs its task of those it takes part in.
fn work(shared: &PoolState, worker: usize, mut seen: u64) {
    IN_TASK.with(|t| t.set(true));
    loop {
        let job = {
            let mut s = lock(&shared.state);
            while s.generation == seen && !s.shutdown {
                s = shared.wake.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            if s.shutdown {
                return;
            }
            seen = s.generation;
            // A worker beyond the launch's task count sits it out (and is not waited for).
            match s.job {
                Some(job) if worker < job.count => {
                    s.started += 1;
                    s.running += 1;
                    job
                }
                _ => continue,
            }
        };
        // SAFETY: the launcher keeps `job`'s body alive until it has cleared `job` and no
        // worker that took it (counted in `running`, decremented after the call) runs it.
        unsafe { (*job.body)(worker) };
        let mut s = lock(&shared.state);
        s.running -= 1;
        if s.running == 0 {
            shared.done.notify_all();
        }
    }
}

/// Runs one task on this thread, marked as inside a task (so launches from it run inline),
/// recording its failure and breaking the barrier when it fails.
fn run_task<E>(
    task: &Task<'_>,
    failures: &Mutex<Failures<E>>,
    body: &mut dyn FnMut(&Task<'_>) -> std::result::Result<(), E>,
) {
    let was = IN_TASK.with(|t| t.replace(true));
    let outcome = catch_unwind(AssertUnwindSafe(|| body(task)));
    IN_TASK.with(|t| t.set(was));
    let failure = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(e)) => Failure::Error(e),
        Err(payload) => Failure::Panic(panic_message(payload.as_ref())),
    };
    task.barrier.break_group();
    lock(failures).push(TaskFailure { task: task.id, failure });
}

fn finish<E>(failures: Mutex<Failures<E>>) -> std::result::Result<(), Failures<E>> {
    let mut f = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    if f.is_empty() {
        return Ok(());
    }
    f.sort_by_key(|t| t.task);
    Err(f)
}
