//! The policy of the workspace caches: which freed blocks are kept for the next workspaces and
//! which leave. Both the process's cache of mapped blocks ([`super::mapped_blocks`]) and each
//! thread's cache of small heap blocks ([`super::small_blocks`]) keep their blocks by it, with
//! bounds of their own, as TVM's `WorkspacePool` keeps its blocks:
//! - a request gets the *smallest* kept block that holds it, however much larger (kernels that
//!   run one after another then share one block, the largest they need);
//! - a request that no kept block holds leaves the cache with the largest kept block smaller
//!   than it, which the caller releases: the new block replaces it, as TVM's pool frees a
//!   too-small block before allocating a larger one;
//! - the cache is bounded (blocks and bytes: TVM's pool is not): a block given back that does
//!   not fit evicts smaller kept blocks, or leaves itself when only blocks at least as large
//!   are kept.
//!
//! The policy never touches a block's memory: it holds addresses and lengths, and hands back
//! what leaves it for the cache that made the block to release.

/// A block of memory: its start and length. Only an address here: nothing reachable through
/// safe code reads, writes or releases the memory at `base` (the caches' release functions,
/// `mapped_blocks::unmap` and `small_blocks::free`, are `unsafe`, their callers vouching that
/// the block is one their module made and that it left every user).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Block {
    len: usize,
    base: *mut u8,
}

// SAFETY: a `Block` is an address and a length; safe code can read them but reach no memory
// through them (see the type's note), so moving one to another thread lets nothing touch
// memory unsynchronised. The blocks the caches make — anonymous mappings and global-allocator
// blocks — may be used and released on any thread, which is what an `unsafe` release on the
// receiving thread relies on.
unsafe impl Send for Block {}

impl Block {
    /// A block of `len` bytes at `base` (no memory is touched).
    pub(crate) fn new(len: usize, base: *mut u8) -> Self {
        Block { len, base }
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Its start.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }
}

/// The kept blocks, smallest first, and their bytes in all, within bounds: at most
/// `max_blocks` blocks and `max_bytes` bytes. The policy only: what leaves it is released by
/// the caller (unmapped by the mapped blocks' cache, freed by the small blocks').
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
    /// which leaves too (the caller releases it: the new block replaces it), if any.
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
    pub(crate) fn insert_evicting(&mut self, block: Block) -> Vec<Block> {
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

    /// Whether a kept block starts at `base` (tests of the caches' wiring).
    #[cfg(test)]
    pub(crate) fn holds(&self, base: *mut u8) -> bool {
        self.blocks.iter().any(|b| b.base == base)
    }
}

#[cfg(test)]
#[path = "kept_blocks_tests.rs"]
mod tests;
