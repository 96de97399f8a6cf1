//! Reference-counted blocks of memory that tensors view.
//!
//! A [`Storage`] is either memory we allocated (64-byte aligned, zeroed) or memory owned by
//! someone else — a numpy array, a memory-mapped executable file, a `Vec` produced by ndarray —
//! kept alive by an owner object for as long as any tensor views it.
//!
//! # Sharing and writes
//!
//! Storage is shared (tensors, registers, threads and numpy all hold the same block), and the
//! destination-passing style of TVM programs means builtins write into tensors that others hold.
//! The memory is therefore interior-mutable, and safe code reaches it only through two doors
//! that exclude each other with an atomic state word, the way `RefCell` does across threads:
//!
//! - [`Storage::bytes`] returns a [`StorageRead`] guard; while any guard lives, no safe write
//!   happens. (A reader that meets a write in progress waits for its copy to end; writes never
//!   hold the state for longer than one `memcpy`, so the wait is short and cannot deadlock.)
//! - [`Storage::write`] copies bytes in, and fails with an error — it never waits — when a
//!   reader is active (even on the same thread) or when the storage is frozen.
//!   [`Storage::write_with`] holds the bytes the same way for a closure's few reads and writes,
//!   and [`Storage::read_with`] for a closure's reads (as a writer when the block is free: one
//!   atomic operation instead of a reader's two).
//!
//! A storage is frozen ([`Storage::freeze`]) when it becomes a constant of an executable: every
//! VM and thread shares constants, so a write to one would change every program's results.
//! A constant's bytes also live in pages the hardware refuses to write ([`read_only`]; such a
//! storage is *sealed*), so that native code, which writes through raw pointers, cannot change
//! them either. Read-only foreign memory (a DLPack import flagged read-only) is frozen but not
//! sealed: foreign code gets a private copy of it.
//!
//! *Word storage* ([`Storage::alloc_words`], the shape heap's: see [`words`]) keeps this
//! protocol for every door above, but Rust code never holds a reference to its bytes: the
//! doors hand out copies, and its 64-bit words are also read and written, without the state
//! word, through atomic operations ([`Storage::words`] to read, [`Storage::words_for_write`] to
//! write, which a frozen storage refuses).
//!
//! Raw pointers ([`Storage::as_ptr`]) are for foreign code — native kernels, numpy, DLPack
//! consumers — whose writes run under `unsafe` contracts of their own: such code may write
//! only into storage that is not frozen and that no Rust reader holds at the time.

use crate::device::Device;
use crate::error::{Error, Result};
use std::alloc::Layout;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub mod block_cache;
pub mod read_only;
pub mod words;

/// The alignment of memory the runtime allocates (a cache line; what DLPack consumers expect).
pub const ALIGNMENT: usize = 64;

/// The state word's value while a write copies bytes in; below it, the number of readers.
const WRITING: usize = usize::MAX;

/// A shared block of device memory.
#[derive(Clone)]
pub struct Storage(Arc<Block>);

struct Block {
    ptr: NonNull<u8>,
    len: usize,
    device: Device,
    owner: Owner,
    /// Readers holding a [`StorageRead`], or [`WRITING`].
    state: AtomicUsize,
    /// Set once, never cleared: the bytes are a constant and refuse writes.
    frozen: AtomicBool,
    /// The bytes lie in [`read_only::ReadOnlyPages`] (always frozen too).
    sealed: bool,
    /// Where the call site that keeps this block last found the tensor headers viewing it
    /// (`Tensor::site_storage_is_free`, `value/site_views.rs`): a hint, so relaxed.
    views: AtomicU64,
    /// Word storage ([`words`]): set once, before a second handle exists, never cleared.
    words: bool,
}

enum Owner {
    /// Allocated here: `base` (null when `len` is 0) came from the global allocator with
    /// [`padded_layout`]`(len)`, and `ptr` is its first 64-byte boundary; freed (or kept for
    /// reuse by [`crate::block_cache`]) on drop.
    Aligned {
        /// The allocation's start.
        base: *mut u8,
    },
    /// Memory owned by this object; `ptr` stays valid while it lives.
    External(#[allow(dead_code)] Box<dyn Any + Send + Sync>),
}

// SAFETY: `Block` only holds a pointer into memory that it owns (Aligned) or that its owner
// keeps alive (External, whose owner is itself Send + Sync); moving it to another thread moves
// nothing that is tied to the creating thread.
unsafe impl Send for Block {}
// SAFETY: shared access from several threads goes through the `state` protocol (module docs):
// `bytes` hands out `&[u8]` only while `state` counts it as a reader, and `write` mutates only
// after swapping `state` from 0 (no readers) to WRITING, so no `&[u8]` aliases a safe write.
// Word storage's bytes are reached by Rust only through 8-byte atomics (`words`): its doors
// hand out copies, so no reference to them exists for an atomic store to race with.
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        if let Owner::Aligned { base } = self.owner {
            if !base.is_null() {
                let layout = padded_layout(self.len).expect("layout was valid");
                // SAFETY: `base` came from the global allocator with exactly this layout (see
                // `alloc`), and this block, its one owner, is going away.
                if !unsafe { block_cache::keep(layout.size(), base) } {
                    // SAFETY: as above; the cache did not take it.
                    unsafe { std::alloc::dealloc(base, layout) }
                }
            }
        }
    }
}

impl Block {
    fn new(ptr: NonNull<u8>, len: usize, device: Device, owner: Owner) -> Self {
        Block {
            ptr,
            len,
            device,
            owner,
            state: AtomicUsize::new(0),
            frozen: AtomicBool::new(false),
            sealed: false,
            views: AtomicU64::new(u64::MAX),
            words: false,
        }
    }
}

/// The alignment the allocator gives without being asked (what `malloc` guarantees on 64-bit
/// targets).
pub(crate) const MALLOC_ALIGN: usize = 16;

/// The bytes allocated beyond a storage's length, to reach a 64-byte boundary.
pub(crate) const PADDING: usize = ALIGNMENT - MALLOC_ALIGN;

/// The layout allocated for `len` bytes at a 64-byte boundary: `len` plus room to reach the
/// boundary, at the allocator's natural alignment. Asking the allocator for 64-byte alignment
/// itself (`posix_memalign`) splits chunks and costs several times a plain `calloc`, which
/// mattered for the small per-call storage of compiled models.
fn padded_layout(len: usize) -> Result<Layout> {
    len.checked_add(PADDING)
        .and_then(|size| Layout::from_size_align(size, MALLOC_ALIGN).ok())
        .ok_or_else(|| beyond_address_space(len as u128))
}

/// The one error for a storage size no allocation can have (every size check returns it).
fn beyond_address_space(nbytes: u128) -> Error {
    Error::alloc(nbytes, "size exceeds the address space")
}

impl Storage {
    /// Allocates `nbytes` zeroed bytes, 64-byte aligned, on `device`. Fails with an error,
    /// never aborts, when the memory cannot be had.
    pub fn alloc(nbytes: usize, device: Device) -> Result<Self> {
        if nbytes == 0 {
            let owner = Owner::Aligned { base: std::ptr::null_mut() };
            return Ok(Storage(Arc::new(Block::new(NonNull::<u64>::dangling().cast(), 0, device, owner))));
        }
        let layout = padded_layout(nbytes)?;
        // A block of this size freed on this thread, zeroed again, else a new one.
        let base = block_cache::take_zeroed(layout.size()).unwrap_or_else(|| {
            // SAFETY: the layout has a non-zero size (`nbytes` > 0).
            unsafe { std::alloc::alloc_zeroed(layout) }
        });
        let Some(start) = NonNull::new(base) else {
            return Err(Error::alloc(nbytes as u128, "out of memory"));
        };
        // The allocation is MALLOC_ALIGN-aligned, so the next 64-byte boundary lies at most
        // ALIGNMENT - MALLOC_ALIGN bytes in, and `nbytes` bytes from it fit in `layout.size()`.
        let pad = base.align_offset(ALIGNMENT);
        debug_assert!(pad <= ALIGNMENT - MALLOC_ALIGN);
        // SAFETY: `pad` <= ALIGNMENT - MALLOC_ALIGN keeps the pointer inside the allocation.
        let ptr = unsafe { start.add(pad) };
        Ok(Storage(Arc::new(Block::new(ptr, nbytes, device, Owner::Aligned { base }))))
    }

    /// Allocates `nbytes` (64-byte aligned) and lets `fill` write them before any other handle
    /// to the storage exists. Fails, never aborts, when the memory cannot be had.
    pub fn alloc_filled(nbytes: usize, device: Device, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<Self> {
        let storage = Storage::alloc(nbytes, device)?;
        // SAFETY: the storage was just allocated: this is its only handle, no `StorageRead`
        // exists and no raw pointer escaped, so this is the one reference to its `nbytes`
        // valid bytes (a dangling, aligned pointer when there are none) until `fill` returns.
        let buf = unsafe { std::slice::from_raw_parts_mut(storage.as_ptr(), nbytes) };
        fill(buf)?;
        Ok(storage)
    }

    /// Allocates storage for a size given as a signed or oversized number, with a clear error for
    /// negative sizes and sizes beyond the address space.
    pub fn alloc_checked(nbytes: i128, device: Device) -> Result<Self> {
        if nbytes < 0 {
            return Err(Error::value(format!("storage size must be non-negative, got {nbytes}")));
        }
        let n = usize::try_from(nbytes).map_err(|_| beyond_address_space(nbytes as u128))?;
        if n > isize::MAX as usize - ALIGNMENT {
            return Err(beyond_address_space(n as u128));
        }
        Storage::alloc(n, device)
    }

    /// Takes ownership of a vector of plain elements without copying it.
    pub fn from_vec<T: Copy + Send + Sync + 'static>(v: Vec<T>) -> Self {
        let mut v = std::mem::ManuallyDrop::new(v);
        let len = v.len() * std::mem::size_of::<T>();
        let ptr = NonNull::new(v.as_mut_ptr().cast::<u8>()).expect("Vec pointer is non-null");
        // SAFETY: rebuilding the same Vec (pointer, length, capacity) that we just leaked; the
        // owner keeps it alive, and it is dropped exactly once, with the Block.
        let owner = unsafe { Vec::from_raw_parts(v.as_mut_ptr(), v.len(), v.capacity()) };
        Storage(Arc::new(Block::new(ptr, len, Device::cpu(0), Owner::External(Box::new(owner)))))
    }

    /// Wraps memory owned by `owner`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as `owner` is alive,
    /// and must not be freed by anyone but `owner`'s destructor. The read/write exclusion of
    /// [`Storage::bytes`] and [`Storage::write`] is per storage: while this storage's bytes are
    /// read, nothing else — another `Storage` over the same memory, numpy, a kernel — may write
    /// them (for memory that others write, freeze the storage or make sure of it otherwise).
    pub unsafe fn from_external(
        ptr: NonNull<u8>,
        len: usize,
        device: Device,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        Storage(Arc::new(Block::new(ptr, len, device, Owner::External(owner))))
    }

    /// A frozen, sealed storage of the `len` bytes at `offset` in read-only `pages` (which it
    /// keeps mapped); an error when the range does not lie inside them.
    pub fn from_read_only_pages(pages: Arc<read_only::ReadOnlyPages>, offset: usize, len: usize) -> Result<Self> {
        if offset.checked_add(len).is_none_or(|end| end > pages.len()) {
            return Err(Error::index("read-only pages", offset.saturating_add(len) as i64, pages.len()));
        }
        // SAFETY: `offset` <= the pages' length (checked above), so the pointer stays inside
        // the mapping or one past its end (when `len` is 0).
        let ptr = unsafe { pages.as_ptr().add(offset) };
        let mut block = Block::new(ptr, len, Device::cpu(0), Owner::External(Box::new(pages)));
        block.sealed = true;
        *block.frozen.get_mut() = true;
        Ok(Storage(Arc::new(block)))
    }

    /// The size in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True when the storage holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// The device the memory lives on.
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// The start of the memory.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.0.ptr.as_ptr()
    }

    /// True when both handles share one block.
    pub fn ptr_eq(&self, other: &Storage) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// True when this is the only handle to the block (no tensor, array or other handle
    /// shares it): a cache holding it may then hand it out again. Whatever other handles did
    /// with the bytes before they were dropped happens before this returns true.
    pub fn is_sole(&self) -> bool {
        sole(&self.0)
    }

    /// How many handles share the block, this one included (a snapshot: other threads may
    /// drop theirs meanwhile). A cache that accounts for every other holder
    /// (`Tensor::site_storage_is_free`) may hand the block out again.
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// Where the call site keeping this block last found the headers viewing it: a hint
    /// `Tensor::site_storage_is_free` keeps with the block (one per site, since each site
    /// keeps its own block), read and written relaxed.
    pub(crate) fn views_hint(&self) -> &AtomicU64 {
        &self.0.views
    }

    /// The bytes, read-only, for as long as the guard lives (safe writes wait for it to drop).
    pub fn bytes(&self) -> StorageRead<'_> {
        let state = &self.0.state;
        let mut spins = 0u32;
        loop {
            let n = state.load(Ordering::Relaxed);
            // A write in progress holds the state for one memcpy: wait for it. (One reader
            // short of WRITING waits too, so the count can never reach the sentinel.)
            if n >= WRITING - 1 {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            if state.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return StorageRead { storage: self, copy: self.0.words.then(|| words::Snapshot::of(self)) };
            }
        }
    }

    /// Copies `src` into the storage at `offset`. Fails, without waiting, when the storage is
    /// frozen (a constant), when a reader holds its bytes, or when the range is out of bounds.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        let end = offset.checked_add(src.len()).filter(|e| *e <= self.len());
        if end.is_none() {
            return Err(Error::index("storage bytes", offset.saturating_add(src.len()) as i64, self.len()));
        }
        let held = self.take_for_write(src.len())?;
        if self.0.words {
            words::store_bytes(self, offset, src);
            return Ok(());
        }
        // SAFETY: the range [offset, offset + src.len()) lies inside the block (checked above),
        // and holding WRITING means no `StorageRead` of this block exists, so `src` is not a
        // view of these bytes and no `&[u8]` aliases the destination while we copy.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.as_ptr().add(offset), src.len()) };
        drop(held);
        Ok(())
    }

    /// Runs `f` on the bytes, writable, holding them as a write does (and failing as
    /// [`write`](Self::write) does, without waiting). For a few word-sized reads and writes
    /// together, e.g. a shape heap's slots: the state word is then taken once for all of them,
    /// one atomic operation in all. `f` must be as short as a `memcpy` (readers wait for it)
    /// and must not reach this storage through another handle (a read would wait for itself).
    // Inline (with `read_with` and the accessors they call): the shape-heap builtins of another
    // crate call these per `match_shape`/`make_shape`, and without the hint LLVM kept them out
    // of line there once storage moved to this crate (about 90 instructions per shape-heap triple).
    #[inline]
    pub fn write_with<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let held = self.take_for_write(self.len())?;
        if self.0.words {
            return Ok(words::write_with(self, f));
        }
        // SAFETY: holding WRITING means no `StorageRead` of this block exists and no other safe
        // write runs, so this is the only reference to its `len` valid bytes until `held` drops
        // (after `f` returns, or as `f` unwinds).
        let r = f(unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.len()) });
        drop(held);
        Ok(r)
    }

    /// The block held for a write of `nbytes`; an error when it is frozen or read.
    #[inline]
    fn take_for_write(&self, nbytes: usize) -> Result<Exclusive<'_>> {
        if self.is_frozen() {
            return Err(frozen(nbytes));
        }
        Exclusive::take(&self.0).ok_or_else(|| {
            Error::value(
                "cannot write to a tensor whose bytes are being read (the destination overlaps a source, or another thread reads it)",
            )
        })
    }

    /// Runs `f` on the bytes, read-only. When no one reads or writes them, they are held as a
    /// write holds them (one atomic operation, where a [`StorageRead`] takes two); otherwise
    /// as a reader. Word storage ([`words`]) is always held as a reader and `f` gets a copy of
    /// its words, allocated and loaded on every call (read a word storage's slots through
    /// [`Storage::words`] where that cost matters). The same rules as for
    /// [`write_with`](Self::write_with) apply to `f`.
    #[inline]
    pub fn read_with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if self.0.words {
            return f(&self.bytes());
        }
        match Exclusive::take(&self.0) {
            Some(held) => {
                // SAFETY: as in `write_with`: nothing else reads or writes the bytes while
                // `held` lives.
                let r = f(unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len()) });
                drop(held);
                r
            }
            None => f(&self.bytes()),
        }
    }

    /// Makes the storage read-only for good: safe writes fail from now on, and foreign code
    /// must not write either (constants shared by every VM and thread are frozen).
    pub fn freeze(&self) {
        self.0.frozen.store(true, Ordering::Release);
    }

    /// True once [`Storage::freeze`] was called (always for a sealed storage).
    #[inline]
    pub fn is_frozen(&self) -> bool {
        self.0.frozen.load(Ordering::Acquire)
    }

    /// True when the bytes lie in pages mapped read-only ([`Storage::from_read_only_pages`]):
    /// a write by any code, native code included, faults instead of changing them. Frozen
    /// storage that is not sealed (read-only foreign memory) must be copied before native code
    /// that may write it gets it.
    pub fn is_sealed(&self) -> bool {
        self.0.sealed
    }
}

/// The error of a write to frozen storage, `nbytes` long.
#[cold]
fn frozen(nbytes: usize) -> Error {
    Error::value(format!(
        "cannot write to {nbytes} bytes of read-only storage (a constant of an executable, or read-only memory)"
    ))
}

/// True when `arc` is the only strong handle to its value. No weak handles are made of the
/// runtime's `Arc`s, so none can become strong meanwhile; the fence orders this thread's later
/// accesses after everything the other handles did before their release-decrement (as `Arc`'s
/// own drop does).
pub(crate) fn sole<T>(arc: &Arc<T>) -> bool {
    let sole = Arc::strong_count(arc) == 1;
    if sole {
        std::sync::atomic::fence(Ordering::Acquire);
    }
    sole
}

/// The state word of a block held at [`WRITING`]: by a write, or by a short read that found
/// the block free. Dropping it (also while unwinding) lets readers and writers in again.
struct Exclusive<'a>(&'a Block);

impl<'a> Exclusive<'a> {
    /// Takes the block if no one reads or writes it, without waiting.
    #[inline]
    fn take(block: &'a Block) -> Option<Self> {
        block.state.compare_exchange(0, WRITING, Ordering::Acquire, Ordering::Relaxed).ok().map(|_| Exclusive(block))
    }
}

impl Drop for Exclusive<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.state.store(0, Ordering::Release);
    }
}

/// Read access to a storage's bytes; safe writes to the storage fail while it lives. For word
/// storage, the bytes are a copy taken when the guard was made ([`words`]).
pub struct StorageRead<'a> {
    storage: &'a Storage,
    copy: Option<words::Snapshot>,
}

impl std::ops::Deref for StorageRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if let Some(copy) = &self.copy {
            return copy.bytes();
        }
        let block = &self.storage.0;
        // SAFETY: `ptr` is valid for `len` bytes while the block lives, which is at least as
        // long as `'a`; this guard is counted in `state`, so no safe write runs until it drops.
        unsafe { std::slice::from_raw_parts(block.ptr.as_ptr(), block.len) }
    }
}

impl Drop for StorageRead<'_> {
    fn drop(&mut self) {
        self.storage.0.state.fetch_sub(1, Ordering::Release);
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({} bytes on {})", self.len(), self.device())
    }
}

#[cfg(test)]
mod tests;
