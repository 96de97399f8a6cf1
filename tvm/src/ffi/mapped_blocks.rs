//! Mapped workspace blocks, kept once freed for the next workspaces.
//!
//! Kernels take and free their large workspaces (a convolution's padded input) at every call.
//! Mapping and unmapping each one costs two system calls and a page fault per page touched:
//! resnet50 mapped 23 workspaces a call (32 MB, 7,862 page faults, 12–15 ms of system time and
//! more in the kernels that touched fresh pages), where TVM's workspace pool maps none after
//! the first call. So, as TVM's pool does, freed blocks are kept mapped (their pages resident)
//! and handed out again, by the policy of [`Kept`] (the smallest kept block that holds a
//! request; a miss replaces the largest smaller one), within [`MAX_BLOCKS`] blocks and
//! [`MAX_BYTES`] bytes.
//!
//! It is one cache for the process ([`PROCESS`]), not one per thread as in TVM: mapping itself
//! serializes on the process's address-space lock, so one lock here costs nothing mapping did
//! not, a block freed on a pool thread serves the next kernel on any thread, and a library's
//! unloading can give back every kept block at once ([`Cache::release_all`]) whichever threads
//! kept them. Threads share the kept blocks: kernels on two threads that run in turn share the
//! larger of their blocks, and kernels that run at once each get a block of their own, both kept
//! after the first round (tested); only more workspaces in use at once than the bounds hold
//! (8 blocks, 16 MiB) map and unmap again. `RELAXVM_BLOCK_CACHE=0` (see
//! [`relaxvm::block_cache`]) turns it off, as for storage blocks: every block is then mapped
//! for its request and unmapped when freed.

use super::kept_blocks::{Block, Kept};
use std::sync::Mutex;

/// The most blocks kept.
pub(crate) const MAX_BLOCKS: usize = 8;
/// The most bytes kept in all (a bigger block is never kept). What is kept stays resident, so it
/// adds to a run's memory: resnet50 keeps one block of 3.3 MB (its largest workspace), which
/// the first call's peak already held while that workspace was in use.
pub(crate) const MAX_BYTES: usize = 16 << 20;

/// The size mapped for a block: whole pages.
const PAGE: usize = 4096;

/// A cache of mapped blocks: a [`Kept`] policy over real mappings.
pub(crate) struct Cache(Mutex<Kept>);

/// The process's cache, which `TVMBackendAllocWorkspace` and `TVMBackendFreeWorkspace` use.
pub(crate) static PROCESS: Cache = Cache::new();

impl Cache {
    /// An empty cache.
    pub(crate) const fn new() -> Self {
        Cache(Mutex::new(Kept::new(MAX_BLOCKS, MAX_BYTES)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // Every critical section leaves the policy's state consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A mapped block of at least `size` bytes, with its length: a kept one when one holds it,
    /// else a new mapping of whole pages; null when the system has none. Its bytes are what its
    /// last user left (workspaces are not zeroed, as in TVM).
    pub(crate) fn take_or_map(&self, size: usize) -> (usize, *mut u8) {
        if relaxvm::block_cache::enabled() {
            let replaced = match self.lock().take(size) {
                Ok(b) => return (b.len(), b.base()),
                Err(replaced) => replaced,
            };
            // Unmapped outside the lock (a system call), before mapping its replacement.
            if let Some(b) = replaced {
                // SAFETY: every block the cache keeps came from `map` (through `give_back`'s
                // contract), and one that leaves it has no other user.
                unsafe { unmap(b) };
            }
        }
        map(size)
    }

    /// Gives back a block [`Cache::take_or_map`] returned: kept, or unmapped.
    ///
    /// # Safety
    /// `base` is the start of an anonymous read-write mapping of `len` bytes from
    /// `take_or_map`, which nothing uses or unmaps once this is called.
    pub(crate) unsafe fn give_back(&self, len: usize, base: *mut u8) {
        let block = Block::new(len, base);
        let leaving = if relaxvm::block_cache::enabled() { self.lock().insert_evicting(block) } else { vec![block] };
        for b in leaving {
            // SAFETY: `block` is a mapping from `map` that nothing uses (the caller's contract),
            // as is every block kept before it.
            unsafe { unmap(b) };
        }
    }

    /// Whether a kept block starts at `base` (tests of the workspace functions' wiring).
    #[cfg(test)]
    pub(crate) fn holds(&self, base: *mut u8) -> bool {
        self.lock().holds(base)
    }

    /// Unmaps every kept block.
    pub(crate) fn release_all(&self) {
        let blocks = self.lock().take_all();
        for b in blocks {
            // SAFETY: every kept block came from `map` and has no user while it is kept.
            unsafe { unmap(b) };
        }
    }

    /// The number of blocks and bytes kept (for tests).
    #[cfg(test)]
    pub(crate) fn kept(&self) -> (usize, usize) {
        self.lock().counts()
    }
}

/// A new anonymous mapping of `size` bytes rounded up to whole pages, with its length; null
/// when the system has none.
fn map(size: usize) -> (usize, *mut u8) {
    let Some(len) = size.max(1).checked_next_multiple_of(PAGE) else { return (size, std::ptr::null_mut()) };
    // SAFETY: an anonymous private mapping of a non-zero size at an address the system picks:
    // no existing memory is touched. The result is page-aligned.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        (len, std::ptr::null_mut())
    } else {
        (len, p.cast::<u8>())
    }
}

/// Unmaps a block that has left every cache and every user.
///
/// # Safety
/// `b` is a whole mapping `map` returned, which nothing uses or unmaps after this.
unsafe fn unmap(b: Block) {
    // SAFETY: the caller's contract: a mapping of `b.len()` bytes at `b.base()`, unused.
    unsafe { libc::munmap(b.base().cast(), b.len()) };
}

/// Gives back the kept workspace blocks when dropped: a library holds one, so that its
/// unloading (when the last VM or kernel of it goes) releases what its kernels' workspaces
/// left ([`release_for_unload`]).
#[derive(Default)]
pub(crate) struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release_for_unload(&PROCESS);
    }
}

/// What a library's unloading gives back: every block `cache` keeps — whichever threads kept
/// them and whichever library's kernels used them: the cache is one for the process, so the
/// kernels of libraries still loaded map their workspaces again at their next call — and the small blocks the unloading thread keeps ([`super::small_blocks`]; the
/// unloading thread drops the library's last holder, a VM or kernel handle: usually the thread
/// that called its kernels). Other threads (the pool's) keep their small blocks until they exit,
/// at most 512 KiB each: heap memory, not the library's, which stays valid and serves any
/// library's next workspaces on that thread (tested).
pub(crate) fn release_for_unload(cache: &Cache) {
    cache.release_all();
    super::small_blocks::release_this_thread();
}

#[cfg(test)]
#[path = "mapped_blocks_tests.rs"]
mod tests;
