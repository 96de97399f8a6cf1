//! Token trees (speculative decoding): a step may append, per sequence, a tree of candidate
//! tokens (each node's parent given), attended with a mask that lets a node see its ancestors
//! only; `commit_accepted_token_tree_nodes` then keeps one root-to-leaf path, moving its K/V
//! into place (`compact_copy`) and popping the rest. As TVM's `ConstructTokenTreeMask` and
//! `CommitAcceptedTokenTreeNodes`, including their quirks (the chain flags of all depths are
//! reset at each depth; the chain test of a commit is the last sequence's).

use super::pool::{PerSeq, Pool, MAX_DEPTH};
use relaxvm::{Error, Result};
use std::collections::BTreeMap;

/// TVM's `kTreeAttnMaxTreeSize`.
pub(crate) const MAX_TREE_SIZE: usize = 256;

fn err(msg: impl std::fmt::Display) -> Error {
    Error::value(msg.to_string())
}

/// The per-depth tree arrays of a step: whether each depth's trees are all chains, and for each
/// depth the mask row offsets and the `(first, end)` DFS interval of every node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TreeArrays {
    pub(crate) is_chain: Vec<bool>,
    pub(crate) mn_indptr: Vec<Vec<i32>>,
    pub(crate) mask: Vec<Vec<i32>>,
}

/// Builds the mask of a step whose batch `seq_ids` appends `lens` tokens with parents
/// `parent_ptr` (all sequences' nodes, in batch order), storing each tree in its sequence.
/// `last_block_at[d][i]` is the block of sequence `i` at depth `d`, `has_trailing[i]` whether
/// its chain goes deeper than the last depth.
#[allow(clippy::too_many_arguments)]
pub(crate) fn construct_mask(
    pool: &mut Pool,
    seq_ids: &[i64],
    lens: &[i32],
    parent_ptr: &[i64],
    on_depths: &[PerSeq<i32>],
    has_trailing: &[bool],
    num_depths: usize,
    append_before_attn: bool,
) -> Result<TreeArrays> {
    let mut out = TreeArrays {
        is_chain: vec![true; MAX_DEPTH],
        mn_indptr: vec![Vec::new(); MAX_DEPTH],
        mask: vec![Vec::new(); MAX_DEPTH],
    };
    for (d, blocks_at_d) in on_depths.iter().enumerate().take(num_depths) {
        let in_depth: Vec<bool> = seq_ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                !append_before_attn
                    || blocks_at_d[i] == pool.seqs[id].last_block
                    || (d + 1 == MAX_DEPTH && has_trailing[i])
            })
            .collect();
        out.is_chain.iter_mut().for_each(|c| *c = true);
        let mut indptr = vec![0i32];
        let mut offset = 0usize;
        for (i, id) in seq_ids.iter().enumerate() {
            let len = lens[i] as usize;
            if !in_depth[i] {
                indptr.push(*indptr.last().unwrap());
                offset += len;
                continue;
            }
            let last_len = pool.blocks[pool.seqs[id].last_block as usize].seq_length;
            let seq = pool.seqs.get_mut(id).expect("checked");
            if seq.tree.parent.len() as i64 > i64::from(last_len) {
                return Err(err(format!(
                    "the token tree of sequence {id} ({} nodes) is longer than its last block ({last_len} tokens)",
                    seq.tree.parent.len()
                )));
            }
            let nodes = parent_ptr.get(offset..offset + len).ok_or_else(|| {
                err(format!(
                    "the token tree has {} parent pointers, fewer than the {} tokens appended",
                    parent_ptr.len(),
                    offset + len
                ))
            })?;
            seq.tree.parent.extend(nodes.iter().map(|&p| p.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32));
            offset += len;
            if seq.tree.parent.len() > MAX_TREE_SIZE {
                return Err(err(format!(
                    "the token tree of sequence {id} has {} nodes, more than the limit {MAX_TREE_SIZE}",
                    seq.tree.parent.len()
                )));
            }
            indptr.push(indptr.last().unwrap() + seq.tree.parent.len() as i32);
        }
        if offset != parent_ptr.len() {
            return Err(err(format!(
                "the token tree has {} parent pointers, expected one per appended token ({offset})",
                parent_ptr.len()
            )));
        }
        let mut mask = Vec::new();
        let mut all_chains = true;
        for (i, id) in seq_ids.iter().enumerate() {
            if !in_depth[i] {
                continue;
            }
            let seq = pool.seqs.get_mut(id).expect("checked");
            seq.tree.is_chain = true;
            seq.tree.committed = false;
            let parents = &seq.tree.parent;
            let n = parents.len();
            let mut depth = Vec::with_capacity(n);
            let mut children: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
            let mut roots = Vec::new();
            for (k, &p) in parents.iter().enumerate() {
                if i64::from(p) >= k as i64 || p < -1 {
                    return Err(err(format!(
                        "invalid token tree of sequence {id}: the parent of node {k} is {p}, expected -1 or a node before it"
                    )));
                }
                if p != k as i32 - 1 {
                    seq.tree.is_chain = false;
                    all_chains = false;
                }
                children.entry(p).or_default().push(k);
                if p == -1 {
                    depth.push(0);
                    roots.push(k);
                } else {
                    depth.push(depth[p as usize] + 1);
                }
            }
            // Pre-order DFS numbering: a node's interval [first, end) covers its descendants.
            let mut order = vec![(0i32, 0i32); n];
            let mut next = 0i32;
            for &r in &roots {
                // Iterative DFS: (node, index of the next child to visit).
                let mut stack = vec![(r, 0usize)];
                order[r].0 = next;
                next += 1;
                while let Some(&mut (node, ref mut ci)) = stack.last_mut() {
                    let kids = children.get(&(node as i32)).map_or(&[][..], Vec::as_slice);
                    if *ci < kids.len() {
                        let c = kids[*ci];
                        *ci += 1;
                        order[c].0 = next;
                        next += 1;
                        stack.push((c, 0));
                    } else {
                        stack.pop();
                        let end = kids.iter().map(|&c| order[c].1).max().unwrap_or(0).max(order[node].0 + 1);
                        order[node].1 = end;
                    }
                }
            }
            for (first, end) in order {
                mask.push(first);
                mask.push(end);
            }
            seq.tree.depth = depth;
        }
        out.is_chain[d] = all_chains;
        out.mn_indptr[d] = indptr;
        out.mask[d] = mask;
        if !append_before_attn {
            break;
        }
    }
    Ok(out)
}

/// The K/V moves and pops of a commit: `(indptr, src, dst)` positions in the pages for the
/// compaction kernel (`None` when the trees are chains), and `(sequence, tokens to pop)`.
pub(crate) struct Commit {
    pub(crate) copies: Option<(Vec<i32>, Vec<i32>, Vec<i32>)>,
    pub(crate) pops: Vec<(i64, i64)>,
}

/// Plans `commit_accepted_token_tree_nodes` against the last step (its sequences, lengths,
/// append positions and indptr), checking everything first.
pub(crate) fn plan_commit(
    pool: &Pool,
    ids: &[i64],
    leaves: &[i64],
    step_ids: &[i64],
    step_lens: &[i32],
    append_pos: &[i32],
    append_indptr: &[i32],
) -> Result<Commit> {
    if ids.len() != leaves.len() {
        return Err(err(format!(
            "expected as many leaf indices as sequence ids, found {} and {}",
            leaves.len(),
            ids.len()
        )));
    }
    if ids.len() > step_ids.len() {
        return Err(err(format!("{} sequences to commit, but the last step had {}", ids.len(), step_ids.len())));
    }
    if let Some((i, _)) = ids.iter().zip(step_ids).enumerate().find(|(_, (a, b))| a != b) {
        // TVM pops the last step's i-th sequence for the i-th id: they must be the same.
        return Err(err(format!(
            "the sequences to commit must be the last step's, in its order: position {i} is {}, the step had {}",
            ids[i], step_ids[i]
        )));
    }
    let mut is_chain = true;
    for (&id, &leaf) in ids.iter().zip(leaves) {
        let s = pool.seq(id)?;
        is_chain = s.tree.is_chain;
        if leaf != -1 && s.tree.committed {
            return Err(err(format!("the accepted nodes of sequence {id} are already committed")));
        }
        if leaf < -1 || leaf >= s.tree.parent.len() as i64 {
            return Err(err(format!(
                "invalid tree index {leaf} for sequence {id}: expected -1 to {} (its token tree's size minus one)",
                s.tree.parent.len() as i64 - 1
            )));
        }
    }
    let mut copies = None;
    if !is_chain {
        if ids.len() != step_ids.len() {
            return Err(err(format!(
                "committing token trees needs every sequence of the last step ({}), found {}",
                step_ids.len(),
                ids.len()
            )));
        }
        let (mut indptr, mut src, mut dst) = (vec![0i32], Vec::new(), Vec::new());
        for (i, (&id, &leaf)) in ids.iter().zip(leaves).enumerate() {
            if leaf == -1 {
                indptr.push(*indptr.last().unwrap());
                continue;
            }
            let tree = &pool.seq(id)?.tree;
            let mut path = Vec::new();
            let mut node = leaf as i32;
            while node != -1 {
                path.push(node);
                node = tree.parent[node as usize];
            }
            // Destinations: positions 0.. of the accepted path; nodes already in place stay.
            let mut to: Vec<i32> = (0..path.len() as i32).rev().collect();
            while !path.is_empty() && path.last() == to.last() {
                path.pop();
                to.pop();
            }
            path.reverse();
            to.reverse();
            // TVM looks nodes up among the sequence's tokens of the last step (node k at its
            // k-th token), also for a tree grown over several steps; a node past them has no
            // position there (TVM reads outside the sequence's part of the array): refused.
            let (base, end) = (append_indptr[i] as usize, append_indptr[i + 1] as usize);
            let at = |k: i32| -> Result<i32> {
                append_pos.get(base + k as usize).copied().filter(|_| base + (k as usize) < end).ok_or_else(|| {
                    err(format!(
                        "cannot commit node {k} of sequence {id}: the last step appended only {} tokens to it, and a node's position is taken from them",
                        end - base
                    ))
                })
            };
            for (&p, &t) in path.iter().zip(&to) {
                src.push(at(p)?);
                dst.push(at(t)?);
            }
            indptr.push(indptr.last().unwrap() + path.len() as i32);
        }
        copies = Some((indptr, src, dst));
    }
    let mut pops = Vec::with_capacity(ids.len());
    for (i, (&id, &leaf)) in ids.iter().zip(leaves).enumerate() {
        let kept = if leaf == -1 { 0 } else { i64::from(pool.seq(id)?.tree.depth[leaf as usize]) + 1 };
        pops.push((step_ids[i], i64::from(step_lens[i]) - kept));
    }
    Ok(Commit { copies, pops })
}
