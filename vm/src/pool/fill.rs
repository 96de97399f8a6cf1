//! Writing a new vector's elements in pieces across the pool, each element written once.
//!
//! A result filled in parallel would otherwise have to be zeroed first (safe code cannot hand
//! out uninitialized memory), which costs as much memory traffic as an elementwise op itself.
//! [`Pool::fill`] hands each task a [`Sink`] over one piece of the vector's spare capacity and
//! counts what it writes: the vector grows only when every piece was written in full, so the
//! interface stays safe whatever the pieces' code does.

use super::Pool;
use crate::{Error, Result};
use std::mem::MaybeUninit;
use std::sync::Mutex;

/// Where a piece's elements go, in order; it must receive exactly [`Sink::capacity`] of them.
pub struct Sink<'a, T> {
    slots: &'a mut [MaybeUninit<T>],
    written: usize,
    overflowed: bool,
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
    /// An error, leaving `out` as it was, when the spare capacity is too small, a piece was
    /// not written in full (or overflowed), or a piece's code panicked.
    pub fn fill<T: Copy + Send>(
        &self,
        out: &mut Vec<T>,
        len: usize,
        piece: usize,
        max_tasks: usize,
        fill: &(dyn Fn(usize, &mut Sink<'_, T>) + Sync),
    ) -> Result<()> {
        let spare = out.capacity() - out.len();
        if spare < len {
            return Err(Error::value(format!(
                "pool fill: expected room for {len} more elements, found room for {spare}"
            )));
        }
        if len == 0 {
            return Ok(());
        }
        let piece = piece.max(1);
        let pieces = Mutex::new(out.spare_capacity_mut()[..len].chunks_mut(piece).enumerate());
        let task_count = len.div_ceil(piece).min(max_tasks.max(1));
        let take_pieces = |_: &super::Task<'_>| loop {
            let next = pieces.lock().unwrap_or_else(|p| p.into_inner()).next();
            let Some((i, slots)) = next else { return Ok(()) };
            let mut sink = Sink { slots, written: 0, overflowed: false };
            fill(i * piece, &mut sink);
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
        // Taking pieces from a queue: the caller can finish alone, helpers are optional.
        let result = self.help_caller(task_count, &take_pieces, &mut |t| take_pieces(t));
        if let Err(failures) = result {
            return Err(Error::value(format!("pool fill: {}", super::describe(&failures))));
        }
        // The caller's task stops only when no piece is left, and none failed: each piece
        // was written in full.
        let new_len = out.len() + len;
        // SAFETY: the first `len` spare slots were cut into pieces, every piece was taken
        // (the caller's task ran until the iterator was exhausted, and `help_caller` returns
        // only after every task that took a piece is done) and its sink wrote each of its
        // slots in order (`written == capacity`); `T: Copy`, so no element needs a drop.
        unsafe { out.set_len(new_len) };
        Ok(())
    }
}
