use super::*;
use crate::ffi::mapped_blocks::{MAX_BLOCKS, MAX_BYTES};

/// A block of `len` bytes at a made-up address (the policy never touches it), named by `id`.
fn b(id: usize, len: usize) -> Block {
    Block::new(len, std::ptr::null_mut::<u8>().wrapping_add(id))
}

fn ids(blocks: &[Block]) -> Vec<usize> {
    blocks.iter().map(|b| b.base as usize).collect()
}

const MB: usize = 1 << 20;

#[test]
fn a_request_gets_the_smallest_kept_block_that_holds_it() {
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    for (id, len) in [(1, 3 * MB), (2, MB), (3, 2 * MB)] {
        assert!(k.insert_evicting(b(id, len)).is_empty());
    }
    assert_eq!(k.counts(), (3, 6 * MB));
    // However much larger: a 128 KiB request takes the 1 MiB block (TVM's rule).
    assert_eq!(k.take(128 << 10), Ok(b(2, MB)));
    assert_eq!(k.take(MB + 1), Ok(b(3, 2 * MB)));
    assert_eq!(k.take(3 * MB), Ok(b(1, 3 * MB)));
    assert_eq!(k.counts(), (0, 0));
    assert_eq!(k.take(1), Err(None), "nothing kept: nothing replaced");
}

#[test]
fn a_request_no_block_holds_replaces_the_largest_smaller_one() {
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    for (id, len) in [(1, MB), (2, 2 * MB)] {
        assert!(k.insert_evicting(b(id, len)).is_empty());
    }
    // A 3 MiB request: the new mapping replaces the 2 MiB block, the 1 MiB one stays.
    assert_eq!(k.take(3 * MB), Err(Some(b(2, 2 * MB))));
    assert_eq!(k.counts(), (1, MB));
    // Kernels that run one after another, the largest first, then share one block: after the
    // 3 MiB block comes back, every smaller request takes it in turn and nothing is mapped.
    assert!(k.insert_evicting(b(3, 3 * MB)).is_empty());
    for size in [3 * MB, 2 * MB, MB + 7, 200 << 10] {
        let got = k.take(size).expect("a kept block");
        assert_eq!(got.base as usize, if size <= MB { 1 } else { 3 }, "{size}");
        assert!(k.insert_evicting(got).is_empty());
    }
}

#[test]
fn the_cache_stays_bounded_evicting_smaller_blocks_first() {
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    // MAX_BLOCKS small blocks fill it by count.
    for id in 0..MAX_BLOCKS {
        assert!(k.insert_evicting(b(id + 1, 64 << 10)).is_empty());
    }
    // One more of the same size cannot evict one as large: it leaves itself.
    assert_eq!(ids(&k.insert_evicting(b(100, 64 << 10))), [100]);
    // A larger one evicts the smallest (the first kept of equal size).
    assert_eq!(ids(&k.insert_evicting(b(101, MB))), [1]);
    assert_eq!(k.counts(), (MAX_BLOCKS, (MAX_BLOCKS - 1) * (64 << 10) + MB));
    // Bytes: a block that needs more room than the smaller blocks give is refused whole, and
    // nothing is evicted for it.
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    assert!(k.insert_evicting(b(1, MAX_BYTES - 2 * MB)).is_empty());
    assert!(k.insert_evicting(b(2, MB)).is_empty());
    assert_eq!(ids(&k.insert_evicting(b(3, 4 * MB))), [3], "only a larger block could make room");
    assert_eq!(k.counts(), (2, MAX_BYTES - MB));
    // One that the smaller blocks make room for evicts just enough of them.
    assert!(k.insert_evicting(b(4, 512 << 10)).is_empty());
    assert_eq!(ids(&k.insert_evicting(b(5, 2 * MB))), [4, 2], "smallest first, until it fits");
    assert_eq!(k.counts(), (2, MAX_BYTES));
    // A block bigger than the whole cache is never kept, and evicts nothing.
    assert_eq!(ids(&k.insert_evicting(b(6, MAX_BYTES + 1))), [6]);
    assert_eq!(k.counts(), (2, MAX_BYTES));
    assert_eq!(ids(&k.take_all()), [5, 1]);
    assert_eq!(k.counts(), (0, 0));
}

#[test]
fn two_threads_sharing_the_cache_keep_a_block_each_and_map_nothing_after_the_first_round() {
    // One cache for the process (review R-pool-7): thread A's largest workspace is 2 MiB,
    // thread B's 3 MiB. Whether they run in turn or at once, after the first round every
    // request is served from what is kept (no miss, so no map and no unmap).
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    let mut next_id = 0;
    let mut misses = 0;
    let mut take = |k: &mut Kept, size: usize, misses: &mut usize| match k.take(size) {
        Ok(b) => b,
        Err(_replaced) => {
            *misses += 1;
            next_id += 1;
            b(next_id, size)
        }
    };
    // In turn: A, then B, then A... B's first request replaces A's smaller block; from then on
    // both take the 3 MiB block (the smallest that holds each).
    for round in 0..4 {
        for size in [2 * MB, 3 * MB] {
            let got = take(&mut k, size, &mut misses);
            assert!(k.insert_evicting(got).is_empty());
        }
        assert_eq!(misses, 2, "round {round}: only the first round maps");
    }
    assert_eq!(k.counts(), (1, 3 * MB));
    // At once: both hold a block at the same time; the second is mapped in the first round,
    // then both are kept and each round takes them again.
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    misses = 0;
    for round in 0..4 {
        let a = take(&mut k, 2 * MB, &mut misses);
        let b3 = take(&mut k, 3 * MB, &mut misses);
        assert!(k.insert_evicting(a).is_empty() && k.insert_evicting(b3).is_empty());
        assert_eq!(misses, 2, "round {round}: only the first round maps");
    }
    assert_eq!(k.counts(), (2, 5 * MB));
}
