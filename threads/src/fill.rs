//! Writing a new vector's elements in pieces across the pool, each element written once.
//!
//! A result filled in parallel would otherwise have to be zeroed first (safe code cannot hand
//! out uninitialized memory), which costs as much memory traffic as an elementwise op itself.
//! [`Pool::fill`] hands each task a [`Sink`] over one piece of the vector's spare capacity and
//! counts what it writes: the vector grows only when every piece was written in full, so the
//! interface stays safe whatever the pieces' code does.
//!
//! A fill of a huge vector must stop when its caller is interrupted. Polls fall at fixed points
//! of the work: one each time the work done by all tasks together crosses a multiple of
//! [`POLL_EVERY`] elements, whichever task did it. Only the calling thread may poll (the poll
//! may use state that cannot leave it), so a worker that crosses a boundary wakes the caller if
//! it waits, and the caller makes up the polls due at its next progress report or as it waits
//! for the workers' pieces. A fill of `w` elements of work therefore polls `w / POLL_EVERY`
//! times on any number of threads, and when a poll fails, every task stops at its next piece
//! or progress report.

use crate::{FillError, Pool};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// How many elements of work (pieces taken, plus what pieces report with [`Sink::progress`])
/// the calling thread does between two polls: a few MiB of data, a millisecond or so — often
/// enough for Ctrl-C, and rare enough that a poll (which may take Python's lock) costs nothing
/// measurable.
pub const POLL_EVERY: usize = 1 << 20;

/// Where a piece's elements go, in order; it must receive exactly [`Sink::capacity`] of them.
pub struct Sink<'a, T> {
    slots: &'a mut [MaybeUninit<T>],
    written: usize,
    overflowed: bool,
    /// Records work done and says whether to go on (see [`Sink::progress`]).
    progress: &'a mut dyn FnMut(usize) -> bool,
}

impl<T: Copy> Sink<'_, T> {
    /// How many elements the piece holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How many elements were written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Records `work` more elements of work done by a long piece (one that reads far more than
    /// it writes, such as a column of a sum), and says whether to go on: false once the fill
    /// is stopping (a poll failed), and the piece should then return at once — what it left
    /// unwritten is never seen. On the calling thread this is where the fill polls.
    pub fn progress(&mut self, work: usize) -> bool {
        (self.progress)(work)
    }

    /// Appends one element.
    pub fn push(&mut self, value: T) {
        match self.slots.get_mut(self.written) {
            Some(slot) => {
                slot.write(value);
                self.written += 1;
            }
            None => self.overflowed = true,
        }
    }

    /// Appends the elements of `items` (those beyond the piece's capacity are dropped, and
    /// reported when the iterator's size hint announces them).
    pub fn extend(&mut self, items: impl IntoIterator<Item = T>) {
        let items = items.into_iter();
        let rest = &mut self.slots[self.written..];
        if items.size_hint().0 > rest.len() {
            self.overflowed = true;
        }
        // `items` by value: a zip of two slice iterators compiles to vector code, while a zip
        // with `&mut items` goes element by element (twice as slow on a 1M-element add).
        let n = rest.iter_mut().zip(items).map(|(slot, v)| _ = slot.write(v)).count();
        self.written += n;
    }
}

impl Pool {
    /// Appends `len` elements to `out`, whose spare capacity must hold them: the elements are
    /// cut into pieces of `piece` (the last may be shorter), and `fill(start, sink)` writes the
    /// piece starting at element `start` into `sink`. At most `max_tasks` tasks take pieces
    /// in turn. Each element is written once, by whichever task takes its piece.
    ///
    /// The calling thread calls `poll` once each time the work done by all tasks (each piece
    /// taken counts its length, and pieces add what they report with [`Sink::progress`])
    /// crosses a multiple of [`POLL_EVERY`], whichever task did it: as it takes pieces and
    /// reports progress, and while it waits for the workers' pieces. When a poll fails, no task
    /// starts another piece, long pieces stop at their next progress report, and its error is
    /// returned as it is.
    ///
    /// An error, leaving `out` as it was, when the spare capacity is too small, a poll failed,
    /// a piece was not written in full (or overflowed), or a piece's code panicked.
    pub fn fill<T: Copy + Send, E>(
        &self,
        out: &mut Vec<T>,
        len: usize,
        piece: usize,
        max_tasks: usize,
        poll: &mut dyn FnMut() -> Result<(), E>,
        fill: &(dyn Fn(usize, &mut Sink<'_, T>) + Sync),
    ) -> Result<(), FillError<E>> {
        let spare = out.capacity() - out.len();
        if spare < len {
            return Err(FillError::NoRoom { needed: len, room: spare });
        }
        if len == 0 {
            return Ok(());
        }
        let piece = piece.max(1);
        let queue = Mutex::new(Queue {
            pieces: out.spare_capacity_mut()[..len].chunks_mut(piece).enumerate(),
            running: 0,
            caller_waits: false,
        });
        // Signalled when the last running piece ends, or a boundary is crossed, while the
        // caller waits.
        let changed = Condvar::new();
        let task_count = len.div_ceil(piece).min(max_tasks.max(1));
        // Set when a poll failed: every task stops at its next piece or progress report.
        let stop = AtomicBool::new(false);
        // The work done by all tasks.
        let done = AtomicUsize::new(0);
        let take_pieces = |progress: &mut dyn FnMut(usize) -> bool| loop {
            let next = {
                let mut q = lock(&queue);
                let next = q.pieces.next();
                q.running += usize::from(next.is_some());
                next
            };
            let Some((i, slots)) = next else { return Ok(()) };
            // Counted done however the piece ends (a panic included): the caller waits for it.
            let _running = Running { queue: &queue, changed: &changed };
            if !progress(slots.len()) {
                return Ok(());
            }
            let mut sink = Sink { slots, written: 0, overflowed: false, progress: &mut *progress };
            fill(i * piece, &mut sink);
            if stop.load(Ordering::Acquire) {
                // Stopping: the piece may have returned early; nothing written is kept.
                return Ok(());
            }
            if sink.overflowed || sink.written != sink.capacity() {
                let more = if sink.overflowed { " and more" } else { "" };
                return Err(format!(
                    "the piece at element {} expected {} elements, found {}{more}",
                    i * piece,
                    sink.capacity(),
                    sink.written
                ));
            }
        };
        let worker = |_: &crate::Task<'_>| {
            take_pieces(&mut |work| {
                let before = done.fetch_add(work, Ordering::Relaxed);
                if before / POLL_EVERY != before.saturating_add(work) / POLL_EVERY {
                    // A poll is due: wake the caller if it waits (it checks `done` under the
                    // lock before it waits, so the wake cannot be lost).
                    let q = lock(&queue);
                    if q.caller_waits {
                        changed.notify_all();
                    }
                }
                !stop.load(Ordering::Acquire)
            })
        };
        let mut polls = Polls { made: 0, poll, error: None };
        let mut caller = |_: &crate::Task<'_>| {
            let mut progress = |work: usize| {
                if stop.load(Ordering::Acquire) {
                    return false;
                }
                let now = done.fetch_add(work, Ordering::Relaxed).saturating_add(work);
                polls.catch_up(now, &stop)
            };
            let taken = take_pieces(&mut progress);
            // Out of pieces: wait for the workers' pieces, making the polls they make due.
            let mut q = lock(&queue);
            while !stop.load(Ordering::Acquire) {
                let due = done.load(Ordering::Relaxed) / POLL_EVERY;
                if polls.made < due {
                    // Outside the lock: the poll may take a while (Python's lock).
                    drop(q);
                    polls.catch_up(done.load(Ordering::Relaxed), &stop);
                    q = lock(&queue);
                } else if q.running == 0 {
                    break;
                } else {
                    q.caller_waits = true;
                    q = changed.wait(q).unwrap_or_else(|p| p.into_inner());
                    q.caller_waits = false;
                }
            }
            taken
        };
        // Taking pieces from a queue: the caller can finish alone, helpers are optional.
        let result = self.help_caller(task_count, &worker, &mut caller);
        if let Some(e) = polls.error {
            return Err(FillError::Poll(e));
        }
        if let Err(failures) = result {
            return Err(FillError::Pieces(failures));
        }
        // The caller's task stops only when no piece is left, and none failed and no poll
        // did: each piece was written in full.
        let new_len = out.len() + len;
        // SAFETY: the first `len` spare slots were cut into pieces, every piece was taken
        // (the caller's task ran until the iterator was exhausted — it stops early only when a
        // poll failed, returned above — and `help_caller` returns only after every task that
        // took a piece is done) and its sink wrote each of its slots in order (`written ==
        // capacity`); `T: Copy`, so no element needs a drop.
        unsafe { out.set_len(new_len) };
        Ok(())
    }
}

/// The pieces of a fill not yet taken, and how many taken pieces are still running.
struct Queue<I> {
    pieces: I,
    running: usize,
    /// True while the caller waits for `changed`.
    caller_waits: bool,
}

fn lock<I>(queue: &Mutex<Queue<I>>) -> MutexGuard<'_, Queue<I>> {
    // Every critical section leaves the queue consistent; pieces run outside the lock.
    queue.lock().unwrap_or_else(|p| p.into_inner())
}

/// A taken piece, counted running until it is dropped.
struct Running<'a, I> {
    queue: &'a Mutex<Queue<I>>,
    changed: &'a Condvar,
}

impl<I> Drop for Running<'_, I> {
    fn drop(&mut self) {
        let mut q = lock(self.queue);
        q.running -= 1;
        if q.running == 0 && q.caller_waits {
            self.changed.notify_all();
        }
    }
}

/// The caller's polls: one per [`POLL_EVERY`] elements of work done.
struct Polls<'a, E> {
    made: usize,
    poll: &'a mut dyn FnMut() -> Result<(), E>,
    /// The failed poll's error.
    error: Option<E>,
}

impl<E> Polls<'_, E> {
    /// Makes the polls due when `done` elements of work are done; false (and `stop` set) when
    /// one fails.
    fn catch_up(&mut self, done: usize, stop: &AtomicBool) -> bool {
        while self.made < done / POLL_EVERY {
            self.made += 1;
            if let Err(e) = (self.poll)() {
                self.error = Some(e);
                stop.store(true, Ordering::Release);
                return false;
            }
        }
        true
    }
}
