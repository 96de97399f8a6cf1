//! Running an operator's work across the process's thread pool ([`relaxvm::pool`], shared
//! with TVM kernels and sized by `RELAXVM_NUM_THREADS`).
//!
//! Results never depend on the number of threads: work is cut into pieces whose geometry
//! depends only on the operands' shapes, each piece is computed the same way by whichever
//! thread takes it, and anything combined across pieces (a sum's partial results) is combined
//! in piece order on the calling thread. One thread, or a pool busy with another launch, runs
//! the same pieces in turn.

use relaxvm::pool::{self, Failures, Sink};
use relaxvm::{Error, Result};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Elementwise work below this many elements stays on the calling thread: waking a worker
/// costs about as much as touching this many elements (measured: 1M-element `add`).
pub(crate) const MIN_PARALLEL_ELEMENTS: usize = 1 << 17;

/// The elements of one piece of an elementwise result or reduction: big enough that taking
/// a piece is negligible, small enough to balance two to a few dozen threads.
pub(crate) const ELEMENTS_PER_PIECE: usize = 1 << 15;

/// How many tasks to run for `work` units of which `min_per_task` pay for a task.
pub(crate) fn tasks_for(work: usize, min_per_task: usize) -> usize {
    (work / min_per_task.max(1)).clamp(1, pool::global().threads())
}

/// Appends `len` elements to `out` (which has room for them): `fill(start, sink)` writes the
/// elements from `start` on, a piece of [`ELEMENTS_PER_PIECE`] at a time, across the pool
/// when `len` is large.
pub(crate) fn fill<T: Copy + Send>(
    name: &str,
    out: &mut Vec<T>,
    len: usize,
    fill: &(dyn Fn(usize, &mut Sink<'_, T>) + Sync),
) -> Result<()> {
    fill_pieces(name, out, len, ELEMENTS_PER_PIECE, len, fill)
}

/// Like [`fill`], with pieces of `piece` elements that together cost `work` element visits
/// (which decides how many tasks pay off).
pub(crate) fn fill_pieces<T: Copy + Send>(
    name: &str,
    out: &mut Vec<T>,
    len: usize,
    piece: usize,
    work: usize,
    fill: &(dyn Fn(usize, &mut Sink<'_, T>) + Sync),
) -> Result<()> {
    let tasks = tasks_for(work, MIN_PARALLEL_ELEMENTS);
    pool::global().fill(out, len, piece, tasks, fill).map_err(|e| Error::value(format!("{name}: internal error: {e}")))
}

/// Runs `work` on every piece `pieces` yields, with up to `tasks` tasks of the pool taking
/// pieces in turn. The calling thread calls `poll` before each piece it takes (only it may:
/// `poll` may use its call context); when `poll` or a piece fails, no further piece starts and
/// that error is returned.
pub(crate) fn for_each_piece<P, I: Iterator<Item = P> + Send>(
    name: &str,
    pieces: I,
    tasks: usize,
    work: &(dyn Fn(P) -> Result<()> + Sync),
    poll: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let queue = Mutex::new(pieces);
    let next = || queue.lock().unwrap_or_else(|p| p.into_inner()).next();
    let stop = AtomicBool::new(false);
    let failed = Mutex::new(None);
    let fail = |e: Error| {
        stop.store(true, Ordering::Relaxed);
        failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
    };
    // Tasks report errors through `fail` (the first one stops the others), never to the pool.
    let worker = |_: &pool::Task<'_>| -> std::result::Result<(), Infallible> {
        while !stop.load(Ordering::Relaxed) {
            let Some(piece) = next() else { break };
            if let Err(e) = work(piece) {
                fail(e);
            }
        }
        Ok(())
    };
    let caller = &mut |_: &pool::Task<'_>| -> std::result::Result<(), Infallible> {
        while !stop.load(Ordering::Relaxed) {
            let polled = poll().and_then(|()| next().map_or(Ok(false), |piece| work(piece).map(|()| true)));
            match polled {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => fail(e),
            }
        }
        Ok(())
    };
    // The caller can finish the queue alone: workers that start late are not waited for.
    let ran = pool::global().help_caller(tasks.max(1), &worker, caller);
    ran.map_err(|f| internal(name, f))?;
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A failure of an operator's task: a panic, a bug (its tasks return no errors).
fn internal(name: &str, failures: Failures<Infallible>) -> Error {
    Error::value(format!("{name}: internal error: {}", pool::describe(&failures)))
}
