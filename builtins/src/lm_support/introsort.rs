//! libstdc++'s `std::sort` (`bits/stl_algo.h`: introsort, then a final insertion sort), step
//! for step, so that the order it leaves equal keys in — which TVM's top-p sampling returns as
//! the sampled token — is TVM's.
//!
//! `std::sort` is not stable: which of two equal logits comes first depends on every
//! comparison and swap the algorithm makes (median-of-three pivots, Hoare partitions, a heap
//! sort past the depth limit, insertion sorts of 16 elements). Reproducing the steps is the
//! only way to return the same index for ties.
//!
//! libstdc++'s "unguarded" loops rely on the comparator being a strict weak order to stop
//! inside the range; `>` on floats with NaN among the keys is not one (NaN is incomparable with
//! everything, and incomparability is then not transitive). Here every index is checked, and a
//! step outside the range would be an error ([`OutOfRange`]) where TVM's behaviour is undefined.
//! With `>` it has not been seen to happen (`nan_keys_stay_inside`: NaN, being irreflexive and
//! false both ways, only ever stops the scans); the check stays, as it costs nothing.

use crate::contrib_sort::stl::{make_heap, pop_heap};

/// `_S_threshold`: partitions of at most this many elements are left to the insertion sort.
const THRESHOLD: usize = 16;

/// The sort stepped outside the range (a comparator that is not a strict weak order).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OutOfRange;

/// `std::sort(v.begin(), v.end(), less)`.
pub(crate) fn sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> Result<(), OutOfRange> {
    if v.is_empty() {
        return Ok(());
    }
    // `std::__lg(n) * 2`: twice the floor of log2(n).
    let depth = 2 * (usize::BITS - 1 - v.len().leading_zeros()) as usize;
    introsort_loop(v, depth, less)?;
    final_insertion_sort(v, less)
}

/// `__introsort_loop`: partitions around a median-of-three pivot, recursing on the right part
/// and looping on the left, until parts are small; past the depth limit, a heap sort.
fn introsort_loop<T: Copy>(v: &mut [T], mut depth: usize, less: &impl Fn(&T, &T) -> bool) -> Result<(), OutOfRange> {
    let mut last = v.len();
    while last > THRESHOLD {
        let part = &mut v[..last];
        if depth == 0 {
            // `__partial_sort(first, last, last)`: make_heap, then sort_heap.
            make_heap(part, less);
            for end in (2..=part.len()).rev() {
                pop_heap(&mut part[..end], less);
            }
            return Ok(());
        }
        depth -= 1;
        let cut = unguarded_partition_pivot(part, less)?;
        introsort_loop(&mut part[cut..], depth, less)?;
        last = cut;
    }
    Ok(())
}

/// `__unguarded_partition_pivot`: the median of the second, middle and last elements moves to
/// the front, then the rest is partitioned around it.
fn unguarded_partition_pivot<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> Result<usize, OutOfRange> {
    let (len, mid) = (v.len(), v.len() / 2);
    move_median_to_first(v, 1, mid, len - 1, less);
    unguarded_partition(v, less)
}

/// `__move_median_to_first(result = 0, a, b, c)`.
fn move_median_to_first<T: Copy>(v: &mut [T], a: usize, b: usize, c: usize, less: &impl Fn(&T, &T) -> bool) {
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, pick);
}

/// `__unguarded_partition(first + 1, last, pivot = first)`: Hoare's scheme; returns the cut.
fn unguarded_partition<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> Result<usize, OutOfRange> {
    let pivot = v[0];
    let (mut first, mut last) = (1usize, v.len());
    loop {
        while less(v.get(first).ok_or(OutOfRange)?, &pivot) {
            first += 1;
        }
        last = last.checked_sub(1).ok_or(OutOfRange)?;
        while less(&pivot, v.get(last).ok_or(OutOfRange)?) {
            last = last.checked_sub(1).ok_or(OutOfRange)?;
        }
        if first >= last {
            return Ok(first);
        }
        v.swap(first, last);
        first += 1;
    }
}

/// `__final_insertion_sort`: a guarded insertion sort of the first 16, then an unguarded one of
/// the rest (the smallest element is among the first 16 after the partitions).
fn final_insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> Result<(), OutOfRange> {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less)?;
        for i in THRESHOLD..v.len() {
            unguarded_linear_insert(v, i, less)?;
        }
        Ok(())
    } else {
        insertion_sort(v, less)
    }
}

/// `__insertion_sort`.
fn insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> Result<(), OutOfRange> {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let val = v[i];
            v.copy_within(0..i, 1);
            v[0] = val;
        } else {
            unguarded_linear_insert(v, i, less)?;
        }
    }
    Ok(())
}

/// `__unguarded_linear_insert`: moves `v[i]` left past every element it is less than.
fn unguarded_linear_insert<T: Copy>(
    v: &mut [T],
    mut i: usize,
    less: &impl Fn(&T, &T) -> bool,
) -> Result<(), OutOfRange> {
    let val = v[i];
    let mut next = i.checked_sub(1).ok_or(OutOfRange)?;
    while less(&val, &v[next]) {
        v[i] = v[next];
        i = next;
        next = next.checked_sub(1).ok_or(OutOfRange)?;
    }
    v[i] = val;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn sorts_every_length_with_many_ties() {
        let mut seed = 3;
        for len in 0..400 {
            let v: Vec<(u32, usize)> = (0..len).map(|i| ((lcg(&mut seed) % 7) as u32, i)).collect();
            let mut ours = v.clone();
            sort(&mut ours, &|a: &(u32, usize), b: &(u32, usize)| a.0 > b.0).unwrap();
            let keys: Vec<u32> = ours.iter().map(|p| p.0).collect();
            let mut expected: Vec<u32> = v.iter().map(|p| p.0).collect();
            expected.sort_by(|a, b| b.cmp(a));
            assert_eq!(keys, expected, "length {len}");
            let mut idx: Vec<usize> = ours.iter().map(|p| p.1).collect();
            idx.sort();
            assert_eq!(idx, (0..len).collect::<Vec<_>>(), "a permutation, length {len}");
        }
    }

    #[test]
    fn depth_limit_falls_back_to_the_heap_sort() {
        // All equal keys: every partition cuts near the middle, so depth stays small; a
        // "median-of-three killer" is long to build, so force the heap sort directly.
        let mut v: Vec<(i32, usize)> = (0..100).map(|i| ((i * 37 % 11) as i32, i)).collect();
        introsort_loop(&mut v, 0, &|a: &(i32, usize), b: &(i32, usize)| a.0 > b.0).unwrap();
        let keys: Vec<i32> = v.iter().map(|p| p.0).collect();
        assert!(keys.windows(2).all(|w| w[0] >= w[1]), "{keys:?}");
    }

    #[test]
    fn ties_keep_libstdcxx_order() {
        // std::sort of (key, index) pairs by key descending, as g++ 12 (libstdc++) orders them:
        // 20 pairs (the insertion sort alone) and 100 pairs (partitions, then insertion sorts).
        let order = |n: usize, key: fn(usize) -> i32| {
            let mut v: Vec<(i32, usize)> = (0..n).map(|i| (key(i), i)).collect();
            sort(&mut v, &|a: &(i32, usize), b: &(i32, usize)| a.0 > b.0).unwrap();
            v.iter().map(|p| p.1).collect::<Vec<usize>>()
        };
        assert_eq!(
            order(20, |i| (i % 3) as i32),
            [2, 17, 5, 14, 8, 11, 10, 19, 16, 13, 7, 4, 1, 0, 9, 12, 6, 15, 3, 18]
        );
        assert_eq!(
            order(100, |i| (i * 7 % 5) as i32),
            [
                42, 27, 72, 77, 22, 32, 47, 67, 82, 17, 52, 87, 12, 37, 62, 92, 7, 57, 97, 2, 64, 44, 34, 39, 59, 69,
                29, 79, 74, 54, 24, 19, 84, 14, 89, 49, 9, 94, 4, 99, 56, 51, 1, 61, 66, 71, 76, 81, 86, 91, 96, 21,
                31, 6, 36, 26, 41, 11, 46, 16, 88, 18, 68, 78, 23, 83, 73, 28, 8, 13, 93, 33, 63, 38, 3, 58, 43, 98,
                53, 48, 0, 95, 10, 90, 5, 50, 15, 85, 20, 80, 25, 75, 30, 70, 35, 65, 40, 60, 45, 55
            ]
        );
    }

    #[test]
    fn nan_keys_stay_inside() {
        // Keys from 7 values with a growing share of NaN, lengths 17 to 316: every sort ends
        // inside the range, with the numbers in order around the NaNs' positions.
        let mut seed = 1u64;
        for round in 0..20_000usize {
            let len = 17 + round % 300;
            let mut v: Vec<(f32, usize)> = (0..len)
                .map(|i| {
                    let r = lcg(&mut seed) % 100;
                    (if r < (round % 50) as u64 { f32::NAN } else { (r % 7) as f32 }, i)
                })
                .collect();
            sort(&mut v, &|a: &(f32, usize), b: &(f32, usize)| a.0 > b.0).unwrap();
            let mut idx: Vec<usize> = v.iter().map(|p| p.1).collect();
            idx.sort();
            assert_eq!(idx, (0..len).collect::<Vec<_>>());
        }
    }

    #[test]
    fn an_inconsistent_comparator_is_an_error_not_a_read_outside() {
        // A comparator that is always true never stops libstdc++'s unguarded scans.
        let mut v: Vec<u8> = (0..40).collect();
        assert_eq!(sort(&mut v, &|_: &u8, _: &u8| true), Err(OutOfRange));
    }
}
