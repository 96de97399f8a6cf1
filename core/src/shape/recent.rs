//! The shapes made last on this thread through [`Shape::interned`] (by `make_shape`,
//! `alloc_shape_heap` and numpy arrays passed in), handed out again for equal dimensions.
//!
//! Shapes are immutable values, so a result equal to a recent one can be that one, shared (a
//! reference count, instead of an allocation and a later free): nothing can tell the two apart
//! but identity, which only lets the interpreter skip writes of a value already in place.
//! Compiled programs make the same few shapes at every call (the sizes of their allocations),
//! and callers pass arrays of the same few shapes.

use crate::shape::Shape;
use std::cell::RefCell;

/// How many shapes are kept: each shape has one slot, chosen by a hash of its dimensions, so
/// a model cycling through more distinct shapes than a round-robin list holds still finds each
/// in place (a list of four, replaced in turn, missed every time for five or more).
const SLOTS: usize = 16;

/// The largest rank kept: longer shapes are rare and costlier to compare.
const MAX_RANK: usize = 6;

thread_local! {
    /// Recent shapes, each in the slot [`slot_of`] its dimensions pick.
    static RECENT: RefCell<[Option<Shape>; SLOTS]> = const { RefCell::new([const { None }; SLOTS]) };
}

/// A shape of `dims`: a recent equal one when there is one, else a new one, remembered.
pub(crate) fn shape_of_dims(dims: &[i64]) -> Shape {
    if dims.len() > MAX_RANK {
        return Shape::from(dims);
    }
    let slot = slot_of(dims);
    // `try_with` fails only while the thread is being torn down: then make a new shape.
    RECENT
        .try_with(|r| {
            let mut r = r.borrow_mut();
            let kept = &mut r[slot];
            match kept {
                Some(s) if same_dims(s, dims) => s.clone(),
                _ => kept.insert(Shape::from(dims)).clone(),
            }
        })
        .unwrap_or_else(|_| Shape::from(dims))
}

/// The slot of `dims`: a multiplicative hash of the rank and dimensions (Fibonacci hashing),
/// its top bits.
#[inline]
pub(crate) fn slot_of(dims: &[i64]) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let h = dims.iter().fold((dims.len() as u64).wrapping_mul(K), |h, d| (h ^ *d as u64).wrapping_mul(K));
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

/// `a == b`, compared word by word: slice equality calls `memcmp`, which costs more than the
/// comparison itself for a few dimensions.
#[inline]
pub(crate) fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_recent_shapes_are_shared_and_a_slot_keeps_the_last() {
        let a = shape_of_dims(&[1, 32]);
        assert!(a.ptr_eq(&shape_of_dims(&[1, 32])), "an equal recent shape is shared");
        let c = shape_of_dims(&[32, 1]);
        assert!(!c.ptr_eq(&a) && c.dims() == [32, 1]);
        // A shape of the same slot replaces it: [1, 32] is then made anew, equal, not shared.
        let rival = (0..).map(|n| [n]).find(|d| slot_of(d) == slot_of(&[1, 32])).unwrap();
        shape_of_dims(&rival);
        let d = shape_of_dims(&[1, 32]);
        assert!(!d.ptr_eq(&a) && d == a);
        let long = [1, 2, 3, 4, 5, 6, 7];
        assert!(!shape_of_dims(&long).ptr_eq(&shape_of_dims(&long)), "long shapes are not kept");
        assert_eq!(shape_of_dims(&[]).dims(), &[] as &[i64]);
    }

    #[test]
    fn a_cycle_through_shapes_of_distinct_slots_finds_each_again() {
        // A list replaced in turn would have forgotten every one before its next use.
        let mut distinct: Vec<[i64; 2]> = Vec::new();
        for dims in (1..=64).map(|n| [1, n]) {
            if distinct.len() < 6 && distinct.iter().all(|d| slot_of(d) != slot_of(&dims)) {
                distinct.push(dims);
            }
        }
        assert_eq!(distinct.len(), 6);
        let first: Vec<Shape> = distinct.iter().map(|d| shape_of_dims(d)).collect();
        for (d, s) in distinct.iter().zip(&first) {
            assert!(shape_of_dims(d).ptr_eq(s), "{d:?} was kept");
        }
    }
}
