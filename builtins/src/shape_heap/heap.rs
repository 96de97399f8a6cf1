//! A shape heap argument of a builtin ([`Heap`]) and its slots while a call holds them
//! ([`Slots`]): where the slots lie in the storage, worked out once per call, and how they are
//! read and written (a word heap's words as they are, any other heap's bytes held once).

use crate::args::{self, in_builtin, type_err, value_err};
use relaxvm::storage::words::Words;
use relaxvm::{DataType, Error, Result, Tensor, Value};
use std::sync::atomic::{AtomicI64, Ordering};

/// A shape heap argument: a 1-D `int64` tensor, or null when the program has none. Where its
/// slots lie is worked out once per call, not once per slot.
pub(super) struct Heap<'a> {
    name: &'static str,
    pub(super) tensor: Option<&'a Tensor>,
    /// The number of slots.
    len: usize,
    /// How many of them lie inside the storage: all of them, as tensor views are checked
    /// against their storage when made; checked here too rather than assumed (any others
    /// would be errors, not reads past the bytes).
    pub(super) reach: usize,
    /// The byte offset of slot 0 and the bytes from one slot to the next.
    pub(super) base: usize,
    pub(super) step: usize,
    /// The storage's words, when it is word storage and the slots lie on its word boundaries
    /// (a heap `alloc_shape_heap` made, or a view of one): read and written without a lock.
    pub(super) words: Option<Words<'a>>,
}

impl<'a> Heap<'a> {
    /// Argument `i` of `args` as a heap.
    #[inline(always)]
    pub(super) fn arg(name: &'static str, args: &'a [Value], i: usize) -> Result<Self> {
        match args.get(i) {
            Some(Value::Null) => Ok(Heap { name, tensor: None, len: 0, reach: 0, base: 0, step: 0, words: None }),
            Some(Value::Tensor(t)) if t.dtype() == DataType::I64 && t.ndim() == 1 => {
                let (len, base) = (t.numel(), t.byte_offset());
                let step = usize::try_from(t.stride(0)).ok().and_then(|s| s.checked_mul(8));
                // The end of the last slot, when every slot's offset is a valid `usize`.
                let end = step.and_then(|step| {
                    len.checked_sub(1)
                        .map_or(Some(base), |last| last.checked_mul(step)?.checked_add(base)?.checked_add(8))
                });
                let reach = if end.is_some_and(|end| end <= t.storage().len()) { len } else { 0 };
                // Slot offsets are `base` plus multiples of 8 (`step` is).
                let words = t.storage().words().filter(|_| base % 8 == 0);
                Ok(Heap { name, tensor: Some(t), len, reach, base, step: step.unwrap_or(0), words })
            }
            _ => Err(Self::bad_arg(name, args, i)),
        }
    }

    #[cold]
    fn bad_arg(name: &str, args: &[Value], i: usize) -> Error {
        match args.get(i) {
            Some(other) => type_err(name, i, "shape heap", "1-D int64 tensor or null", other),
            None => args::missing(name, i, args.len()),
        }
    }

    #[cold]
    fn no_heap(&self, idx: i64) -> Error {
        value_err(self.name, format!("reading or writing slot {idx} needs a shape heap, found null"))
    }

    #[cold]
    fn out_of_range(&self, idx: i64) -> Error {
        Error::index(format!("shape heap (in {})", self.name), idx, self.len)
    }

    /// The byte offset of slot `idx` in the heap's storage.
    #[inline]
    fn slot(&self, idx: i64) -> Result<usize> {
        match usize::try_from(idx) {
            // In reach, the offset was shown to fit when the heap was read.
            Ok(i) if i < self.reach => Ok(self.base + i * self.step),
            Ok(i) if i < self.len => Err(self.outside_storage(idx)),
            _ => Err(self.out_of_range(idx)),
        }
    }

    #[cold]
    fn outside_storage(&self, idx: i64) -> Error {
        Error::index(format!("shape heap storage (in {})", self.name), idx, self.len)
    }

    /// Runs `f` on the heap's slots: a word heap's words as they are (a frozen one refuses
    /// writes, as its storage does), else the storage's bytes held once for all the reads and
    /// writes `f` makes (one atomic operation per call, not one or two per slot): for writing
    /// when `write`, else for reading. A null heap has no slots: touching one is an error.
    #[inline]
    pub(super) fn with_slots<R>(&self, write: bool, f: impl FnOnce(&mut Slots<'_, '_>) -> Result<R>) -> Result<R> {
        match self.tensor {
            None => f(&mut Slots { heap: self, held: Held::Absent }),
            Some(t) if self.words.is_some() => {
                let held = match write {
                    true => t.storage().words_for_write().map_err(|e| in_builtin(self.name, e))?.map(Held::WordsWrite),
                    false => self.words.map(Held::Words),
                };
                f(&mut Slots { heap: self, held: held.unwrap_or(Held::Absent) })
            }
            Some(t) if write => t
                .storage()
                .write_with(|b| f(&mut Slots { heap: self, held: Held::Write(b) }))
                .map_err(|e| in_builtin(self.name, e))?,
            Some(t) => t.storage().read_with(|b| f(&mut Slots { heap: self, held: Held::Read(b) })),
        }
    }
}

/// A heap's slots while [`Heap::with_slots`] holds them.
pub(super) struct Slots<'h, 'b> {
    heap: &'h Heap<'h>,
    held: Held<'b>,
}

/// The heap storage's bytes, as held (none for a null heap), or its words.
enum Held<'b> {
    Absent,
    Read(&'b [u8]),
    Write(&'b mut [u8]),
    /// A word heap's words, to read (relaxed loads: see `relaxvm::storage::words`).
    Words(Words<'b>),
    /// A word heap's words, to read and write (relaxed loads and stores).
    WordsWrite(&'b [AtomicI64]),
}

impl Slots<'_, '_> {
    /// `heap[idx]`.
    #[inline]
    pub(super) fn load(&self, idx: i64) -> Result<i64> {
        let bytes: &[u8] = match &self.held {
            Held::Absent => return Err(self.heap.no_heap(idx)),
            Held::Read(b) => b,
            Held::Write(b) => b,
            Held::Words(w) => return Ok(w.load(self.heap.slot(idx)? / 8)),
            Held::WordsWrite(w) => return Ok(w[self.heap.slot(idx)? / 8].load(Ordering::Relaxed)),
        };
        let at = self.heap.slot(idx)?;
        Ok(i64::from_ne_bytes(bytes[at..at + 8].try_into().expect("a slot is 8 bytes")))
    }

    /// `heap[idx] = value`.
    #[inline]
    pub(super) fn store(&mut self, idx: i64, value: i64) -> Result<()> {
        match &mut self.held {
            Held::Write(bytes) => {
                let at = self.heap.slot(idx)?;
                bytes[at..at + 8].copy_from_slice(&value.to_ne_bytes());
                Ok(())
            }
            Held::WordsWrite(w) => {
                w[self.heap.slot(idx)? / 8].store(value, Ordering::Relaxed);
                Ok(())
            }
            Held::Absent => Err(self.heap.no_heap(idx)),
            // Callers that store take the heap for writing (`with_slots(true, ..)`); this is
            // never reached, and would be an error of ours, not of the program.
            Held::Read(_) | Held::Words(_) => Err(value_err(
                self.heap.name,
                format!("internal error: slot {idx} was to be written, but the heap was taken for reading only"),
            )),
        }
    }
}
