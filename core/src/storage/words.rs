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
//! - [`Storage::words`] lends the words as `&[AtomicI64]`: shared references to atomics, which
//!   any number of threads may hold and load and store through at once. Every access by Rust
//!   code is thus atomic and of one size (8 bytes, at 8-byte-aligned addresses), so there is
//!   no data race in Rust's memory model whatever the interleaving: racing accesses give one
//!   of the values written, never a torn or undefined one.
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
//! write to any frozen storage gives.

use super::{frozen, Block, Storage, ALIGNMENT};
use crate::device::Device;
use crate::error::Result;
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

    /// The words of a word storage, for reading and, unless it is frozen, writing (relaxed
    /// atomic loads and stores); `None` for other storage. A frozen word storage's words must
    /// be written only after [`words_for_write`](Self::words_for_write) said they may be.
    #[inline]
    pub fn words(&self) -> Option<&[AtomicI64]> {
        if !self.0.words {
            return None;
        }
        Some(atomic_words(&self.0))
    }

    /// As [`words`](Self::words), to write: the error of a write to frozen storage when it is
    /// frozen (a constant of an executable).
    #[inline]
    pub fn words_for_write(&self) -> Result<Option<&[AtomicI64]>> {
        match self.words() {
            Some(_) if self.is_frozen() => Err(frozen(self.len())),
            words => Ok(words),
        }
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
/// range covers is stored, a partly covered word with its other bytes as loaded.
pub(super) fn store_bytes(storage: &Storage, offset: usize, src: &[u8]) {
    let words = atomic_words(&storage.0);
    let end = offset + src.len();
    let mut at = offset;
    while at < end {
        let (word, start) = (at / 8, at % 8);
        let n = (8 - start).min(end - at);
        let mut bytes = if n == 8 { [0; 8] } else { words[word].load(Ordering::Relaxed).to_ne_bytes() };
        bytes[start..start + n].copy_from_slice(&src[at - offset..at - offset + n]);
        words[word].store(i64::from_ne_bytes(bytes), Ordering::Relaxed);
        at += n;
    }
}

/// [`Storage::write_with`] on word storage (held for writing): `f` runs on a copy, and the
/// words it changed are stored back (only those, so that slots it did not touch keep what an
/// atomic store put there meanwhile).
pub(super) fn write_with<R>(storage: &Storage, f: impl FnOnce(&mut [u8]) -> R) -> R {
    let before = Snapshot::of(storage);
    let mut after = Snapshot { lines: before.lines.clone(), len: before.len };
    let r = f(after.bytes_mut());
    let words = atomic_words(&storage.0);
    for ((old, new), word) in before.bytes().chunks_exact(8).zip(after.bytes().chunks_exact(8)).zip(words) {
        if old != new {
            word.store(i64::from_ne_bytes(new.try_into().expect("8 bytes")), Ordering::Relaxed);
        }
    }
    r
}

#[cfg(test)]
mod tests;
