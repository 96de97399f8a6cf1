//! Mapped workspace blocks kept for the next workspace of about the same size.
//!
//! Kernels take and free their large workspaces (a convolution's padded input) at every call;
//! mapping and unmapping each one costs two system calls and a page fault per page touched,
//! which for a small model's kernel can cost more than its arithmetic. Like TVM's workspace
//! pool, a few freed blocks are kept mapped (their pages resident) and handed out again. The
//! cache is bounded ([`MAX_BLOCKS`] blocks, [`MAX_BYTES`] in all) so that what it keeps stays
//! small next to the blocks in use, and a block is handed out only for a request it fits
//! with little room to spare, so a small request never pins a large block. It is one cache
//! for the process, not one per thread: mapping itself serializes on the process's
//! address-space lock, so one lock here costs nothing mapping did not, a block freed on a pool
//! thread serves the next kernel on any thread, and a library's unloading can give back every
//! kept block at once ([`release_all`]) whichever threads kept them.
//! `RELAXVM_BLOCK_CACHE=0` (see [`relaxvm::block_cache`]) turns it off, as for storage blocks.

use std::sync::Mutex;

/// The most blocks kept.
pub(crate) const MAX_BLOCKS: usize = 4;
/// The most bytes kept in all (a block bigger than this is never kept). What is kept stays
/// resident while the next kernels run, so it adds to a run's peak memory: with 8 MiB,
/// resnet50's first call peaked 5.6 MB higher (28.6 against 23.0 MB; TVM's 26.8).
pub(crate) const MAX_BYTES: usize = 2 << 20;

/// A kept block: its mapped size and start. The pointer is only an address here: the cache
/// owns the mapping and nothing else uses it while it is kept.
struct Block(usize, *mut u8);

// SAFETY: a kept block is an anonymous mapping no thread uses (see `keep`'s contract); it may
// be handed to, or unmapped by, any thread.
unsafe impl Send for Block {}

struct Kept {
    blocks: Vec<Block>,
    bytes: usize,
}

static KEPT: Mutex<Kept> = Mutex::new(Kept { blocks: Vec::new(), bytes: 0 });

fn lock() -> std::sync::MutexGuard<'static, Kept> {
    KEPT.lock().unwrap_or_else(|p| p.into_inner())
}

/// A kept block for a request of `size` bytes: the smallest one of at least `size` and at
/// most a quarter more, with its mapped size; `None` when none fits. Its bytes are what its
/// last user left (workspaces are not zeroed, as in TVM).
pub(crate) fn take(size: usize) -> Option<(usize, *mut u8)> {
    if !relaxvm::block_cache::enabled() {
        return None;
    }
    let mut kept = lock();
    let fits = |b: &Block| b.0 >= size && b.0 - size <= size / 4;
    let i = (0..kept.blocks.len()).filter(|&i| fits(&kept.blocks[i])).min_by_key(|&i| kept.blocks[i].0)?;
    let Block(len, base) = kept.blocks.swap_remove(i);
    kept.bytes -= len;
    Some((len, base))
}

/// Keeps the mapped block of `len` bytes at `base`; false (the caller then unmaps it) when the
/// cache is full or turned off.
///
/// # Safety
/// `base` is the start of an anonymous read-write mapping of `len` bytes that nothing uses or
/// unmaps once this returns true.
pub(crate) unsafe fn keep(len: usize, base: *mut u8) -> bool {
    if !relaxvm::block_cache::enabled() {
        return false;
    }
    let mut kept = lock();
    if kept.blocks.len() >= MAX_BLOCKS || kept.bytes + len > MAX_BYTES {
        return false;
    }
    kept.bytes += len;
    kept.blocks.push(Block(len, base));
    true
}

/// Unmaps every kept block.
pub(crate) fn release_all() {
    let blocks = {
        let mut kept = lock();
        kept.bytes = 0;
        std::mem::take(&mut kept.blocks)
    };
    for Block(len, base) in blocks {
        // SAFETY: a kept block is a mapping of `len` bytes that only the cache held (`keep`'s
        // contract), and it has just left the cache.
        unsafe { libc::munmap(base.cast(), len) };
    }
}

/// The number of blocks and bytes kept (for tests).
#[cfg(test)]
pub(crate) fn kept() -> (usize, usize) {
    let kept = lock();
    (kept.blocks.len(), kept.bytes)
}

/// Gives back every kept block when dropped: a library holds one, so that its unloading
/// (when the last VM or kernel of it goes) unmaps what its kernels' workspaces left.
#[derive(Default)]
pub(crate) struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release_all();
    }
}
