//! libstdc++'s `std::stable_sort` and heap algorithms (`make_heap`, `push_heap`, `pop_heap`),
//! step for step, so that results match TVM's `sort.cc` (built with GCC) bit for bit — even
//! for comparators that are not strict weak orders, such as `<` on floats with NaN, where the
//! result depends on the exact sequence of comparisons and moves.
//!
//! `less(a, b)` is the C++ comparator `comp(a, b)`. The structure follows libstdc++'s
//! `bits/stl_algo.h` and `bits/stl_heap.h`: a merge sort through a buffer of half the length
//! (chunks of 7 sorted by insertion, merged in rounds, the halves merged last), and binary heaps
//! with the hole-moving sift-down then sift-up of `__adjust_heap`.

//!
//! Long sorts poll: every loop reports its work to a [`Ticker`] every [`BLOCK`] elements or so,
//! which polls for interrupts every [`POLL_EVERY`] elements of work. Polling changes no
//! comparison or move; a failed poll abandons the sort (its caller then writes nothing).

use relaxvm::pool::POLL_EVERY;
use relaxvm::Result;

/// Chunk length of the insertion-sorted runs (`_S_chunk_size`).
const CHUNK: usize = 7;

/// How many elements a loop handles between two reports to its [`Ticker`].
pub(crate) const BLOCK: usize = 1 << 14;

/// Counts the work of a sort's loops and polls every [`POLL_EVERY`] elements of it.
pub(crate) struct Ticker<'a> {
    since: usize,
    poll: &'a mut dyn FnMut() -> Result<()>,
}

impl<'a> Ticker<'a> {
    /// A ticker that calls `poll`.
    pub(crate) fn new(poll: &'a mut dyn FnMut() -> Result<()>) -> Self {
        Ticker { since: 0, poll }
    }

    /// Records `work` elements handled; polls when enough accumulated.
    pub(crate) fn tick(&mut self, work: usize) -> Result<()> {
        self.since = self.since.saturating_add(work);
        if self.since >= POLL_EVERY {
            self.since = 0;
            (self.poll)()?;
        }
        Ok(())
    }
}

/// `std::stable_sort(v.begin(), v.end(), less)`.
pub(crate) fn stable_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool, t: &mut Ticker<'_>) -> Result<()> {
    let len = v.len();
    t.tick(len)?;
    if len == 0 {
        return Ok(());
    }
    // `_Temporary_buffer` of (len + 1) / 2 elements; its initial contents are overwritten.
    let half = len.div_ceil(2);
    let mut buffer: Vec<T> = v[..half].to_vec();
    merge_sort_with_buffer(&mut v[..half], &mut buffer, less, t)?;
    merge_sort_with_buffer(&mut v[half..], &mut buffer, less, t)?;
    merge_adaptive(v, half, &mut buffer, less, t)
}

/// `__merge_adaptive` with a buffer that holds the shorter run.
fn merge_adaptive<T: Copy>(
    v: &mut [T],
    middle: usize,
    buffer: &mut [T],
    less: &impl Fn(&T, &T) -> bool,
    t: &mut Ticker<'_>,
) -> Result<()> {
    let (len1, len2) = (middle, v.len() - middle);
    if len1 <= len2 {
        buffer[..len1].copy_from_slice(&v[..middle]);
        // __move_merge_adaptive(buffer, buffer + len1, middle, last, first).
        let (mut i1, mut i2, mut out) = (0, middle, 0);
        while i1 < len1 && i2 < v.len() {
            if out % BLOCK == 0 {
                t.tick(BLOCK)?;
            }
            if less(&v[i2], &buffer[i1]) {
                v[out] = v[i2];
                i2 += 1;
            } else {
                v[out] = buffer[i1];
                i1 += 1;
            }
            out += 1;
        }
        v[out..out + (len1 - i1)].copy_from_slice(&buffer[i1..len1]);
        Ok(())
    } else {
        buffer[..len2].copy_from_slice(&v[middle..]);
        // __move_merge_adaptive_backward(first, middle, buffer, buffer + len2, last).
        if len2 == 0 {
            return Ok(());
        }
        // len1 > len2 >= 1 here, so both runs are non-empty.
        let (mut last1, mut last2, mut out) = (middle - 1, len2 - 1, v.len());
        loop {
            if out % BLOCK == 0 {
                t.tick(BLOCK)?;
            }
            if less(&buffer[last2], &v[last1]) {
                out -= 1;
                v[out] = v[last1];
                if last1 == 0 {
                    v[out - (last2 + 1)..out].copy_from_slice(&buffer[..=last2]);
                    return Ok(());
                }
                last1 -= 1;
            } else {
                out -= 1;
                v[out] = buffer[last2];
                if last2 == 0 {
                    return Ok(());
                }
                last2 -= 1;
            }
        }
    }
}

/// `__merge_sort_with_buffer`: insertion-sorted chunks, then merge rounds alternating between
/// the range and the buffer (two rounds per iteration, so the result ends in the range).
fn merge_sort_with_buffer<T: Copy>(
    v: &mut [T],
    buffer: &mut [T],
    less: &impl Fn(&T, &T) -> bool,
    t: &mut Ticker<'_>,
) -> Result<()> {
    let len = v.len();
    for (i, chunk) in v.chunks_mut(CHUNK).enumerate() {
        if i % BLOCK == 0 {
            t.tick(BLOCK * CHUNK)?;
        }
        insertion_sort(chunk, less);
    }
    let mut step = CHUNK;
    while step < len {
        merge_sort_loop(v, &mut buffer[..len], step, less, t)?;
        step *= 2;
        merge_sort_loop(&buffer[..len], v, step, less, t)?;
        step *= 2;
    }
    Ok(())
}

/// `__merge_sort_loop`: merges adjacent runs of `step` from `from` into `to`.
fn merge_sort_loop<T: Copy>(
    from: &[T],
    to: &mut [T],
    step: usize,
    less: &impl Fn(&T, &T) -> bool,
    t: &mut Ticker<'_>,
) -> Result<()> {
    let len = from.len();
    let mut first = 0;
    while len - first >= 2 * step {
        move_merge(&from[first..first + step], &from[first + step..first + 2 * step], &mut to[first..], less, t)?;
        first += 2 * step;
    }
    let step = step.min(len - first);
    move_merge(&from[first..first + step], &from[first + step..], &mut to[first..], less, t)
}

/// `__move_merge`: merges `a` and `b` into `out`, taking from `b` only when strictly less.
fn move_merge<T: Copy>(
    a: &[T],
    b: &[T],
    out: &mut [T],
    less: &impl Fn(&T, &T) -> bool,
    t: &mut Ticker<'_>,
) -> Result<()> {
    let (mut i, mut j, mut k) = (0, 0, 0);
    t.tick(a.len().min(BLOCK))?;
    while i < a.len() && j < b.len() {
        if k % BLOCK == BLOCK - 1 {
            t.tick(BLOCK)?;
        }
        if less(&b[j], &a[i]) {
            out[k] = b[j];
            j += 1;
        } else {
            out[k] = a[i];
            i += 1;
        }
        k += 1;
    }
    let rest_a = a.len() - i;
    out[k..k + rest_a].copy_from_slice(&a[i..]);
    out[k + rest_a..k + rest_a + (b.len() - j)].copy_from_slice(&b[j..]);
    Ok(())
}

/// `__insertion_sort`, with `__unguarded_linear_insert`.
fn insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        let val = v[i];
        if less(&val, &v[0]) {
            v.copy_within(0..i, 1);
            v[0] = val;
        } else {
            // Stops at index 1 at the latest: less(val, v[0]) was false.
            let mut hole = i;
            while hole > 0 && less(&val, &v[hole - 1]) {
                v[hole] = v[hole - 1];
                hole -= 1;
            }
            v[hole] = val;
        }
    }
}

/// `std::make_heap(v.begin(), v.end(), less)`.
pub(crate) fn make_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let value = v[parent];
        adjust_heap(v, parent, len, value, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

/// `std::push_heap(v.begin(), v.end(), less)`: the last element joins the heap before it.
pub(crate) fn push_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let Some(&value) = v.last() else { return };
    push_hole(v, v.len() - 1, 0, value, less);
}

/// `std::pop_heap(v.begin(), v.end(), less)`: the top moves to the end, the rest stays a heap.
pub(crate) fn pop_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len > 1 {
        let value = v[len - 1];
        v[len - 1] = v[0];
        adjust_heap(v, 0, len - 1, value, less);
    }
}

/// `__adjust_heap`: moves the hole at `hole` down to a leaf along the larger children, then
/// places `value` by sifting it up from there (no further than `hole`'s starting index).
fn adjust_heap<T: Copy>(v: &mut [T], mut hole: usize, len: usize, value: T, less: &impl Fn(&T, &T) -> bool) {
    let top = hole;
    let mut child = hole;
    while child < (len.saturating_sub(1)) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len.is_multiple_of(2) && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    push_hole(v, hole, top, value, less);
}

/// `__push_heap`: sifts `value` up from `hole` while its parent is less than it.
fn push_hole<T: Copy>(v: &mut [T], mut hole: usize, top: usize, value: T, less: &impl Fn(&T, &T) -> bool) {
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&v[parent], &value) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (no dependency needed for test data).
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn stable_sort_sorts_stably_for_every_length() {
        let mut seed = 7;
        for len in 0..200 {
            let v: Vec<(u32, usize)> = (0..len).map(|i| ((lcg(&mut seed) % 10) as u32, i)).collect();
            let mut ours = v.clone();
            stable_sort(&mut ours, &|a: &(u32, usize), b: &(u32, usize)| a.0 < b.0, &mut Ticker::new(&mut || Ok(())))
                .unwrap();
            let mut expected = v;
            expected.sort_by_key(|p| p.0);
            assert_eq!(ours, expected, "length {len}");
        }
    }

    #[test]
    fn heaps_keep_the_greatest_on_top() {
        let mut seed = 11;
        for len in 1..100 {
            let mut v: Vec<u64> = (0..len).map(|_| lcg(&mut seed) % 50).collect();
            let less = |a: &u64, b: &u64| a < b;
            make_heap(&mut v, &less);
            let mut sorted = v.clone();
            sorted.sort();
            let mut popped = Vec::new();
            for end in (1..=v.len()).rev() {
                pop_heap(&mut v[..end], &less);
                popped.push(v[end - 1]);
            }
            popped.reverse();
            assert_eq!(popped, sorted, "length {len}");
            let mut h = Vec::new();
            for x in [5u64, 1, 9, 3, 9, 0] {
                h.push(x);
                push_heap(&mut h, &less);
                assert_eq!(h[0], *h.iter().max().unwrap());
            }
        }
    }

    #[test]
    fn nan_orders_follow_the_algorithm_not_a_total_order() {
        // With `<` on floats NaN compares false both ways; the result is what libstdc++ gives
        // (checked against TVM's tvm.contrib.sort.argsort), not NaN-last.
        let mut v: Vec<(i64, f32)> =
            [3.0, f32::NAN, 1.0, 2.0, f32::NAN, 0.0].iter().enumerate().map(|(i, x)| (i as i64, *x)).collect();
        stable_sort(&mut v, &|a: &(i64, f32), b: &(i64, f32)| a.1 < b.1, &mut Ticker::new(&mut || Ok(()))).unwrap();
        let order: Vec<i64> = v.iter().map(|p| p.0).collect();
        assert_eq!(order, [5, 2, 3, 0, 1, 4]);
    }
}
