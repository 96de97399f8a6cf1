use super::*;

const MB: usize = 1 << 20;

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

#[test]
fn threads_running_at_once_each_keep_a_block_and_map_nothing_after_the_first_round() {
    // One cache for the process (review R-pool-7), here a cache of its own: two threads whose
    // workspaces are in use at the same time (2 and 3 MiB) get blocks of their own, both kept,
    // and from the second round on are handed kept blocks only.
    use std::sync::{Arc, Barrier};
    let cache = Arc::new(Cache::new());
    let barrier = Arc::new(Barrier::new(2));
    let run = |size: usize| {
        let (cache, barrier) = (cache.clone(), barrier.clone());
        std::thread::spawn(move || {
            (0..4)
                .map(|_| {
                    let (len, p) = cache.take_or_map(size);
                    assert!(!p.is_null() && len >= size);
                    // Both threads hold their blocks here.
                    barrier.wait();
                    // SAFETY: from take_or_map, given back once and not used after.
                    unsafe { cache.give_back(len, p) };
                    barrier.wait();
                    p as usize
                })
                .collect::<Vec<usize>>()
        })
    };
    let (a, b) = (run(2 * MB), run(3 * MB));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    if !relaxvm::block_cache::enabled() {
        assert_eq!(cache.kept(), (0, 0), "RELAXVM_BLOCK_CACHE=0: nothing is kept");
        return;
    }
    let first = [a[0], b[0]];
    assert!(a.iter().chain(&b).all(|p| first.contains(p)), "only the first round's blocks: {a:x?} {b:x?}");
    assert_eq!(cache.kept().0, 2);
    cache.release_all();
}

#[test]
fn an_unload_releases_the_cache_and_the_unloading_threads_small_blocks_only() {
    // Review R-pool-5. A cache of its own (the process's is shared with other tests), and two
    // fresh threads: one keeps a small block, the other unloads.
    use super::super::small_blocks;
    use std::sync::mpsc;
    let cache = Cache::new();
    let (kept_tx, kept_rx) = mpsc::channel();
    let (unloaded_tx, unloaded_rx) = mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        let (len, p) = small_blocks::take_or_alloc(2000);
        // SAFETY: the block holds `len` writable bytes; given back once, then not used.
        unsafe {
            std::ptr::write_bytes(p, 0x77, len);
            small_blocks::give_back(len, p);
        }
        kept_tx.send(()).unwrap();
        unloaded_rx.recv().unwrap();
        if relaxvm::block_cache::enabled() {
            // Not the library's memory: after the unload the block is still this thread's,
            // valid, its bytes as left, and handed to the next workspace.
            assert_eq!(small_blocks::kept(), (1, len));
            let (again_len, again) = small_blocks::take_or_alloc(1000);
            assert_eq!((again_len, again), (len, p));
            // SAFETY: the block holds `len` bytes; given back once.
            unsafe {
                assert_eq!(*again.add(len - 1), 0x77);
                small_blocks::give_back(again_len, again);
            }
        }
    });
    let cache = &cache;
    std::thread::scope(|s| {
        s.spawn(move || {
            kept_rx.recv().unwrap();
            let (len, p) = small_blocks::take_or_alloc(3000);
            let (mlen, m) = cache.take_or_map(MB);
            // SAFETY: each from its cache, given back once and not used after.
            unsafe {
                small_blocks::give_back(len, p);
                cache.give_back(mlen, m);
            }
            let on = usize::from(relaxvm::block_cache::enabled());
            assert_eq!((small_blocks::kept().0, cache.kept().0), (on, on));
            release_for_unload(cache);
            assert_eq!((small_blocks::kept(), cache.kept()), ((0, 0), (0, 0)));
            unloaded_tx.send(()).unwrap();
        });
    });
    other.join().unwrap();
}
