//! `begin_forward`: the auxiliary arrays the attention kernels read for one step, computed as
//! TVM computes them (its `BeginForward` and `SyncAuxArrayToDevice`), since the kernels' bytes
//! depend on every choice made here: the blocks at each depth (at most two; a deeper chain's
//! tail is concatenated to its second block), coalescing a block shared by several sequences
//! into one kernel row, the decode kernel for batches of single tokens (unless coalescing would
//! save 32 times the pages), appending before attention only for decode at the last depth, and
//! the page numbers the appends take, in batch order.

use super::pool::{PerSeq, Pool, Trace, MAX_DEPTH};
use super::sliding_mask::{self, Columns, SlidingFirstRow};
use super::tree::{self, TreeArrays};
use relaxvm::{Error, Result};
use smallvec::SmallVec;

/// The arrays of one depth: one row per (coalesced) block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DepthArrays {
    pub(crate) qo_indptr: Vec<i32>,
    pub(crate) page_indptr: Vec<i32>,
    pub(crate) page_indices: Vec<i32>,
    pub(crate) page_indptr_sliding: Vec<i32>,
    pub(crate) page_indices_sliding: Vec<i32>,
    pub(crate) last_page_len: Vec<i32>,
    pub(crate) sliding_window_offset: Vec<i32>,
    pub(crate) sink_size: Vec<i32>,
    pub(crate) k_rope_pos_offset: Vec<i32>,
    pub(crate) k_rope_pos_offset_sliding: Vec<i32>,
    pub(crate) use_decode_kernel: bool,
    /// What the causal sliding-window prefill kernel's first row needed (`mha_sliding` layers
    /// in a step that appends after attention; see `sliding_mask`).
    pub(crate) sliding_first_row: SlidingFirstRow,
}

/// Everything one forward step's kernels read, on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) seq_ids: Vec<i64>,
    pub(crate) append_lengths: Vec<i32>,
    pub(crate) depths: Vec<DepthArrays>,
    pub(crate) append_before_attn: bool,
    pub(crate) cur_append_length_indptr: Vec<i32>,
    pub(crate) k_ragged_rope_pos_offset: Vec<i32>,
    pub(crate) q_rope_position_map: Vec<i32>,
    pub(crate) append_position_map: Vec<i32>,
    /// The token-tree masks (all chains without a tree).
    pub(crate) tree: TreeArrays,
}

impl DepthArrays {
    /// Empties the arrays, keeping their buffers.
    fn recycle(&mut self, use_decode_kernel: bool) {
        for v in [
            &mut self.qo_indptr,
            &mut self.page_indptr,
            &mut self.page_indices,
            &mut self.page_indptr_sliding,
            &mut self.page_indices_sliding,
            &mut self.last_page_len,
            &mut self.sliding_window_offset,
            &mut self.sink_size,
            &mut self.k_rope_pos_offset,
            &mut self.k_rope_pos_offset_sliding,
        ] {
            v.clear();
        }
        self.use_decode_kernel = use_decode_kernel;
        self.sliding_first_row = SlidingFirstRow::default();
    }
}

impl Plan {
    /// Tokens appended in this step.
    pub(crate) fn total_len(&self) -> i64 {
        self.append_lengths.iter().map(|&l| i64::from(l)).sum()
    }
}

/// The sizes a step may not exceed (from the cache's configuration).
pub(crate) struct Limits {
    pub(crate) reserved_num_seqs: i64,
    pub(crate) prefill_chunk_size: i64,
    /// The window of `mha_sliding` layers, when some layer has that kind.
    pub(crate) layer_sliding_window: Option<i32>,
    /// True when RoPE is applied inside the attention kernels (no token trees then).
    pub(crate) inline_rope: bool,
}

fn err(msg: impl std::fmt::Display) -> Error {
    Error::value(msg.to_string())
}

/// Checks a step's sequences and lengths against the table and the limits, changing nothing.
pub(crate) fn check(pool: &Pool, seq_ids: &[i64], lens: &[i64], limits: &Limits) -> Result<()> {
    if seq_ids.len() != lens.len() {
        return Err(err(format!(
            "expected as many append lengths as sequence ids, found {} ids and {} lengths",
            seq_ids.len(),
            lens.len()
        )));
    }
    if seq_ids.is_empty() {
        return Err(err("expected at least one sequence in the batch, found none"));
    }
    if seq_ids.len() as i64 > limits.reserved_num_seqs {
        return Err(err(format!(
            "the batch has {} sequences, more than the {} the KV cache was created for",
            seq_ids.len(),
            limits.reserved_num_seqs
        )));
    }
    // A batch is small, a set would cost an allocation per step: a scan of the ids before
    // each one, unless the batch is large.
    let mut seen = std::collections::BTreeSet::new();
    let mut total: i64 = 0;
    for (i, (&id, &len)) in seq_ids.iter().zip(lens).enumerate() {
        pool.seq(id)?;
        let twice = if seq_ids.len() <= 16 { seq_ids[..i].contains(&id) } else { !seen.insert(id) };
        if twice {
            return Err(err(format!("sequence {id} appears twice in the batch")));
        }
        if len <= 0 {
            return Err(err(format!("expected a positive append length for sequence {id}, found {len}")));
        }
        total = total.saturating_add(len);
    }
    if total > limits.prefill_chunk_size {
        return Err(err(format!(
            "the batch appends {total} tokens, more than the prefill chunk size {} the KV cache was created with",
            limits.prefill_chunk_size
        )));
    }
    Ok(())
}

/// The kernel rows of one depth: (block id, tokens).
type Rows = SmallVec<[(i32, i32); 8]>;

/// The blocks of each sequence at depths 0 and 1 (`-1`: none), and each sequence's blocks
/// beyond the last depth (TVM's GetBlockIdsOnDepth).
fn block_ids_on_depths(pool: &Pool, seq_ids: &[i64]) -> (SmallVec<[PerSeq<i32>; MAX_DEPTH]>, PerSeq<Trace>) {
    let traces: PerSeq<Trace> = seq_ids.iter().map(|id| pool.trace(&pool.seqs[id])).collect();
    let depth = traces.iter().map(|t| t.len().min(MAX_DEPTH)).max().unwrap_or(0);
    let on_depths = (0..depth).map(|d| traces.iter().map(|t| t.get(d).copied().unwrap_or(-1)).collect()).collect();
    let trailing = traces
        .iter()
        .map(|t| t.get(MAX_DEPTH..).map(|rest| rest.iter().copied().collect()).unwrap_or_default())
        .collect();
    (on_depths, trailing)
}

/// The kernel rows of one depth and whether the decode kernel runs them (TVM's
/// GetChunkedBlockIds): neighbours with the same block coalesce into one row unless the decode
/// kernel is chosen or `coalesce` is off.
fn chunked_block_ids(pool: &Pool, ids: &[i32], lens: &[i32], coalesce: bool, is_decode: bool) -> (Rows, bool) {
    let pages = |b: i32| if b == -1 { 0 } else { pool.blocks[b as usize].page_ids.len() as i64 };
    let mut uncoalesced = Rows::new();
    let mut coalesced = Rows::new();
    let mut cur = ids[0];
    let mut chunk = lens[0];
    let mut pages_coalesced: i64 = 0;
    let mut pages_uncoalesced = pages(ids[0]);
    for i in 1..ids.len() {
        pages_uncoalesced += pages(ids[i]);
        uncoalesced.push((ids[i - 1], lens[i - 1]));
        if ids[i] == cur {
            chunk += lens[i];
        } else {
            coalesced.push((cur, chunk));
            pages_coalesced += pages(cur);
            cur = ids[i];
            chunk = lens[i];
        }
    }
    uncoalesced.push((ids[ids.len() - 1], lens[lens.len() - 1]));
    coalesced.push((cur, chunk));
    pages_coalesced += pages(cur);
    // TVM computes the ratio in double.
    let ratio = if pages_coalesced > 0 { pages_uncoalesced as f64 / pages_coalesced as f64 } else { 0.0 };
    let use_decode = is_decode && ratio < 32.0;
    (if use_decode || !coalesce { uncoalesced } else { coalesced }, use_decode)
}

/// TVM's GetLayerSlidingWindowOffset / NumPages for a window of `w` tokens.
fn layer_window_offset(len: i32, w: i32, ps: i32) -> i32 {
    if len <= w {
        0
    } else {
        (len - w) % ps
    }
}

fn layer_window_pages(len: i32, w: i32, ps: i32) -> i32 {
    if len == 0 {
        return 0;
    }
    (layer_window_offset(len, w, ps) + len.min(w) + ps - 1) / ps
}

/// Begins a step: grows the sequences by `lens` (pages taken in batch order) and returns the
/// kernels' arrays. The arguments must have passed [`check`]; a failure midway (the cache is
/// full) leaves `pool` changed, for the caller to restore.
pub(crate) fn begin(
    pool: &mut Pool,
    seq_ids: &[i64],
    lens: &[i64],
    token_tree: Option<&[i64]>,
    limits: &Limits,
    spare: Option<Plan>,
) -> Result<Plan> {
    let ps = pool.page_size;
    // An earlier step's plan lends its buffers: the arrays are cleared, not reallocated.
    let mut spare = spare.unwrap_or_default();
    let mut lens32 = std::mem::take(&mut spare.append_lengths);
    lens32.clear();
    lens32.extend(lens.iter().map(|&l| l as i32));
    let mut last_block_len_before: PerSeq<i32> = PerSeq::new();
    let mut k_ragged = std::mem::take(&mut spare.k_ragged_rope_pos_offset);
    k_ragged.clear();
    let mut is_decode = true;
    for (&id, &len) in seq_ids.iter().zip(&lens32) {
        let s = pool.seqs.get_mut(&id).expect("checked");
        // Tokens of an uncommitted tree do not count for the positions of the new ones.
        let tree_len = if s.tree.committed { 0 } else { s.tree.parent.len() as i32 };
        k_ragged.push(s.seq_length - tree_len);
        s.seq_length = s.seq_length.checked_add(len).ok_or_else(|| err("sequence length overflows int32"))?;
        let lb = s.last_block;
        last_block_len_before.push(pool.blocks[lb as usize].seq_length);
        if len != 1 {
            is_decode = false;
        }
    }
    let (on_depths, trailing) = block_ids_on_depths(pool, seq_ids);
    let num_depths = on_depths.len().min(MAX_DEPTH);
    let mut chunked: SmallVec<[Rows; MAX_DEPTH]> = SmallVec::new();
    let mut depths: Vec<DepthArrays> = std::mem::take(&mut spare.depths);
    depths.truncate(num_depths);
    depths.resize_with(num_depths, DepthArrays::default);
    for (d, ids) in on_depths.iter().enumerate().take(num_depths) {
        let (rows, use_decode) = chunked_block_ids(pool, ids, &lens32, d != MAX_DEPTH - 1, is_decode);
        chunked.push(rows);
        depths[d].recycle(use_decode);
    }
    let mut append_before_attn = !pool.support_sliding_window && depths.last().is_some_and(|d| d.use_decode_kernel);
    if seq_ids.iter().any(|id| !pool.seqs[id].tree.committed) {
        append_before_attn = true;
    }
    let tree_arrays = match token_tree {
        Some(parents) => {
            if pool.support_sliding_window {
                return Err(err("token trees are not supported with sliding windows"));
            }
            if limits.inline_rope {
                return Err(err("token trees are not supported with inline RoPE"));
            }
            let has_trailing: Vec<bool> = trailing.iter().map(|t| !t.is_empty()).collect();
            tree::construct_mask(
                pool,
                seq_ids,
                &lens32,
                parents,
                &on_depths,
                &has_trailing,
                num_depths,
                append_before_attn,
            )?
        }
        None => {
            for &id in seq_ids {
                let s = pool.seqs.get_mut(&id).expect("checked");
                if !s.tree.committed {
                    return Err(err(format!(
                        "sequence {id} has an uncommitted token tree: call commit_accepted_token_tree_nodes before a step without a tree"
                    )));
                }
                s.tree = Default::default();
            }
            // The last step's arrays lend their buffers, as the depths' do.
            let mut t = std::mem::take(&mut spare.tree);
            t.is_chain.clear();
            t.is_chain.resize(MAX_DEPTH, true);
            t.mn_indptr.clear();
            t.mask.clear();
            t
        }
    };
    if append_before_attn {
        for (&id, &len) in seq_ids.iter().zip(&lens32) {
            pool.reserve(id, len)?;
        }
    }
    let lw = limits.layer_sliding_window;
    for (d, rows) in chunked.iter().enumerate() {
        let a = &mut depths[d];
        a.qo_indptr.push(0);
        a.page_indptr.push(0);
        a.page_indptr_sliding.push(0);
        for (i, &(block_id, chunk_len)) in rows.iter().enumerate() {
            a.qo_indptr.push(a.qo_indptr.last().unwrap() + chunk_len);
            if block_id == -1 {
                a.page_indptr.push(*a.page_indptr.last().unwrap());
                a.page_indptr_sliding.push(*a.page_indptr_sliding.last().unwrap());
                a.last_page_len.push(0);
                a.sliding_window_offset.push(0);
                a.sink_size.push(0);
                a.k_rope_pos_offset.push(0);
                a.k_rope_pos_offset_sliding.push(0);
                continue;
            }
            let block = &pool.blocks[block_id as usize];
            let mut num_pages = block.page_ids.len() as i32;
            let mut total = block.seq_length;
            let mut last = block;
            a.page_indices.extend_from_slice(&block.page_ids);
            if d == MAX_DEPTH - 1 {
                for &t in &trailing[i] {
                    let tb = &pool.blocks[t as usize];
                    a.page_indices.extend_from_slice(&tb.page_ids);
                    num_pages += tb.page_ids.len() as i32;
                    total += tb.seq_length;
                    last = tb;
                }
            }
            a.page_indptr.push(a.page_indptr.last().unwrap() + num_pages);
            let sliding_pages = lw.map_or(0, |w| num_pages.min(layer_window_pages(total, w, ps)));
            a.page_indptr_sliding.push(a.page_indptr_sliding.last().unwrap() + sliding_pages);
            let n = a.page_indices.len();
            a.page_indices_sliding.extend_from_slice(&a.page_indices[n - sliding_pages as usize..]);
            a.last_page_len.push(if total == 0 {
                0
            } else {
                (total - last.sink_length + last.sliding_window_offset - 1) % ps + 1
            });
            a.sliding_window_offset.push(match lw {
                Some(w) => layer_window_offset(total, w, ps),
                None => last.sliding_window_offset,
            });
            a.sink_size.push(last.sink_length);
            a.k_rope_pos_offset.push(block.start_pos);
            if let Some(w) = lw {
                a.k_rope_pos_offset_sliding.push((block.start_pos + total - w).max(0));
            }
        }
    }
    if let (Some(w), false) = (lw, append_before_attn) {
        for a in depths.iter_mut().filter(|a| !a.use_decode_kernel) {
            let columns = Columns {
                qo_indptr: &a.qo_indptr,
                page_indptr: &a.page_indptr_sliding,
                last_page_len: &a.last_page_len,
                sink_size: &a.sink_size,
                window_offset: &mut a.sliding_window_offset,
                k_rope_pos_offset: &mut a.k_rope_pos_offset_sliding,
            };
            a.sliding_first_row = sliding_mask::define_first_row(columns, w, ps);
        }
    }
    if !append_before_attn {
        for (&id, &len) in seq_ids.iter().zip(&lens32) {
            pool.reserve(id, len)?;
        }
    }
    let mut cur_indptr = std::mem::take(&mut spare.cur_append_length_indptr);
    cur_indptr.clear();
    cur_indptr.push(0);
    let mut q_rope = std::mem::take(&mut spare.q_rope_position_map);
    q_rope.clear();
    let mut append_pos = std::mem::take(&mut spare.append_position_map);
    append_pos.clear();
    let mut plan_ids = std::mem::take(&mut spare.seq_ids);
    plan_ids.clear();
    plan_ids.extend_from_slice(seq_ids);
    for (i, (&id, &len)) in seq_ids.iter().zip(&lens32).enumerate() {
        cur_indptr.push(cur_indptr.last().unwrap() + len);
        let seq = &pool.seqs[&id];
        let block = &pool.blocks[seq.last_block as usize];
        let tree = &seq.tree;
        for pos in 0..len {
            if tree.depth.is_empty() {
                q_rope.push(k_ragged[i] + pos);
            } else {
                let offset = tree.parent.len() as i32 - len;
                q_rope.push(k_ragged[i] + tree.depth[(offset + pos) as usize]);
            }
            let pos_in_block = block.seq_length - len + pos;
            let p = if last_block_len_before[i] + pos < block.sink_length {
                let off = last_block_len_before[i] + pos;
                block.page_ids[(off / ps) as usize] * ps + off % ps
            } else if pos_in_block < block.sink_length {
                -1
            } else {
                let off = pos_in_block - block.sink_length + block.sliding_window_offset;
                block.page_ids[(off / ps) as usize] * ps + off % ps
            };
            append_pos.push(p);
        }
    }
    Ok(Plan {
        seq_ids: plan_ids,
        append_lengths: lens32,
        depths,
        append_before_attn,
        cur_append_length_indptr: cur_indptr,
        k_ragged_rope_pos_offset: k_ragged,
        q_rope_position_map: q_rope,
        append_position_map: append_pos,
        tree: tree_arrays,
    })
}
