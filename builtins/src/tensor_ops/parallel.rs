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
use std::sync::{Condvar, Mutex};

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

/// A check for interrupts (`CallCtx::check_interrupt`), which only the calling thread may
/// call; long loops call it every [`pool::POLL_EVERY`] elements of work.
pub(crate) type Poll<'a> = &'a mut dyn FnMut() -> Result<()>;

/// Appends `len` elements to `out` (which has room for them): `fill(start, sink)` writes the
/// elements from `start` on, a piece of [`ELEMENTS_PER_PIECE`] at a time, across the pool
/// when `len` is large, polling as [`relaxvm::pool::Pool::fill`] does.
pub(crate) fn fill<T: Copy + Send>(
    name: &str,
    out: &mut Vec<T>,
    len: usize,
    poll: Poll<'_>,
    fill: &(dyn Fn(usize, &mut Sink<'_, T>) + Sync),
) -> Result<()> {
    fill_pieces(name, out, len, ELEMENTS_PER_PIECE, len, poll, fill)
}

/// Like [`fill`], with pieces of `piece` elements that together cost `work` element visits
/// (which decides how many tasks pay off).
pub(crate) fn fill_pieces<T: Copy + Send>(
    name: &str,
    out: &mut Vec<T>,
    len: usize,
    piece: usize,
    work: usize,
    poll: Poll<'_>,
    fill: &(dyn Fn(usize, &mut Sink<'_, T>) + Sync),
) -> Result<()> {
    let tasks = tasks_for(work, MIN_PARALLEL_ELEMENTS);
    // The poll's own error (an interrupt) is returned as it is; the pool's are internal.
    let mut polled = None;
    let mut keep = || {
        poll().map_err(|e| {
            polled = Some(e);
            Error::value("interrupted")
        })
    };
    match pool::global().fill(out, len, piece, tasks, &mut keep, fill) {
        Ok(()) => Ok(()),
        Err(e) => Err(polled.unwrap_or_else(|| internal_error(name, e))),
    }
}

/// Appends `items` to `out` on this thread, polling after every [`pool::POLL_EVERY`] of them:
/// the sequential loops over inputs of any size (strided views, copies).
pub(crate) fn extend_polled<T>(out: &mut Vec<T>, items: impl Iterator<Item = T>, poll: Poll<'_>) -> Result<()> {
    let mut items = items;
    loop {
        let before = out.len();
        out.extend(items.by_ref().take(pool::POLL_EVERY));
        if out.len() - before < pool::POLL_EVERY {
            return Ok(());
        }
        poll()?;
    }
}

/// A check between the steps of a long piece (see [`for_each_piece`]).
pub(crate) type Check<'a> = &'a mut dyn FnMut() -> Result<()>;

/// How long the calling thread, out of pieces, waits for the workers' pieces before it polls
/// again: a worker's piece may be long, and the caller is the thread that notices an interrupt.
const POLL_WHILE_WAITING: std::time::Duration = std::time::Duration::from_millis(5);

/// Runs `work` on every piece `pieces` yields, with up to `tasks` tasks of the pool taking
/// pieces in turn. The calling thread calls `poll` before each piece it takes, and every few
/// milliseconds while it waits for the pieces workers run (only it may: `poll` may use its
/// call context). `work` gets a `check` to call between the steps of a long piece: on the
/// calling thread it polls, on a worker it fails once the run is stopping. When `poll` or a
/// piece fails, no further piece or step starts and that error is returned.
pub(crate) fn for_each_piece<P, I: Iterator<Item = P> + Send>(
    name: &str,
    pieces: I,
    tasks: usize,
    work: &(dyn Fn(P, Check<'_>) -> Result<()> + Sync),
    poll: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    // The pieces not yet taken, and how many taken pieces are still running.
    let queue = Mutex::new((pieces, 0usize));
    let finished = Condvar::new();
    let next = || {
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        let piece = q.0.next();
        q.1 += usize::from(piece.is_some());
        piece
    };
    let done = || {
        queue.lock().unwrap_or_else(|p| p.into_inner()).1 -= 1;
        finished.notify_all();
    };
    let stop = AtomicBool::new(false);
    let failed = Mutex::new(None);
    let fail = |e: Error| {
        // The error first: a worker that sees `stop` fails with a note that the first one has.
        failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
        stop.store(true, Ordering::Release);
    };
    let stopped = || Error::value(format!("{name}: stopped, another piece failed"));
    // A panic is caught here, not by the pool, so that the piece is counted done (the caller
    // waits for the count) and reported like an error, the same on any thread.
    let run = |piece: P, check: Check<'_>| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(piece, check))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => fail(e),
            Err(p) => fail(Error::value(format!(
                "{name}: internal error: a piece panicked: {}",
                relaxvm::packed::panic_message(p.as_ref())
            ))),
        }
        done();
    };
    // Tasks report errors through `fail` (the first one stops the others), never to the pool.
    let worker = |_: &pool::Task<'_>| -> std::result::Result<(), Infallible> {
        while !stop.load(Ordering::Acquire) {
            let Some(piece) = next() else { break };
            run(piece, &mut || if stop.load(Ordering::Acquire) { Err(stopped()) } else { Ok(()) });
        }
        Ok(())
    };
    let caller = &mut |_: &pool::Task<'_>| -> std::result::Result<(), Infallible> {
        while !stop.load(Ordering::Acquire) {
            if let Err(e) = poll() {
                fail(e);
                break;
            }
            let Some(piece) = next() else { break };
            run(piece, &mut *poll);
        }
        // Out of pieces (or stopping): wait for the workers' pieces, polling meanwhile, so
        // that an interrupt stops them (they check `stop` between their steps).
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        while q.1 > 0 {
            q = finished.wait_timeout(q, POLL_WHILE_WAITING).unwrap_or_else(|p| p.into_inner()).0;
            if q.1 > 0 && !stop.load(Ordering::Acquire) {
                drop(q);
                if let Err(e) = poll() {
                    fail(e);
                }
                q = queue.lock().unwrap_or_else(|p| p.into_inner());
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
    internal_error(name, pool::describe(&failures))
}

/// A builtin's error from a failure that only a bug causes (the pool's or ndarray's), the one
/// message of such sites.
pub(super) fn internal_error(name: &str, e: impl std::fmt::Display) -> Error {
    Error::value(format!("{name}: internal error: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_poll_stops_the_steps_of_pieces_on_any_thread() {
        // Each piece checks forever once started; the poll fails once one has started. On
        // one thread the caller runs the piece and `check` is the poll; on more, a worker may
        // run it, and the caller, waiting for it, polls and stops it.
        let started = AtomicBool::new(false);
        let work = |_: usize, check: &mut dyn FnMut() -> Result<()>| -> Result<()> {
            started.store(true, Ordering::SeqCst);
            loop {
                check()?;
                std::thread::yield_now();
            }
        };
        let mut poll = || {
            if started.load(Ordering::SeqCst) {
                Err(Error::value("interrupted"))
            } else {
                Ok(())
            }
        };
        let e = for_each_piece("op", 0..2usize, 2, &work, &mut poll).unwrap_err();
        assert_eq!(e.to_string(), "interrupted");
    }

    #[test]
    fn a_panicking_piece_is_an_error_and_the_caller_does_not_wait_for_it_forever() {
        let work = |i: usize, _: &mut dyn FnMut() -> Result<()>| -> Result<()> {
            if i == 1 {
                panic!("piece {i}");
            }
            Ok(())
        };
        let e = for_each_piece("op", 0..4usize, 2, &work, &mut || Ok(())).unwrap_err().to_string();
        assert_eq!(e, "op: internal error: a piece panicked: piece 1");
    }
}
