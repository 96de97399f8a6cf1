//! Small workspace blocks (below the size from which workspaces are mapped), kept per thread
//! once freed for the next workspaces of that thread.
//!
//! Attention kernels take and free small workspaces at every call: a decode step of the tiny
//! Llama (micro model, batch 1) made two 64-byte-aligned heap allocations (`posix_memalign`,
//! several times a plain `malloc`) and two frees a step, where TVM's per-thread workspace pool
//! hands the same blocks back. The policy is the mapped blocks' ([`Kept`]: the smallest kept
//! block that holds a request; a miss replaces the largest smaller one), with bounds of its own
//! per thread ([`MAX_BLOCKS`], [`MAX_BYTES`]); the blocks go back to the allocator when the
//! thread exits, and the unloading thread's when a library is unloaded
//! ([`super::mapped_blocks::release_for_unload`]). They are heap memory, not a library's: a
//! block kept across an unload stays valid and serves the next workspace of any library's
//! kernels on its thread. `RELAXVM_BLOCK_CACHE=0` (see [`relaxvm::block_cache`]) turns it off: memory
//! checkers then see each workspace allocated and freed.

use super::kept_blocks::{Block, Kept};
use std::alloc::Layout;
use std::cell::RefCell;

/// The most blocks a thread keeps.
pub(crate) const MAX_BLOCKS: usize = 8;
/// The most bytes a thread keeps.
pub(crate) const MAX_BYTES: usize = 512 << 10;

/// The alignment of every block (a workspace's, with its header).
const ALIGN: usize = relaxvm::storage::ALIGNMENT;

/// A thread's kept blocks, freed when the thread exits.
struct ThreadBlocks {
    kept: Kept,
    /// The thread's id, noted when it first keeps a block (tests count each thread's release
    /// at its exit, when the thread's handle may be gone already).
    #[cfg(test)]
    id: Option<std::thread::ThreadId>,
}

impl ThreadBlocks {
    /// Frees every kept block; returns how many.
    fn release(&mut self) -> usize {
        let blocks = self.kept.take_all();
        let n = blocks.len();
        for b in blocks {
            // SAFETY: every kept block came from `take_or_alloc` (through `give_back`'s
            // contract) and has no user while it is kept.
            unsafe { free(b) };
        }
        n
    }
}

impl Drop for ThreadBlocks {
    fn drop(&mut self) {
        let _freed = self.release();
        #[cfg(test)]
        if let Some(id) = self.id {
            tests::freed_at_exit(id, _freed);
        }
    }
}

thread_local! {
    static KEPT: RefCell<ThreadBlocks> = const {
        RefCell::new(ThreadBlocks {
            kept: Kept::new(MAX_BLOCKS, MAX_BYTES),
            #[cfg(test)]
            id: None,
        })
    };
}

/// The layout of a block of `len` bytes; `None` when no allocation can have it.
fn layout(len: usize) -> Option<Layout> {
    Layout::from_size_align(len, ALIGN).ok()
}

/// Frees a block that has left every cache and every user.
///
/// # Safety
/// `b` is a whole block `take_or_alloc` returned (allocated with `layout(b.len())`), which
/// nothing uses or frees after this.
unsafe fn free(b: Block) {
    // SAFETY: the caller's contract; `layout(b.len())` was valid, or the block would not have
    // been allocated.
    unsafe { std::alloc::dealloc(b.base(), Layout::from_size_align_unchecked(b.len(), ALIGN)) }
}

/// A block of at least `size` bytes (`size` > 0), 64-byte aligned, with its length: one this
/// thread kept when one holds it, else a new one; null when the allocator has none. Its bytes
/// are what its last user left (workspaces are not zeroed, as in TVM).
pub(crate) fn take_or_alloc(size: usize) -> (usize, *mut u8) {
    if relaxvm::block_cache::enabled() {
        // `try_with`: during the thread's exit the cache may be gone; allocate then.
        let taken = KEPT.try_with(|k| k.borrow_mut().kept.take(size));
        match taken {
            Ok(Ok(b)) => return (b.len(), b.base()),
            // SAFETY: a kept block (from `take_or_alloc`) that left the cache, unused.
            Ok(Err(Some(replaced))) => unsafe { free(replaced) },
            Ok(Err(None)) | Err(_) => {}
        }
    }
    let Some(layout) = layout(size.max(1)) else { return (size, std::ptr::null_mut()) };
    // SAFETY: the layout has a non-zero size.
    (layout.size(), unsafe { std::alloc::alloc(layout) })
}

/// Gives back a block [`take_or_alloc`] returned: kept by this thread, or freed.
///
/// # Safety
/// `base` and `len` are a block from `take_or_alloc` (on any thread), which nothing uses or
/// frees once this is called.
pub(crate) unsafe fn give_back(len: usize, base: *mut u8) {
    let block = Block::new(len, base);
    if !relaxvm::block_cache::enabled() {
        // SAFETY: the caller's contract: a block from `take_or_alloc`, unused.
        return unsafe { free(block) };
    }
    // A block's memory belongs to the global allocator, so any thread may keep or free it.
    let mut block = Some(block);
    let leaving = KEPT.try_with(|k| {
        let mut k = k.borrow_mut();
        #[cfg(test)]
        k.id.get_or_insert_with(|| std::thread::current().id());
        k.kept.insert_evicting(block.take().expect("given once"))
    });
    for b in leaving.unwrap_or_default().into_iter().chain(block) {
        // SAFETY: `block` (the caller's contract) or blocks kept before it: each from
        // `take_or_alloc`, and unused once it leaves the cache.
        unsafe { free(b) };
    }
}

/// Frees the blocks this thread keeps (a library's unloading: see
/// [`super::mapped_blocks::release_for_unload`]).
pub(crate) fn release_this_thread() {
    // During the thread's exit the cache may be gone (it frees its blocks itself then); a
    // borrow in progress cannot be (no workspace call unloads a library).
    let _ = KEPT.try_with(|k| {
        if let Ok(mut k) = k.try_borrow_mut() {
            k.release();
        }
    });
}

/// The number of blocks and bytes this thread keeps (for tests).
#[cfg(test)]
pub(crate) fn kept() -> (usize, usize) {
    KEPT.with(|k| k.borrow().kept.counts())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::thread::ThreadId;

    /// How many kept blocks each thread's exit freed, by thread (review R-pool-2: the release
    /// is counted, since no leak checker runs with the cache on; per thread, so other tests'
    /// threads and releases cannot make up for a thread whose exit freed nothing).
    static FREED_AT_EXIT: Mutex<Vec<(ThreadId, usize)>> = Mutex::new(Vec::new());

    pub(super) fn freed_at_exit(id: ThreadId, n: usize) {
        FREED_AT_EXIT.lock().unwrap_or_else(|p| p.into_inner()).push((id, n));
    }

    fn freed_at_exit_of(id: ThreadId) -> Vec<usize> {
        let all = FREED_AT_EXIT.lock().unwrap_or_else(|p| p.into_inner());
        all.iter().filter(|(t, _)| *t == id).map(|(_, n)| *n).collect()
    }

    #[test]
    fn a_thread_gets_its_freed_small_block_back_and_frees_them_when_it_exits() {
        // Each test runs on a thread of its own: this thread's cache is this test's.
        let thread = std::thread::spawn(|| {
            let (len, p) = take_or_alloc(1000);
            assert!(!p.is_null() && (p as usize).is_multiple_of(ALIGN) && len >= 1000);
            // SAFETY: the block holds `len` writable bytes; given back once, then not used.
            unsafe {
                std::ptr::write_bytes(p, 0x5a, len);
                give_back(len, p);
            }
            if !relaxvm::block_cache::enabled() {
                assert_eq!(kept(), (0, 0), "RELAXVM_BLOCK_CACHE=0: nothing is kept");
                return 0;
            }
            assert_eq!(kept(), (1, len));
            // A smaller request takes it, its bytes as left; a larger one replaces it.
            let (again_len, again) = take_or_alloc(64);
            assert_eq!((again_len, again), (len, p));
            // SAFETY: the block holds `len` bytes.
            assert_eq!(unsafe { *again.add(len - 1) }, 0x5a);
            // SAFETY: from take_or_alloc, given back once.
            unsafe { give_back(again_len, again) };
            let (big_len, big) = take_or_alloc(5000);
            assert!(big_len >= 5000);
            assert_eq!(kept(), (0, 0), "the smaller block made way for the new one");
            // SAFETY: from take_or_alloc, given back once.
            unsafe { give_back(big_len, big) };
            // Bounded: more blocks than the bound are freed, not kept.
            let blocks: Vec<_> = (0..MAX_BLOCKS + 3).map(|_| take_or_alloc(4096)).collect();
            for (len, p) in blocks {
                // SAFETY: each from take_or_alloc, given back once.
                unsafe { give_back(len, p) };
            }
            let (count, bytes) = kept();
            assert!(count == MAX_BLOCKS && bytes <= MAX_BYTES, "{count} blocks, {bytes} bytes");
            count
        });
        let id = thread.thread().id();
        let kept_at_exit = thread.join().unwrap();
        // The thread's exit freed exactly what it kept (its thread-local cache is dropped
        // before `join` returns).
        if relaxvm::block_cache::enabled() {
            assert_eq!(freed_at_exit_of(id), [kept_at_exit], "blocks freed at the exit");
        }
    }

    #[test]
    fn a_block_freed_on_another_thread_is_kept_there() {
        let (len, p) = take_or_alloc(3000);
        let addr = p as usize;
        std::thread::spawn(move || {
            // SAFETY: from take_or_alloc on the launching thread, given back once here.
            unsafe { give_back(len, addr as *mut u8) };
            if relaxvm::block_cache::enabled() {
                assert_eq!(kept(), (1, len));
                assert_eq!(take_or_alloc(3000), (len, addr as *mut u8));
                let (l, q) = take_or_alloc(3000);
                // SAFETY: from take_or_alloc, given back once.
                unsafe {
                    give_back(l, q);
                    give_back(len, addr as *mut u8);
                }
            }
        })
        .join()
        .unwrap();
    }
}
