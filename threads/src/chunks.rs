//! Work over a large byte range, split into fixed chunks that the pool's threads take in turn:
//! the comparison of large constants and the digests the builder deduplicates them by
//! (`relaxvm_builder`'s constant pool), which would take one core tens of milliseconds for a
//! 256 MiB weight.
//!
//! Chunks have a fixed size, so what is computed per chunk — and anything made of the results,
//! which come back in chunk order — does not depend on how many threads there are.

use crate::{Pool, Task};
use std::convert::Infallible;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The chunk size of the work this module splits (4 MiB: a millisecond or so of hashing or
/// comparing, long enough that a task's start-up does not count).
pub const CHUNK: usize = 4 << 20;

/// `f` of every chunk of `0..len` (`[i * chunk, min((i + 1) * chunk, len))`), in chunk order,
/// computed by the threads of `pool` — the caller among them — as they come free. Work that
/// fits one chunk runs on the caller alone.
pub fn map_chunks<R: Send + Sync>(
    pool: &Pool,
    len: usize,
    chunk: usize,
    f: impl Fn(Range<usize>) -> R + Sync,
) -> Vec<R> {
    let chunk = chunk.max(1);
    let n = len.div_ceil(chunk);
    let range = |i: usize| i * chunk..((i + 1) * chunk).min(len);
    if n <= 1 {
        return (0..n).map(|i| f(range(i))).collect();
    }
    let results: Vec<OnceLock<R>> = (0..n).map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    let work = |_: &Task<'_>| -> Result<(), Infallible> {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return Ok(());
            }
            // Each index is taken once, so each slot is set once.
            let _ = results[i].set(f(range(i)));
        }
    };
    // A task that panicked leaves its chunk unset: it is computed again below, on the caller,
    // where the panic shows as the caller's own.
    let _ = pool.help_caller(0, &work, &mut |t| work(t));
    results.into_iter().enumerate().map(|(i, r)| r.into_inner().unwrap_or_else(|| f(range(i)))).collect()
}

/// `a == b`, the chunks of large slices compared on the global pool's threads.
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() || a.len() <= CHUNK {
        return a == b;
    }
    map_chunks(crate::global(), a.len(), CHUNK, |r| a[r.clone()] == b[r]).into_iter().all(|eq| eq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_once_in_order_whatever_the_thread_count() {
        for threads in [1, 2, 3] {
            let pool = Pool::new(threads);
            for len in [0, 1, 6, 7, 8, 70, 73] {
                let got = map_chunks(&pool, len, 7, |r| (r.start, r.end));
                let want: Vec<_> = (0..len.div_ceil(7)).map(|i| (i * 7, ((i + 1) * 7).min(len))).collect();
                assert_eq!(got, want, "{threads} threads, {len} bytes");
            }
        }
    }

    #[test]
    fn a_panicking_chunk_panics_on_the_caller() {
        let pool = Pool::new(2);
        let r = std::panic::catch_unwind(|| map_chunks(&pool, 40, 4, |r| assert!(r.start != 20, "chunk at 20")));
        let payload = r.expect_err("the chunk's panic reaches the caller");
        let message = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        assert_eq!(message, Some("chunk at 20"), "the chunk's own panic, not another");
        // The pool is usable afterwards.
        assert_eq!(map_chunks(&pool, 8, 4, |r| r.len()), [4, 4]);
    }

    #[test]
    fn large_slices_compare_by_chunks() {
        let a = vec![7u8; 3 * CHUNK + 5];
        let mut b = a.clone();
        assert!(bytes_eq(&a, &b));
        for at in [0, CHUNK, 3 * CHUNK + 4] {
            b[at] ^= 1;
            assert!(!bytes_eq(&a, &b), "a difference at byte {at}");
            b[at] ^= 1;
        }
        assert!(!bytes_eq(&a, &b[1..]));
        assert!(bytes_eq(&a[..10], &b[..10]));
        b[3] ^= 1;
        assert!(!bytes_eq(&a[..10], &b[..10]), "a small difference");
    }
}
