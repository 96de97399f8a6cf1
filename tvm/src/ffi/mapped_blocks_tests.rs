use super::*;

/// A block of `len` bytes at a made-up address (the policy never touches it), named by `id`.
fn b(id: usize, len: usize) -> Block {
    Block { len, base: std::ptr::null_mut::<u8>().wrapping_add(id) }
}

fn ids(blocks: &[Block]) -> Vec<usize> {
    blocks.iter().map(|b| b.base as usize).collect()
}

const MB: usize = 1 << 20;

#[test]
fn a_request_gets_the_smallest_kept_block_that_holds_it() {
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    for (id, len) in [(1, 3 * MB), (2, MB), (3, 2 * MB)] {
        assert!(k.keep(b(id, len)).is_empty());
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
        assert!(k.keep(b(id, len)).is_empty());
    }
    // A 3 MiB request: the new mapping replaces the 2 MiB block, the 1 MiB one stays.
    assert_eq!(k.take(3 * MB), Err(Some(b(2, 2 * MB))));
    assert_eq!(k.counts(), (1, MB));
    // Kernels that run one after another, the largest first, then share one block: after the
    // 3 MiB block comes back, every smaller request takes it in turn and nothing is mapped.
    assert!(k.keep(b(3, 3 * MB)).is_empty());
    for size in [3 * MB, 2 * MB, MB + 7, 200 << 10] {
        let got = k.take(size).expect("a kept block");
        assert_eq!(got.base as usize, if size <= MB { 1 } else { 3 }, "{size}");
        assert!(k.keep(got).is_empty());
    }
}

#[test]
fn the_cache_stays_bounded_evicting_smaller_blocks_first() {
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    // MAX_BLOCKS small blocks fill it by count.
    for id in 0..MAX_BLOCKS {
        assert!(k.keep(b(id + 1, 64 << 10)).is_empty());
    }
    // One more of the same size cannot evict one as large: it leaves itself.
    assert_eq!(ids(&k.keep(b(100, 64 << 10))), [100]);
    // A larger one evicts the smallest (the first kept of equal size).
    assert_eq!(ids(&k.keep(b(101, MB))), [1]);
    assert_eq!(k.counts(), (MAX_BLOCKS, (MAX_BLOCKS - 1) * (64 << 10) + MB));
    // Bytes: a block that needs more room than the smaller blocks give is refused whole, and
    // nothing is evicted for it.
    let mut k = Kept::new(MAX_BLOCKS, MAX_BYTES);
    assert!(k.keep(b(1, MAX_BYTES - 2 * MB)).is_empty());
    assert!(k.keep(b(2, MB)).is_empty());
    assert_eq!(ids(&k.keep(b(3, 4 * MB))), [3], "only a larger block could make room");
    assert_eq!(k.counts(), (2, MAX_BYTES - MB));
    // One that the smaller blocks make room for evicts just enough of them.
    assert!(k.keep(b(4, 512 << 10)).is_empty());
    assert_eq!(ids(&k.keep(b(5, 2 * MB))), [4, 2], "smallest first, until it fits");
    assert_eq!(k.counts(), (2, MAX_BYTES));
    // A block bigger than the whole cache is never kept, and evicts nothing.
    assert_eq!(ids(&k.keep(b(6, MAX_BYTES + 1))), [6]);
    assert_eq!(k.counts(), (2, MAX_BYTES));
    assert_eq!(ids(&k.take_all()), [5, 1]);
    assert_eq!(k.counts(), (0, 0));
}

#[test]
fn a_cache_hands_a_freed_block_back_with_its_bytes_and_unmaps_on_release() {
    // A cache of its own: the process's is shared with every test running kernels.
    let cache = Cache::new();
    let (len, p) = cache.take_or_map(3 * MB + 100);
    assert!(!p.is_null() && len >= 3 * MB + 100 && len.is_multiple_of(PAGE), "{len}");
    // SAFETY: the block holds `len` writable bytes; given back once, then not used.
    unsafe {
        std::ptr::write_bytes(p, 0xcd, len);
        cache.give_back(len, p);
    }
    if !relaxvm::block_cache::enabled() {
        // RELAXVM_BLOCK_CACHE=0: nothing is kept.
        assert_eq!(cache.kept(), (0, 0));
        return;
    }
    assert_eq!(cache.kept(), (1, len));
    // A smaller request gets the same block, its bytes as they were left (not zeroed, as TVM's).
    let (again_len, again) = cache.take_or_map(MB);
    assert_eq!((again_len, again), (len, p));
    // SAFETY: the block holds `len` bytes.
    assert_eq!(unsafe { *again.add(len - 1) }, 0xcd);
    // A larger request while it is out is a new mapping.
    let (big_len, big) = cache.take_or_map(4 * MB);
    assert!(big != p && big_len >= 4 * MB);
    // SAFETY: each from take_or_map, given back once and not used after.
    unsafe {
        cache.give_back(again_len, again);
        cache.give_back(big_len, big);
    }
    assert_eq!(cache.kept(), (2, len + big_len));
    cache.release_all();
    assert_eq!(cache.kept(), (0, 0));
    // Released blocks were unmapped: the next request is a new mapping of the size asked.
    let (n, q) = cache.take_or_map(PAGE);
    assert_eq!(n, PAGE);
    // SAFETY: from take_or_map, given back once.
    unsafe { cache.give_back(n, q) };
    cache.release_all();
}
