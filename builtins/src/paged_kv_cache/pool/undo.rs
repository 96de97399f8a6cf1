//! Undoing a failed operation on the page table: a snapshot of the blocks and sequences and
//! a journal of the free list, whose buffers are kept from one operation to the next (so
//! taking a snapshot allocates nothing in the steady state).

use super::{Block, Pool, Sequence};

/// A change to the free list: a page taken from its end, or one pushed onto it.
#[derive(Clone, Copy, Debug)]
pub(super) enum FreeOp {
    Took(i32),
    Freed,
}

/// What [`Pool::rollback`] needs to put the table back: everything but the free list, which
/// the journal restores.
#[derive(Clone, Debug, Default)]
pub(super) struct Snapshot {
    blocks: Vec<Block>,
    free_blocks: Vec<i32>,
    seqs: Vec<(i64, Sequence)>,
}

/// The table itself: the undo buffers are no part of it.
impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("page_size", &self.page_size)
            .field("num_total_pages", &self.num_total_pages)
            .field("support_sliding_window", &self.support_sliding_window)
            .field("blocks", &self.blocks)
            .field("free_blocks", &self.free_blocks)
            .field("free_pages", &self.free_pages)
            .field("seqs", &self.seqs)
            .finish()
    }
}

impl Pool {
    /// Starts an operation that [`Pool::rollback`] can undo: copies the blocks and sequences
    /// (as many as are in use) and journals the free list (whatever the cache's capacity).
    pub(crate) fn checkpoint(&mut self) {
        self.journal.clear();
        self.journaling = true;
        self.saved.blocks.clone_from(&self.blocks);
        self.saved.free_blocks.clone_from(&self.free_blocks);
        self.saved.seqs.clear();
        self.saved.seqs.extend(self.seqs.iter().map(|(&id, s)| (id, s.clone())));
    }

    /// Ends an operation that succeeded.
    pub(crate) fn keep(&mut self) {
        self.journaling = false;
    }

    /// Puts the table back as it was at the last [`Pool::checkpoint`].
    pub(crate) fn rollback(&mut self) {
        if self.journaling {
            while let Some(op) = self.journal.pop() {
                match op {
                    FreeOp::Took(p) => self.free_pages.push(p),
                    FreeOp::Freed => {
                        self.free_pages.pop();
                    }
                }
            }
        }
        self.journaling = false;
        std::mem::swap(&mut self.blocks, &mut self.saved.blocks);
        std::mem::swap(&mut self.free_blocks, &mut self.saved.free_blocks);
        self.seqs = self.saved.seqs.drain(..).collect();
    }
}
