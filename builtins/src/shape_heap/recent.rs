//! The shapes `make_shape` (and `alloc_shape_heap`) made last on this thread, handed out again
//! for equal dimensions.
//!
//! Shapes are immutable values, so a result equal to a recent one can be that one, shared (a
//! reference count, instead of an allocation and a later free): nothing can tell the two apart
//! but identity, which only lets the interpreter skip writes of a value already in place.
//! Compiled programs make the same few shapes at every call (the sizes of their allocations).

use relaxvm::Shape;
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
pub(super) fn shape_of_dims(dims: &[i64]) -> Shape {
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
pub(super) fn slot_of(dims: &[i64]) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let h = dims.iter().fold((dims.len() as u64).wrapping_mul(K), |h, d| (h ^ *d as u64).wrapping_mul(K));
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

/// `a == b`, compared word by word: slice equality calls `memcmp`, which costs more than the
/// comparison itself for a few dimensions.
#[inline]
fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}
