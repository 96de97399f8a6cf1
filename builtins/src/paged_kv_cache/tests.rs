//! Bookkeeping tests without kernels: pages, blocks, forks, popn, step arrays and refusals
//! that leave the table unchanged. (The kernels' bytes are tested against TVM's recordings in
//! `tests/test_tvm_paged_kv_cache.py`.)

use super::forward::{self, Limits};
use super::pool::{PageCopy, Pool};

const PS: i32 = 16;

fn limits() -> Limits {
    Limits { reserved_num_seqs: 8, prefill_chunk_size: 256, layer_sliding_window: None, inline_rope: false }
}

/// Appends `len` tokens to `id` as a step does (the arrays are dropped).
fn append(p: &mut Pool, id: i64, len: i64) -> forward::Plan {
    forward::check(p, &[id], &[len], &limits()).unwrap();
    forward::begin(p, &[id], &[len], None, &limits(), None).unwrap()
}

fn used(p: &Pool) -> usize {
    p.num_total_pages as usize - p.free_pages.len()
}

#[test]
fn pages_are_taken_from_zero_up_and_freed_to_the_end() {
    let mut p = Pool::new(PS, 10, false).unwrap();
    p.add(0).unwrap();
    let plan = append(&mut p, 0, 20);
    assert_eq!(p.blocks[0].page_ids, vec![0, 1]);
    assert_eq!(plan.append_position_map[..3], [0, 1, 2]);
    assert_eq!(plan.append_position_map[16], 16);
    assert_eq!(p.seq(0).unwrap().seq_length, 20);
    p.add(1).unwrap();
    append(&mut p, 1, 1);
    assert_eq!(p.blocks[1].page_ids, vec![2]);
    p.remove(0).unwrap();
    assert_eq!(p.free_pages[p.free_pages.len() - 2..], [0, 1]);
    p.add(2).unwrap();
    // The freed block is reused; the page taken last freed (1) comes first.
    append(&mut p, 2, 1);
    assert_eq!(p.blocks[0].page_ids, vec![1]);
    p.remove(1).unwrap();
    p.remove(2).unwrap();
    assert!(p.is_empty());
}

#[test]
fn refused_calls_change_nothing() {
    let mut p = Pool::new(PS, 4, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 17);
    let before = format!("{p:?}");
    assert!(p.add(0).unwrap_err().to_string().contains("already in the KV cache"));
    assert!(p.remove(9).unwrap_err().to_string().contains("not in the KV cache"));
    assert!(p.popn(0, 18).unwrap_err().to_string().contains("expected 0 to its length 17"));
    assert_eq!(
        p.popn(0, -1).unwrap_err().to_string(),
        "cannot pop -1 tokens from sequence 0: expected 0 to its length 17"
    );
    assert!(p.fork(9, 1, -1).unwrap_err().to_string().contains("cannot fork from sequence 9"));
    assert!(p.fork(0, 0, -1).unwrap_err().to_string().contains("cannot fork onto sequence 0"));
    assert!(p.fork(0, 1, 18).unwrap_err().to_string().contains("out of range"));
    assert_eq!(
        p.fork(0, 1, -2).unwrap_err().to_string(),
        "fork position -2 is out of range: expected -1 (the end) or 0 to 17 (the length of sequence 0)"
    );
    assert!(p.enable_sliding_window(0, 8, 2).unwrap_err().to_string().contains("without sliding-window support"));
    assert_eq!(format!("{p:?}"), before);
    // Step checks: a missing sequence, a duplicate, zero length, too many tokens.
    let l = limits();
    assert!(forward::check(&p, &[0, 5], &[1, 1], &l).unwrap_err().to_string().contains("sequence 5"));
    assert!(forward::check(&p, &[0, 0], &[1, 1], &l).unwrap_err().to_string().contains("twice"));
    assert!(forward::check(&p, &[0], &[0], &l).unwrap_err().to_string().contains("positive append length"));
    assert!(forward::check(&p, &[0], &[300], &l).unwrap_err().to_string().contains("prefill chunk size"));
    assert_eq!(
        forward::check(&p, &[0], &[1, 2], &l).unwrap_err().to_string(),
        "expected as many append lengths as sequence ids, found 1 ids and 2 lengths"
    );
    assert_eq!(
        forward::check(&p, &[], &[], &l).unwrap_err().to_string(),
        "expected at least one sequence in the batch, found none"
    );
    assert_eq!(format!("{p:?}"), before);
}

#[test]
fn a_full_cache_fails_midway_and_reports_it() {
    let mut p = Pool::new(PS, 2, false).unwrap();
    p.add(0).unwrap();
    forward::check(&p, &[0], &[40], &limits()).unwrap();
    let before = format!("{p:?}");
    p.checkpoint();
    let e = forward::begin(&mut p, &[0], &[40], None, &limits(), None).unwrap_err();
    assert!(e.to_string().contains("the KV cache is full"), "{e}");
    // The journal gives the free list back without having copied it (kvcache/01).
    p.rollback();
    assert_eq!(format!("{p:?}"), before);
    // And a later operation that frees and takes pages rolls back too.
    append(&mut p, 0, 20);
    let before = format!("{p:?}");
    p.checkpoint();
    p.popn(0, 20).unwrap();
    p.add(1).unwrap();
    append(&mut p, 1, 5);
    p.rollback();
    assert_eq!(format!("{p:?}"), before);
}

#[test]
fn fork_mid_page_copies_the_page_head_and_shares_whole_pages() {
    let mut p = Pool::new(PS, 16, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 40); // pages 0, 1, 2
    let copy = p.fork(0, 1, 35).unwrap();
    // 32 tokens (pages 0, 1) move to a new shared parent block; page 2's first 3 tokens copy.
    assert_eq!(copy, Some(PageCopy { src: 2, dst: 3, len: 3 }));
    let parent_trace = p.trace(p.seq(0).unwrap());
    let child_trace = p.trace(p.seq(1).unwrap());
    assert_eq!(parent_trace.len(), 2);
    assert_eq!(child_trace.len(), 2);
    assert_eq!(parent_trace[0], child_trace[0]);
    assert_eq!(p.blocks[parent_trace[0] as usize].page_ids, vec![0, 1]);
    assert_eq!(p.blocks[parent_trace[0] as usize].refs, 2);
    assert_eq!(p.seq(1).unwrap().seq_length, 35);
    assert_eq!(p.positions(p.seq(1).unwrap())[32..], [48, 49, 50]);
    // A fork of a fork at a page boundary copies nothing.
    assert_eq!(p.fork(1, 2, 16).unwrap(), None);
    assert_eq!(p.seq(2).unwrap().seq_length, 16);
    // Removing everything frees everything.
    for id in [1, 0, 2] {
        p.remove(id).unwrap();
    }
    assert!(p.is_empty());
}

#[test]
fn fork_at_the_end_of_a_full_page_gives_the_parent_a_new_block() {
    let mut p = Pool::new(PS, 8, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 32);
    assert_eq!(p.fork(0, 1, -1).unwrap(), None);
    // Both can append after the fork, into pages of their own.
    append(&mut p, 0, 1);
    append(&mut p, 1, 1);
    assert_eq!(used(&p), 4);
    assert_eq!(p.seq(0).unwrap().seq_length, 33);
}

#[test]
fn popn_into_a_shared_prefix_forks_the_kept_part() {
    let mut p = Pool::new(PS, 16, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 35);
    p.fork(0, 1, -1).unwrap(); // mid-page: copies page 2's 3 tokens
    append(&mut p, 1, 5);
    let used_before = used(&p);
    // Pop 10 of 40: 5 own tokens, then 5 of the shared prefix (35 -> 30, inside page 1).
    // Popping into the shared prefix needs the snapshot; the child's own 5 tokens do not.
    assert!(p.pop_is_unshared(1, 5));
    assert!(!p.pop_is_unshared(1, 10));
    assert!(!p.pop_is_unshared(1, 41) && !p.pop_is_unshared(1, -1) && !p.pop_is_unshared(9, 1));
    let copy = p.popn(1, 10).unwrap();
    assert_eq!(p.seq(1).unwrap().seq_length, 30);
    assert_eq!(p.seq(0).unwrap().seq_length, 35);
    assert_eq!(copy.map(|c| c.len), Some(14));
    assert!(used(&p) <= used_before);
    p.remove(0).unwrap();
    p.remove(1).unwrap();
    assert!(p.is_empty());
}

#[test]
fn popn_within_a_private_block_frees_its_tail_pages() {
    let mut p = Pool::new(PS, 8, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 40);
    assert!(p.pop_is_unshared(0, 40) && p.pop_is_unshared(0, 0));
    assert_eq!(p.popn(0, 25).unwrap(), None);
    assert_eq!(p.blocks[0].page_ids, vec![0]);
    assert_eq!(used(&p), 1);
    assert_eq!(p.popn(0, 0).unwrap(), None);
    assert_eq!(p.popn(0, 15).unwrap(), None);
    assert_eq!(p.seq(0).unwrap().seq_length, 0);
    assert_eq!(used(&p), 0);
}

#[test]
fn decode_appends_before_attention_and_prefill_after() {
    let mut p = Pool::new(PS, 16, false).unwrap();
    p.add(0).unwrap();
    p.add(1).unwrap();
    let plan = append(&mut p, 0, 20);
    assert!(!plan.append_before_attn);
    // Arrays of a prefill are built before the append: no pages yet.
    assert_eq!(plan.depths[0].page_indices, Vec::<i32>::new());
    forward::check(&p, &[0, 1], &[1, 1], &limits()).unwrap();
    let plan = forward::begin(&mut p, &[0, 1], &[1, 1], None, &limits(), None).unwrap();
    assert!(plan.append_before_attn);
    assert!(plan.depths[0].use_decode_kernel);
    assert_eq!(plan.depths[0].page_indptr, vec![0, 2, 3]);
    assert_eq!(plan.depths[0].last_page_len, vec![5, 1]);
    assert_eq!(plan.q_rope_position_map, vec![20, 0]);
    assert_eq!(plan.k_ragged_rope_pos_offset, vec![20, 0]);
    assert_eq!(plan.cur_append_length_indptr, vec![0, 1, 2]);
}

#[test]
fn forked_batches_use_two_depths_and_coalesce_the_shared_block() {
    let mut p = Pool::new(PS, 32, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 32);
    p.fork(0, 1, -1).unwrap();
    p.fork(0, 2, -1).unwrap();
    forward::check(&p, &[1, 2], &[3, 4], &limits()).unwrap();
    let plan = forward::begin(&mut p, &[1, 2], &[3, 4], None, &limits(), None).unwrap();
    assert_eq!(plan.depths.len(), 2);
    // Depth 0: both share the root block, coalesced into one row of 7 queries.
    assert_eq!(plan.depths[0].qo_indptr, vec![0, 7]);
    assert_eq!(plan.depths[0].page_indices, vec![0, 1]);
    // Depth 1: one row each, not coalesced.
    assert_eq!(plan.depths[1].qo_indptr, vec![0, 3, 7]);
}

#[test]
fn deep_chains_concatenate_trailing_blocks_at_the_last_depth() {
    let mut p = Pool::new(PS, 64, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 16);
    p.fork(0, 1, -1).unwrap();
    append(&mut p, 1, 16);
    p.fork(1, 2, -1).unwrap();
    append(&mut p, 2, 16);
    p.fork(2, 3, -1).unwrap();
    let plan = append(&mut p, 3, 2);
    assert_eq!(plan.depths.len(), 2);
    // Depth 1 holds the second block and every block after it.
    assert_eq!(plan.depths[1].page_indptr, vec![0, 2]);
}

#[test]
fn sliding_window_frees_slid_pages_and_keeps_the_sink() {
    let mut p = Pool::new(PS, 16, true).unwrap();
    p.add(0).unwrap();
    p.enable_sliding_window(0, 20, 4).unwrap();
    assert!(p.enable_sliding_window(0, 20, 4).unwrap_err().to_string().contains("already"));
    append(&mut p, 0, 40);
    assert_eq!(p.seq(0).unwrap().seq_length, 20);
    assert_eq!(p.blocks[0].sink_length, 4);
    assert!(used(&p) <= 3);
    // Forks past the sink are refused.
    assert!(p.fork(0, 1, 10).unwrap_err().to_string().contains("attention sink"));
}

#[test]
fn token_trees_build_dfs_masks_and_commit_the_accepted_path() {
    let mut p = Pool::new(PS, 16, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 10);
    let parents = [-1, 0, 0, 1, 1, 2, 2];
    forward::check(&p, &[0], &[7], &limits()).unwrap();
    let plan = forward::begin(&mut p, &[0], &[7], Some(&parents), &limits(), None).unwrap();
    assert!(!plan.tree.is_chain[0]);
    assert_eq!(plan.tree.mn_indptr[0], vec![0, 7]);
    assert_eq!(plan.tree.mask[0], vec![0, 7, 1, 4, 4, 7, 2, 3, 3, 4, 5, 6, 6, 7]);
    // Queries are placed at the prefix length plus their depth.
    assert_eq!(plan.q_rope_position_map, vec![10, 11, 11, 12, 12, 12, 12]);
    assert!(!p.seq(0).unwrap().tree.committed);
    // Forking or stepping without a tree before the commit is refused.
    assert!(p.fork(0, 1, -1).unwrap_err().to_string().contains("not committed"));
    forward::check(&p, &[0], &[1], &limits()).unwrap();
    let mut q = p.clone();
    assert!(forward::begin(&mut q, &[0], &[1], None, &limits(), None).unwrap_err().to_string().contains("uncommitted"));
    // Accept leaf 6 (path 0 -> 2 -> 6): node 2 moves to position 1, node 6 to 2; 4 tokens pop.
    let c = super::tree::plan_commit(
        &p,
        &[0],
        &[6],
        &plan.seq_ids,
        &plan.append_lengths,
        &plan.append_position_map,
        &plan.cur_append_length_indptr,
    )
    .unwrap();
    let (indptr, src, dst) = c.copies.unwrap();
    assert_eq!(indptr, vec![0, 2]);
    assert_eq!(src, vec![plan.append_position_map[2], plan.append_position_map[6]]);
    assert_eq!(dst, vec![plan.append_position_map[1], plan.append_position_map[2]]);
    assert_eq!(c.pops, vec![(0, 4)]);
    // Bad leaves are refused.
    for (leaf, msg) in [(7, "invalid tree index 7"), (-2, "invalid tree index -2")] {
        let e = super::tree::plan_commit(
            &p,
            &[0],
            &[leaf],
            &plan.seq_ids,
            &plan.append_lengths,
            &plan.append_position_map,
            &plan.cur_append_length_indptr,
        );
        assert!(e.err().unwrap().to_string().contains(msg));
    }
    // Invalid trees: a parent after its node, too few parent pointers.
    let mut q = Pool::new(PS, 16, false).unwrap();
    q.add(0).unwrap();
    for (tree, msg) in [(&[-1i64, 2, 0][..], "the parent of node 1 is 2"), (&[-1i64][..], "fewer than")] {
        let mut r = q.clone();
        let e = forward::begin(&mut r, &[0], &[3], Some(tree), &limits(), None).unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
    }
}

/// Attack finding kvcache/02: a tree grown over two uncommitted steps, committed at a node the
/// last step did not append, was an index past the step's positions (a panic, or another
/// sequence's K/V moved in a batch): now a refusal naming the node.
#[test]
fn committing_a_node_outside_the_last_step_is_refused() {
    let mut p = Pool::new(PS, 16, false).unwrap();
    p.add(0).unwrap();
    p.add(1).unwrap();
    forward::begin(&mut p, &[0, 1], &[5, 5], None, &limits(), None).unwrap();
    forward::begin(&mut p, &[0], &[3], Some(&[-1, 0, 0]), &limits(), None).unwrap();
    let plan = forward::begin(&mut p, &[0, 1], &[2, 2], Some(&[1, 3, -1, -1]), &limits(), None).unwrap();
    let commit = |ids: &[i64], leaves: &[i64]| {
        super::tree::plan_commit(
            &p,
            ids,
            leaves,
            &plan.seq_ids,
            &plan.append_lengths,
            &plan.append_position_map,
            &plan.cur_append_length_indptr,
        )
    };
    let e = commit(&[0, 1], &[4, -1]).err().unwrap();
    assert!(e.to_string().contains("cannot commit node 3 of sequence 0"), "{e}");
    let e = commit(&[1, 0], &[-1, 4]).err().unwrap();
    assert!(e.to_string().contains("in its order"), "{e}");
}

#[test]
fn a_plan_made_in_an_earlier_plans_buffers_is_the_same_plan() {
    // Two pools in the same state; one step's plan made fresh, the other's in the buffers of
    // a plan of another shape (two depths, several sequences, more tokens).
    let mut p = Pool::new(PS, 32, false).unwrap();
    p.add(0).unwrap();
    append(&mut p, 0, 20);
    p.fork(0, 1, -1).unwrap();
    let mut q = p.clone();
    let big = forward::begin(&mut q.clone(), &[0, 1], &[9, 4], None, &limits(), None).unwrap();
    assert_eq!(big.depths.len(), 2);
    for (ids, lens) in [(&[1][..], &[1][..]), (&[0, 1], &[3, 2]), (&[0], &[40])] {
        let fresh = forward::begin(&mut p, ids, lens, None, &limits(), None).unwrap();
        let reused = forward::begin(&mut q, ids, lens, None, &limits(), Some(big.clone())).unwrap();
        assert_eq!(fresh, reused);
    }
}
