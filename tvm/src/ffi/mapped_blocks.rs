//! Mapped workspace blocks, kept once freed for the next workspaces.
//!
//! Kernels take and free their large workspaces (a convolution's padded input) at every call.
//! Mapping and unmapping each one costs two system calls and a page fault per page touched:
//! resnet50 mapped 23 workspaces a call (32 MB, 7,862 page faults, 12–15 ms of system time and
//! more in the kernels that touched fresh pages), where TVM's workspace pool maps none after
//! the first call. So, as TVM's pool does, freed blocks are kept mapped (their pages resident)
//! and handed out again:
//! - a request gets the *smallest* kept block that holds it, however much larger (TVM's rule:
//!   kernels that run one after another then share one block, the largest they need);
//! - a request that no kept block holds makes a new mapping, and the largest kept block smaller
//!   than it leaves the cache (is unmapped): the new block replaces it, as TVM's pool frees a
//!   too-small block before allocating a larger one. What is kept therefore tracks the largest
//!   workspaces in use at once instead of piling up one block per size;
//! - the cache is bounded ([`MAX_BLOCKS`] blocks, [`MAX_BYTES`] in all: TVM's pool is not):
//!   a freed block that does not fit evicts smaller kept blocks, or is unmapped itself when
//!   only blocks at least as large are kept.
//!
//! It is one cache for the process ([`PROCESS`]), not one per thread as in TVM: mapping itself
//! serializes on the process's address-space lock, so one lock here costs nothing mapping did
//! not, a block freed on a pool thread serves the next kernel on any thread, and a library's
//! unloading can give back every kept block at once ([`Cache::release_all`]) whichever threads
//! kept them. `RELAXVM_BLOCK_CACHE=0` (see [`relaxvm::block_cache`]) turns it off, as for
//! storage blocks: every block is then mapped for its request and unmapped when freed.
//!
//! The policy ([`Kept`]) is a plain value, tested apart from the mappings ([`Cache`]).

use std::sync::Mutex;

/// The most blocks kept.
pub(crate) const MAX_BLOCKS: usize = 8;
/// The most bytes kept in all (a bigger block is never kept). What is kept stays resident, so it
/// adds to a run's memory: resnet50 keeps one block of 3.3 MB (its largest workspace), which
/// the first call's peak already held while that workspace was in use.
pub(crate) const MAX_BYTES: usize = 16 << 20;

/// The size mapped for a block: whole pages.
const PAGE: usize = 4096;

/// A block of memory (a mapping here; a heap block in `services`' cache of small workspaces):
/// its length and start. The pointer is only an address here: whoever holds the `Block` (the
/// cache, or a kernel's workspace) owns the memory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) len: usize,
    pub(crate) base: *mut u8,
}

// SAFETY: a block is an anonymous mapping or a block of the global allocator, which any thread
// may use or release; whoever holds the `Block` is its one user.
unsafe impl Send for Block {}

/// The kept blocks, smallest first, and their bytes in all, within bounds: at most
/// `max_blocks` blocks and `max_bytes` bytes. The policy only: what leaves it is released by
/// the caller (unmapped here, freed by `services`' cache of small workspaces).
pub(crate) struct Kept {
    blocks: Vec<Block>,
    bytes: usize,
    max_blocks: usize,
    max_bytes: usize,
}

impl Kept {
    /// An empty cache with these bounds.
    pub(crate) const fn new(max_blocks: usize, max_bytes: usize) -> Self {
        Kept { blocks: Vec::new(), bytes: 0, max_blocks, max_bytes }
    }

    /// For a request of `size` bytes: the smallest kept block of at least `size` bytes, which
    /// leaves the cache; else `Err` with the largest kept block (all are smaller than `size`),
    /// which leaves too (the caller unmaps it: the new mapping replaces it), if any.
    pub(crate) fn take(&mut self, size: usize) -> Result<Block, Option<Block>> {
        match self.blocks.iter().position(|b| b.len >= size) {
            Some(i) => {
                let b = self.blocks.remove(i);
                self.bytes -= b.len;
                Ok(b)
            }
            None => {
                let b = self.blocks.pop();
                self.bytes -= b.as_ref().map_or(0, |b| b.len);
                Err(b)
            }
        }
    }

    /// Keeps `block`, making room by evicting the smallest kept blocks when they are smaller
    /// than it; what leaves the cache (evicted blocks, or `block` itself when it cannot be kept:
    /// bigger than the cache's byte bound, or only blocks at least as large could make room),
    /// for the caller to release.
    pub(crate) fn keep(&mut self, block: Block) -> Vec<Block> {
        let (max_blocks, max_bytes) = (self.max_blocks, self.max_bytes);
        let full = |count: usize, bytes: usize| count >= max_blocks || bytes + block.len > max_bytes;
        // The smallest blocks whose eviction makes room: all must be smaller than `block`.
        let (mut evict, mut freed) = (0, 0);
        while full(self.blocks.len() - evict, self.bytes - freed) {
            match self.blocks.get(evict) {
                Some(b) if b.len < block.len => {
                    freed += b.len;
                    evict += 1;
                }
                _ => return vec![block],
            }
        }
        let out: Vec<Block> = self.blocks.drain(..evict).collect();
        self.bytes -= freed;
        // After blocks of its size: the oldest of a size is evicted first.
        let at = self.blocks.partition_point(|b| b.len <= block.len);
        self.bytes += block.len;
        self.blocks.insert(at, block);
        out
    }

    /// Every kept block, leaving the cache empty.
    pub(crate) fn take_all(&mut self) -> Vec<Block> {
        self.bytes = 0;
        std::mem::take(&mut self.blocks)
    }

    /// The number of blocks and bytes kept (for tests).
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.blocks.len(), self.bytes)
    }
}

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
                Ok(b) => return (b.len, b.base),
                Err(replaced) => replaced,
            };
            // Unmapped outside the lock (a system call), before mapping its replacement.
            if let Some(b) = replaced {
                unmap(b);
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
        let block = Block { len, base };
        let leaving = if relaxvm::block_cache::enabled() { self.lock().keep(block) } else { vec![block] };
        for b in leaving {
            unmap(b);
        }
    }

    /// Whether a kept block starts at `base` (tests of the workspace functions' wiring).
    #[cfg(test)]
    pub(crate) fn holds(&self, base: *mut u8) -> bool {
        self.lock().blocks.iter().any(|b| b.base == base)
    }

    /// Unmaps every kept block.
    pub(crate) fn release_all(&self) {
        let blocks = self.lock().take_all();
        for b in blocks {
            unmap(b);
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
fn unmap(b: Block) {
    // SAFETY: `b` is a mapping of `b.len` bytes made by `map` that its holder — the caller, to
    // whom it was handed as leaving its cache or freed by its kernel — no longer uses.
    unsafe { libc::munmap(b.base.cast(), b.len) };
}

/// Gives back every block [`PROCESS`] keeps when dropped: a library holds one, so that its
/// unloading (when the last VM or kernel of it goes) unmaps what its kernels' workspaces left.
#[derive(Default)]
pub(crate) struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        PROCESS.release_all();
    }
}

#[cfg(test)]
#[path = "mapped_blocks_tests.rs"]
mod tests;
