//! Word storage: storage whose bytes Rust code reaches only through 64-bit atomic operations,
//! so that its words can be read and written with no lock at all. The shape heap is one: its
//! builtins read and write a few slots at every `match_shape` and `make_shape`, where the state
//! word's compare-and-swap (and its release) cost more than the work.
//!
//! # Why this is sound
//!
//! The bytes of ordinary storage are handed to safe code as `&[u8]` / `&mut [u8]` while the
//! state word holds them ([`Storage::bytes`], [`Storage::write_with`], ...); a write that
//! skipped the state word could then change bytes under a live reference, which is undefined
//! behaviour whoever holds the reference (another thread, or the same thread further up the
//! stack: argument lists are bitwise copies holding no reference count, so "only one handle"
//! proves nothing about who borrows the bytes). Word storage removes the references instead
//! of the writers:
//!
//! - Every door of [`Storage`] still takes the state word as for other storage (the same
//!   errors, the same exclusion among those doors), but hands out a *copy* of the bytes:
//!   [`Storage::bytes`] and [`Storage::read_with`] a copy taken by atomic loads,
//!   [`Storage::write_with`] a copy whose changed words are stored back atomically, and
//!   [`Storage::write`] stores its bytes into the words atomically. No `&[u8]` or `&mut [u8]`
//!   to the words themselves is ever made (a `Tensor::view` of word storage views the copy).
//! - [`Storage::words`] lends the words to read ([`Words`]: atomic loads only), and
//!   [`Storage::words_for_write`] lends them to write too, as `&[AtomicI64]`, unless the
//!   storage is frozen: shared references to atomics, which any number of threads may hold and
//!   load and store through at once. Every access by Rust code is thus atomic and of one size
//!   (8 bytes, at 8-byte-aligned addresses), so there is no data race in Rust's memory model
//!   whatever the interleaving: racing accesses give one of the values written, never a torn
//!   or undefined one. A [`Storage::write`] that covers part of a word, or a
//!   [`Storage::write_with`] that changes part of one, patches it with a compare-and-swap
//!   loop, so a slot store racing with it is kept in the bytes the door does not write, not
//!   undone by a store of the word as it was loaded before.
//! - The flag is set when the storage is made, before a second handle exists
//!   ([`Storage::alloc_words`] holds the only one: `Arc::get_mut` proves it), and never
//!   cleared, so no reference made under the other rules can outlive the switch.
//! - Foreign code (a TIR shape function writing the heap through its `DLTensor`, numpy) gets
//!   raw pointers ([`Storage::as_ptr`]) and plain loads and stores, as for any storage. Within
//!   one thread those are sequenced with the builtins' atomic accesses (a kernel runs inside
//!   a call; the VM's builtins run before or after it), which the memory model allows; across
//!   threads, the foreign code's contract (write only memory no Rust code reads at the time)
//!   is what it is for every storage. The pointer stays valid: the words are the storage's
//!   own bytes, in place, for as long as the storage lives.
//!
//! A frozen word storage refuses writes through [`Storage::words_for_write`] with the error a
//! write to any frozen storage gives; [`Storage::words`] cannot store, so a frozen storage's
//! words (a constant's) never change by Rust code.

use super::{frozen, Block, Storage, ALIGNMENT};
use crate::device::Device;
use crate::error::Result;
use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The most words a word storage is made with ([`Storage::alloc_words`]): every door copies
/// the words, so they are kept few (a shape heap has one per symbolic dimension: tens).
/// Larger requests get ordinary storage.
pub const MAX_WORDS: usize = 8192;

impl Storage {
    /// `n` zeroed 64-bit words on `device`: word storage ([`words`](self)) when `n` is at most
    /// [`MAX_WORDS`], else ordinary storage of `8 * n` bytes. Fails with an error, never aborts,
    /// when the memory cannot be had.
    pub fn alloc_words(n: usize, device: Device) -> Result<Self> {
        let mut storage = Storage::alloc_checked(n as i128 * 8, device)?;
        if n <= MAX_WORDS {
            // A new storage: this is its one handle (no weak handles are ever made).
            let block = Arc::get_mut(&mut storage.0).expect("a new storage has a single handle");
            block.words = true;
        }
        Ok(storage)
    }

    /// True for word storage ([`Storage::alloc_words`]).
    pub fn is_words(&self) -> bool {
        self.0.words
    }

    /// The words of a word storage, to read (relaxed atomic loads); `None` for other storage.
    /// To store, [`words_for_write`](Self::words_for_write).
    #[inline]
    pub fn words(&self) -> Option<Words<'_>> {
        if !self.0.words {
            return None;
        }
        Some(Words(atomic_words(&self.0)))
    }

    /// The words of a word storage, to read and write (relaxed atomic loads and stores);
    /// `Ok(None)` for other storage, and the error of a write to frozen storage when it is
    /// frozen (a constant of an executable).
    #[inline]
    pub fn words_for_write(&self) -> Result<Option<&[AtomicI64]>> {
        if !self.0.words {
            return Ok(None);
        }
        if self.is_frozen() {
            return Err(frozen(self.len()));
        }
        Ok(Some(atomic_words(&self.0)))
    }
}

/// A word storage's words, lent to read ([`Storage::words`]): loads only, so that a frozen
/// storage's words cannot be stored through it. (To store, [`Storage::words_for_write`].)
///
/// ```
/// # use relaxvm_core::{Device, Storage};
/// let s = Storage::alloc_words(2, Device::cpu(0)).unwrap();
/// assert_eq!(s.words().unwrap().load(1), 0);
/// ```
///
/// It has no way to store:
///
/// ```compile_fail
/// # use relaxvm_core::{Device, Storage};
/// let s = Storage::alloc_words(2, Device::cpu(0)).unwrap();
/// s.words().unwrap().store(1, 5);
/// ```
#[derive(Clone, Copy)]
pub struct Words<'a>(&'a [AtomicI64]);

impl<'a> Words<'a> {
    /// The number of words.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no words.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Word `i` (a relaxed atomic load). Panics when `i` is not below [`len`](Self::len), as
    /// slice indexing does.
    #[inline]
    pub fn load(&self, i: usize) -> i64 {
        self.0[i].load(Ordering::Relaxed)
    }

    /// The words in `range`, or `None` when it does not lie within these.
    #[inline]
    pub fn get(self, range: Range<usize>) -> Option<Words<'a>> {
        self.0.get(range).map(Words)
    }
}

/// Words lent to write may be read as well: a read-only view of them.
impl<'a> From<&'a [AtomicI64]> for Words<'a> {
    #[inline]
    fn from(words: &'a [AtomicI64]) -> Self {
        Words(words)
    }
}

/// A word storage's words.
#[inline]
fn atomic_words(block: &Block) -> &[AtomicI64] {
    // SAFETY: word storage is allocated by `alloc_words`: `len` is a multiple of 8 and `ptr`
    // is 64-byte aligned (a dangling, 8-aligned pointer for length 0), valid for `len` bytes
    // while the block lives, which `&Block` guarantees for the returned lifetime. `AtomicI64`
    // has the size and alignment of `i64` and is made of an `UnsafeCell`, so shared references
    // to it may be stored through; no Rust code makes a non-atomic reference to these bytes
    // (module docs), so every Rust access to them is an 8-byte atomic one.
    unsafe { std::slice::from_raw_parts(block.ptr.as_ptr().cast::<AtomicI64>(), block.len / 8) }
}

/// One 64-byte unit of a [`Snapshot`]: the copy is aligned as the storage is, so views of it
/// are aligned exactly as views of the storage would be.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; ALIGNMENT]);

/// A copy of a word storage's bytes, as a [`StorageRead`](super::StorageRead) of it shows them.
pub(super) struct Snapshot {
    lines: Vec<Line>,
    len: usize,
}

impl Snapshot {
    /// The words of `storage` (a word storage), loaded one by one.
    pub(super) fn of(storage: &Storage) -> Snapshot {
        let words = atomic_words(&storage.0);
        let mut copy =
            Snapshot { lines: vec![Line([0; ALIGNMENT]); storage.len().div_ceil(ALIGNMENT)], len: storage.len() };
        for (chunk, word) in copy.bytes_mut().chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
        copy
    }

    /// The bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `lines` holds `len.div_ceil(64)` lines of 64 initialised bytes each, so its
        // first `len` bytes are initialised and inside it; `Line` is `repr(C)` bytes.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, with the copy borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// [`Storage::write`] into word storage (held for writing; the range checked): each word the
/// range covers is stored, a partly covered one by [`patch_word`] (its other bytes stay as they
/// are at the store, even when a slot store, which does not take the state word, races with it).
pub(super) fn store_bytes(storage: &Storage, offset: usize, src: &[u8]) {
    let words = atomic_words(&storage.0);
    let end = offset + src.len();
    let mut at = offset;
    while at < end {
        let (word, start) = (at / 8, at % 8);
        let n = (8 - start).min(end - at);
        let mut bytes = [0; 8];
        bytes[start..start + n].copy_from_slice(&src[at - offset..at - offset + n]);
        patch_word(&words[word], bytes, |i| (start..start + n).contains(&i));
        at += n;
    }
}

/// [`Storage::write_with`] on word storage (held for writing): `f` runs on a copy, and the
/// bytes it changed are stored back by [`patch_word`] (only those, so that slots and bytes it
/// did not touch keep what an atomic store put there meanwhile).
pub(super) fn write_with<R>(storage: &Storage, f: impl FnOnce(&mut [u8]) -> R) -> R {
    let before = Snapshot::of(storage);
    let mut after = Snapshot { lines: before.lines.clone(), len: before.len };
    let r = f(after.bytes_mut());
    let words = atomic_words(&storage.0);
    for ((old, new), word) in before.bytes().chunks_exact(8).zip(after.bytes().chunks_exact(8)).zip(words) {
        if old != new {
            patch_word(word, new.try_into().expect("8 bytes"), |i| old[i] != new[i]);
        }
    }
    r
}

/// Stores into `word` the bytes of `new` that `take` selects, and its other bytes as they are
/// at the store: a plain store when all eight are taken, else a compare-and-swap loop, so that
/// a store racing with it (a builtin's slot store) is kept in the other bytes, not undone by a
/// store of the word as it was loaded before.
fn patch_word(word: &AtomicI64, new: [u8; 8], take: impl Fn(usize) -> bool) {
    if (0..8).all(&take) {
        word.store(i64::from_ne_bytes(new), Ordering::Relaxed);
        return;
    }
    let patch = |old: i64| {
        #[cfg(test)]
        tests::racing_store(word);
        let mut bytes = old.to_ne_bytes();
        (0..8).filter(|&i| take(i)).for_each(|i| bytes[i] = new[i]);
        Some(i64::from_ne_bytes(bytes))
    };
    // The closure never refuses, so this always succeeds.
    let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, patch);
}

#[cfg(test)]
mod tests;
