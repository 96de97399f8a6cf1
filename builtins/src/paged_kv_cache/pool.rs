//! The page table of the paged KV cache: pages, blocks and sequences, without kernels.
//!
//! TVM's layout, which relaxvm keeps because the kernels' results depend on it: a sequence is
//! a chain of *blocks* from a root; a block holds the pages of a run of tokens and may be shared
//! by several sequences (forks), counting its references (`refs`: one per sequence ending in it
//! and one per child block). A fork in the middle of a block splits it, so shared prefixes stay
//! shared; a fork in the middle of a page copies that page's head into a new page of the child
//! (the one kernel call the bookkeeping asks for, returned as a [`PageCopy`]). Pages are taken
//! from the end of the free list, which starts as `n-1, ..., 1, 0` (so page 0 first), and freed
//! pages are pushed back at its end: the same page numbers as TVM, whatever the order of calls.
//!
//! Every method checks its arguments before changing anything, so a refused call leaves the
//! table as it was; the one failure that can only be seen midway (no free page left) is
//! undone by the caller's snapshot ([`super::cache`] restores the whole table on any error).

use relaxvm::{Error, Result};
use std::collections::BTreeMap;

/// The depths of blocks a step's kernels take (TVM's `kPagedKVCacheMaxBlockDepth`): a deeper
/// chain's tail is concatenated to its block at the last depth.
pub(crate) const MAX_DEPTH: usize = 2;

/// A sequence's blocks from the root (inline up to 8: a step's bookkeeping makes one per
/// sequence, and a heap allocation each was a measurable part of a decode step, #32 item 8).
pub(crate) type Trace = smallvec::SmallVec<[i32; 8]>;

/// One block id (or one value) per sequence of a batch, inline for batches up to 8: a decode
/// step builds a few of these, and a heap allocation each was a measurable part of its time.
pub(crate) type PerSeq<T> = smallvec::SmallVec<[T; 8]>;

/// A page id that sliding-window sequences borrow while their slid-out pages are not yet freed.
pub(crate) const TEMP_PAGE: i32 = -1;

/// A run of tokens stored in whole pages (see the module documentation).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Block {
    /// The pages, in token order.
    pub(crate) page_ids: Vec<i32>,
    /// Tokens stored in this block.
    pub(crate) seq_length: i32,
    /// Position of the block's first token in its sequences.
    pub(crate) start_pos: i32,
    /// Tokens of the attention sink (sliding window) kept at the block's start.
    pub(crate) sink_length: i32,
    /// Offset of the sliding window's first token in the block's pages.
    pub(crate) sliding_window_offset: i32,
    /// The block this one continues (`-1`: a root).
    pub(crate) parent: i32,
    /// Sequences ending here plus child blocks.
    pub(crate) refs: i32,
}

impl Clone for Block {
    fn clone(&self) -> Block {
        let mut b = Block::default();
        b.clone_from(self);
        b
    }

    /// Field by field, reusing `page_ids`' allocation: a snapshot is taken on every step.
    fn clone_from(&mut self, src: &Block) {
        self.page_ids.clone_from(&src.page_ids);
        self.seq_length = src.seq_length;
        self.start_pos = src.start_pos;
        self.sink_length = src.sink_length;
        self.sliding_window_offset = src.sliding_window_offset;
        self.parent = src.parent;
        self.refs = src.refs;
    }
}

/// A sequence: where its chain of blocks ends, its length and its sliding-window settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sequence {
    /// The sequence's last block.
    pub(crate) last_block: i32,
    /// Tokens in the sequence.
    pub(crate) seq_length: i32,
    /// The sliding window size, `-1` when disabled.
    pub(crate) sliding_window_size: i32,
    /// Attention-sink tokens still to pin in the last block.
    pub(crate) last_block_attn_sink_size: i32,
    /// The token tree of the last steps, not yet committed (see [`super::tree`]).
    pub(crate) tree: Tree,
}

/// A sequence's token tree (speculative decoding): the parent of each node (`-1`: a root), in
/// the order of the steps that appended them, and each node's depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tree {
    pub(crate) parent: Vec<i32>,
    pub(crate) depth: Vec<i32>,
    /// False from a step with a tree until `commit_accepted_token_tree_nodes`.
    pub(crate) committed: bool,
    /// True when the tree is a chain (each node's parent is the node before it).
    pub(crate) is_chain: bool,
}

impl Default for Tree {
    fn default() -> Tree {
        Tree { parent: Vec::new(), depth: Vec::new(), committed: true, is_chain: true }
    }
}

/// A kernel copy the bookkeeping needs: the first `len` tokens of page `src` into page `dst`,
/// in every layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageCopy {
    pub(crate) src: i32,
    pub(crate) dst: i32,
    pub(crate) len: i32,
}

/// The whole page table.
#[derive(Clone)]
pub(crate) struct Pool {
    pub(crate) page_size: i32,
    pub(crate) num_total_pages: i32,
    /// True when the cache was created with sliding-window support (per sequence).
    pub(crate) support_sliding_window: bool,
    pub(crate) blocks: Vec<Block>,
    pub(crate) free_blocks: Vec<i32>,
    pub(crate) free_pages: Vec<i32>,
    /// The sequences by id (ordered, for a stable description).
    pub(crate) seqs: BTreeMap<i64, Sequence>,
    /// While an operation may be undone (`journaling`): the free-list changes it made, in
    /// order (the free list is as long as the cache has pages, so it is not copied).
    journal: Vec<FreeOp>,
    journaling: bool,
    /// The snapshot [`Pool::rollback`] restores, its buffers kept from one operation to the
    /// next so that taking it allocates nothing in the steady state.
    saved: Snapshot,
}

mod undo;
use undo::{FreeOp, Snapshot};

fn err(msg: impl std::fmt::Display) -> Error {
    Error::value(msg.to_string())
}

impl Pool {
    /// An empty table of `num_total_pages` pages of `page_size` tokens; a free list too large
    /// for memory is an allocation error (attack finding kvcache/01: it aborted).
    pub(crate) fn new(page_size: i32, num_total_pages: i32, support_sliding_window: bool) -> Result<Pool> {
        let n = num_total_pages.max(0) as usize;
        let mut free_pages = Vec::new();
        free_pages
            .try_reserve_exact(n)
            .map_err(|_| Error::alloc(n as u128 * 4, "the paged KV cache's free-page list".to_string()))?;
        free_pages.extend((0..num_total_pages).rev());
        Ok(Pool {
            page_size,
            num_total_pages,
            support_sliding_window,
            blocks: Vec::new(),
            free_blocks: Vec::new(),
            free_pages,
            seqs: BTreeMap::new(),
            journal: Vec::new(),
            journaling: false,
            saved: Snapshot::default(),
        })
    }

    /// Forgets every sequence and frees every page (in place: no second free list).
    pub(crate) fn clear(&mut self) {
        self.blocks.clear();
        self.free_blocks.clear();
        self.seqs.clear();
        self.journal.clear();
        self.journaling = false;
        self.free_pages.clear();
        // The capacity is kept from `new`, so this does not allocate.
        self.free_pages.extend((0..self.num_total_pages).rev());
    }

    /// Pushes page `p` onto the free list.
    fn free_page(&mut self, p: i32) {
        self.free_pages.push(p);
        if self.journaling {
            self.journal.push(FreeOp::Freed);
        }
    }

    /// Takes the next free page for a checkpoint import (checkpoint.rs).
    pub(crate) fn take_page_for_import(&mut self) -> Result<i32> {
        self.take_page()
    }

    fn block(&self, i: i32) -> &Block {
        &self.blocks[i as usize]
    }

    fn block_mut(&mut self, i: i32) -> &mut Block {
        &mut self.blocks[i as usize]
    }

    /// The sequence `id`, or the error naming it.
    pub(crate) fn seq(&self, id: i64) -> Result<&Sequence> {
        self.seqs.get(&id).ok_or_else(|| err(format!("sequence {id} is not in the KV cache")))
    }

    fn take_page(&mut self) -> Result<i32> {
        let p = self
            .free_pages
            .pop()
            .ok_or_else(|| err(format!("the KV cache is full: all {} pages are in use", self.num_total_pages)))?;
        if self.journaling {
            self.journal.push(FreeOp::Took(p));
        }
        Ok(p)
    }

    fn take_block(&mut self) -> i32 {
        match self.free_blocks.pop() {
            Some(i) => {
                self.blocks[i as usize] = Block { parent: -1, ..Block::default() };
                i
            }
            None => {
                self.blocks.push(Block { parent: -1, ..Block::default() });
                (self.blocks.len() - 1) as i32
            }
        }
    }

    /// A new sequence ending in block `last_block` (which gains a reference); its length is
    /// that of the chain.
    fn insert_seq(&mut self, id: i64, last_block: i32) {
        self.block_mut(last_block).refs += 1;
        let mut len = 0;
        let mut b = last_block;
        while b != -1 {
            len += self.block(b).seq_length;
            b = self.block(b).parent;
        }
        self.seqs.insert(
            id,
            Sequence {
                last_block,
                seq_length: len,
                sliding_window_size: -1,
                last_block_attn_sink_size: 0,
                tree: Tree::default(),
            },
        );
    }

    /// The blocks of a sequence from its root to its last block.
    pub(crate) fn trace(&self, seq: &Sequence) -> Trace {
        let mut t = Trace::new();
        let mut b = seq.last_block;
        while b != -1 {
            t.push(b);
            b = self.block(b).parent;
        }
        t.reverse();
        t
    }

    /// Adds an empty sequence.
    pub(crate) fn add(&mut self, id: i64) -> Result<()> {
        if self.seqs.contains_key(&id) {
            return Err(err(format!("sequence {id} is already in the KV cache")));
        }
        let b = self.take_block();
        self.insert_seq(id, b);
        Ok(())
    }

    /// Removes a sequence, freeing the blocks (and pages) no other sequence uses.
    pub(crate) fn remove(&mut self, id: i64) -> Result<()> {
        let seq = self.seq(id)?.clone();
        let mut b = seq.last_block;
        while b != -1 && self.block(b).refs == 1 {
            let pages = std::mem::take(&mut self.block_mut(b).page_ids);
            pages.into_iter().for_each(|p| self.free_page(p));
            self.free_blocks.push(b);
            b = self.block(b).parent;
        }
        if b != -1 {
            self.block_mut(b).refs -= 1;
        }
        self.seqs.remove(&id);
        Ok(())
    }

    /// Forks `child` from `parent` at `fork_pos` (`-1`: the parent's length). The returned copy,
    /// if any, must be run by the caller before the next attention.
    pub(crate) fn fork(&mut self, parent_id: i64, child_id: i64, fork_pos: i64) -> Result<Option<PageCopy>> {
        let parent = self
            .seq(parent_id)
            .map_err(|_| err(format!("cannot fork from sequence {parent_id}: it is not in the KV cache")))?;
        if self.seqs.contains_key(&child_id) {
            return Err(err(format!("cannot fork onto sequence {child_id}: it is already in the KV cache")));
        }
        if fork_pos < -1 || fork_pos > i64::from(parent.seq_length) {
            return Err(err(format!(
                "fork position {fork_pos} is out of range: expected -1 (the end) or 0 to {} (the length of sequence {parent_id})",
                parent.seq_length
            )));
        }
        if !parent.tree.committed {
            return Err(err(format!(
                "cannot fork from sequence {parent_id}: the token tree of its last step is not committed (call commit_accepted_token_tree_nodes)"
            )));
        }
        let fork_pos = if fork_pos == -1 { parent.seq_length } else { fork_pos as i32 };
        if parent.sliding_window_size != -1 {
            let sink = parent.seq_length - self.block(parent.last_block).seq_length + parent.last_block_attn_sink_size;
            if fork_pos > sink {
                return Err(err(format!(
                    "sequence {parent_id} has a sliding window and can only be forked within its attention sink ({sink} tokens), not at {fork_pos}"
                )));
            }
        }
        let ps = self.page_size;
        if fork_pos % ps != 0 && self.free_pages.is_empty() {
            // A fork inside a page copies that page: refuse before changing anything.
            return Err(err(format!(
                "the KV cache is full: forking sequence {parent_id} at {fork_pos} (inside a page) needs a free page"
            )));
        }
        if fork_pos == parent.seq_length && fork_pos % ps == 0 && self.block(parent.last_block).seq_length > 0 {
            // The parent continues in a new empty block, so that both can append after the fork.
            let nb = self.take_block();
            let last = self.seqs[&parent_id].last_block;
            let len = self.seqs[&parent_id].seq_length;
            let b = self.block_mut(nb);
            b.start_pos = len;
            b.parent = last;
            b.refs = 1;
            self.seqs.get_mut(&parent_id).expect("checked above").last_block = nb;
        }
        let child = self.take_block();
        let parent = self.seqs[&parent_id].clone();
        let trace = self.trace(&parent);
        let mut in_block_offset = fork_pos;
        let mut copy = None;
        for (k, &forked) in trace.iter().enumerate() {
            if k + 1 != trace.len() {
                let len = self.block(forked).seq_length;
                if len <= in_block_offset {
                    in_block_offset -= len;
                    continue;
                }
            }
            let in_page = in_block_offset % ps;
            let moved = in_block_offset - in_page;
            let moved_pages = (moved / ps) as usize;
            if moved_pages == 0 {
                let p = self.block(forked).parent;
                if p != -1 {
                    self.block_mut(p).refs += 1;
                }
                self.block_mut(child).parent = p;
            } else {
                // Split the forked block: its first `moved_pages` pages become a new parent
                // block shared by it and the child.
                let nb = self.take_block();
                let old_parent = self.block(forked).parent;
                let head: Vec<i32> = self.block_mut(forked).page_ids.drain(..moved_pages).collect();
                let start = self.block(forked).start_pos;
                {
                    let b = self.block_mut(nb);
                    b.parent = old_parent;
                    b.refs = 2;
                    b.page_ids = head;
                    b.start_pos = start;
                    b.seq_length = moved;
                }
                let f = self.block_mut(forked);
                f.parent = nb;
                f.start_pos += moved;
                f.seq_length -= moved;
                self.block_mut(child).parent = nb;
                if parent.sliding_window_size != -1 && forked == parent.last_block {
                    let s = self.seqs.get_mut(&parent_id).expect("checked above");
                    s.last_block_attn_sink_size -= moved;
                }
            }
            {
                let c = self.block_mut(child);
                c.start_pos = fork_pos - in_page;
                c.seq_length = in_page;
            }
            if in_page > 0 {
                let src = self.block(forked).page_ids[0];
                let dst = self.take_page()?;
                self.block_mut(child).page_ids.push(dst);
                copy = Some(PageCopy { src, dst, len: in_page });
            }
            break;
        }
        self.insert_seq(child_id, child);
        Ok(copy)
    }

    /// Enables a sliding window of `window` tokens keeping `sink` tokens for sequence `id`.
    pub(crate) fn enable_sliding_window(&mut self, id: i64, window: i64, sink: i64) -> Result<()> {
        if !self.support_sliding_window {
            return Err(err("the KV cache was created without sliding-window support"));
        }
        let seq = self.seq(id)?;
        if sink < 0 || window <= 0 || sink >= window || window > i64::from(i32::MAX) {
            return Err(err(format!(
                "expected 0 <= attention sink size < sliding window size, found sink {sink} and window {window}"
            )));
        }
        if seq.sliding_window_size != -1 {
            return Err(err(format!("sequence {id} already has a sliding window")));
        }
        let prefix = seq.seq_length - self.block(seq.last_block).seq_length;
        let s = self.seqs.get_mut(&id).expect("checked above");
        s.last_block_attn_sink_size = (sink as i32 - prefix).max(0);
        s.sliding_window_size = window as i32;
        Ok(())
    }

    /// True when popping `n` tokens of sequence `id` only shortens or frees blocks no other
    /// sequence shares: such a pop takes no page and forks nothing, so once [`Pool::popn`] has
    /// checked its arguments it cannot fail midway and needs no snapshot to undo.
    pub(crate) fn pop_is_unshared(&self, id: i64, n: i64) -> bool {
        let Some(seq) = self.seqs.get(&id) else { return false };
        if n < 0 || n > i64::from(seq.seq_length) {
            return false;
        }
        let mut n = n;
        let mut b = seq.last_block;
        while n > 0 {
            if b == -1 || self.block(b).refs != 1 {
                return false;
            }
            n -= i64::from(self.block(b).seq_length);
            b = self.block(b).parent;
        }
        true
    }

    /// Removes the last `n` tokens of sequence `id`. Popping into a block other sequences share
    /// forks the kept prefix (which may copy a page: returned for the caller to run).
    pub(crate) fn popn(&mut self, id: i64, n: i64) -> Result<Option<PageCopy>> {
        let seq = self.seq(id)?;
        if n < 0 || n > i64::from(seq.seq_length) {
            return Err(err(format!(
                "cannot pop {n} tokens from sequence {id}: expected 0 to its length {}",
                seq.seq_length
            )));
        }
        if n == 0 {
            return Ok(None);
        }
        let mut n = n as i32;
        let ps = self.page_size;
        let mut b = seq.last_block;
        while b != -1 && self.block(b).refs == 1 {
            let len = self.block(b).seq_length;
            if n > len {
                n -= len;
                let pages = std::mem::take(&mut self.block_mut(b).page_ids);
                pages.into_iter().for_each(|p| self.free_page(p));
                self.free_blocks.push(b);
                let parent = self.block(b).parent;
                let s = self.seqs.get_mut(&id).expect("checked above");
                s.seq_length -= len;
                s.last_block = parent;
                b = parent;
                continue;
            }
            let tgt = ((len - n + ps - 1) / ps) as usize;
            while self.block(b).page_ids.len() > tgt {
                let p = self.block_mut(b).page_ids.pop().expect("len > tgt >= 0");
                self.free_page(p);
            }
            self.seqs.get_mut(&id).expect("checked above").seq_length -= n;
            self.block_mut(b).seq_length -= n;
            n = 0;
            break;
        }
        if n == 0 {
            return Ok(None);
        }
        // The rest lies in shared blocks: keep the prefix as a fork under a temporary id, drop
        // the old chain, and take the fork's place. (TVM's temporary id: -1 - id.)
        let temp = -1 - id;
        if self.seqs.contains_key(&temp) {
            return Err(err(format!(
                "cannot pop {n} shared tokens from sequence {id}: its temporary id {temp} is in use"
            )));
        }
        let keep = self.seqs[&id].seq_length - n;
        let copy = self.fork(id, temp, i64::from(keep))?;
        self.remove(id)?;
        let s = self.seqs.remove(&temp).expect("just forked");
        self.seqs.insert(id, s);
        Ok(copy)
    }

    /// Tokens in every sequence.
    pub(crate) fn total_len(&self) -> i64 {
        self.seqs.values().map(|s| i64::from(s.seq_length)).sum()
    }

    /// True when no sequence, block or page is in use.
    pub(crate) fn is_empty(&self) -> bool {
        self.seqs.is_empty()
            && self.free_blocks.len() == self.blocks.len()
            && self.free_pages.len() == self.num_total_pages as usize
    }

    /// Frees the pages that slid out of sequence `id`'s window (TVM's SlideWindowForSequence).
    fn slide(&mut self, id: i64) -> Result<()> {
        let seq = self.seqs[&id].clone();
        if seq.sliding_window_size == -1 || !self.support_sliding_window || seq.seq_length <= seq.sliding_window_size {
            return Ok(());
        }
        let ps = self.page_size;
        let to_slide = seq.seq_length - seq.sliding_window_size;
        let bi = seq.last_block;
        if seq.last_block_attn_sink_size > 0 && self.block(bi).sink_length == 0 {
            let b = self.block_mut(bi);
            b.sink_length = seq.last_block_attn_sink_size;
            b.sliding_window_offset = seq.last_block_attn_sink_size;
        }
        let b = self.block(bi).clone();
        let sink_pages = ((b.sink_length + ps - 1) / ps) as usize;
        let mut first = ((b.sliding_window_offset + to_slide) / ps) as usize;
        let start_in_page = (b.sliding_window_offset + to_slide) % ps;
        while first > sink_pages {
            let p = self.block_mut(bi).page_ids.remove(sink_pages);
            if p != TEMP_PAGE {
                self.free_page(p);
            }
            first -= 1;
        }
        let s = self.seqs.get_mut(&id).expect("present");
        s.seq_length = s.sliding_window_size;
        let blk = self.block_mut(bi);
        blk.seq_length -= to_slide;
        blk.sliding_window_offset = first as i32 * ps + start_in_page;
        Ok(())
    }

    /// Makes room for `len` more tokens at the end of sequence `id` (TVM's
    /// ReserveAppendLengthInSeq): new pages, then the sliding window's slide.
    pub(crate) fn reserve(&mut self, id: i64, len: i32) -> Result<()> {
        let seq = self.seqs[&id].clone();
        let bi = seq.last_block;
        let ps = self.page_size;
        let b = self.block(bi);
        if b.refs != 1 {
            return Err(err(format!(
                "sequence {id} cannot grow: its last block is shared by {} other blocks",
                b.refs - 1
            )));
        }
        let cur = b.page_ids.len() as i64;
        let tgt = (i64::from(b.seq_length) - i64::from(b.sink_length)
            + i64::from(b.sliding_window_offset)
            + i64::from(len)
            + i64::from(ps)
            - 1)
            / i64::from(ps);
        for _ in cur..tgt {
            let p = if self.free_pages.is_empty() && seq.sliding_window_size != -1 && self.support_sliding_window {
                TEMP_PAGE
            } else {
                self.take_page()?
            };
            self.block_mut(bi).page_ids.push(p);
        }
        self.block_mut(bi).seq_length += len;
        self.slide(id)?;
        if self.support_sliding_window {
            for i in 0..self.block(bi).page_ids.len() {
                if self.block(bi).page_ids[i] == TEMP_PAGE {
                    let p = self.take_page()?;
                    self.block_mut(bi).page_ids[i] = p;
                }
            }
        }
        Ok(())
    }

    /// Where each token of sequence `id` lies in the pages (page * page_size + offset), in
    /// order: what `debug_get_kv` reads.
    pub(crate) fn positions(&self, seq: &Sequence) -> Vec<i32> {
        let mut out = Vec::with_capacity(seq.seq_length.max(0) as usize);
        for bi in self.trace(seq) {
            let b = self.block(bi);
            for i in 0..b.seq_length {
                let off = if i < b.sink_length { i } else { i - b.sink_length + b.sliding_window_offset };
                out.push(b.page_ids[(off / self.page_size) as usize] * self.page_size + off % self.page_size);
            }
        }
        out
    }
}
