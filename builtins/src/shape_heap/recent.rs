//! The shapes `make_shape` (and `alloc_shape_heap`) made last on this thread, handed out again
//! for equal dimensions.
//!
//! Shapes are immutable values, so a result equal to a recent one can be that one, shared (a
//! reference count, instead of an allocation and a later free): nothing can tell the two apart
//! but identity, which only lets the interpreter skip writes of a value already in place.
//! Compiled programs make the same few shapes at every call (the sizes of their allocations).

use relaxvm::Shape;
use std::cell::RefCell;

/// How many shapes are kept (a compiled model makes a handful of distinct ones per call).
const SLOTS: usize = 4;

/// The largest rank kept: longer shapes are rare and costlier to compare.
const MAX_RANK: usize = 6;

thread_local! {
    /// Recent shapes, and the slot the next new one replaces (round robin).
    static RECENT: RefCell<([Option<Shape>; SLOTS], usize)> = const { RefCell::new(([const { None }; SLOTS], 0)) };
}

/// A shape of `dims`: a recent equal one when there is one, else a new one, remembered.
pub(super) fn shape_of_dims(dims: &[i64]) -> Shape {
    if dims.len() > MAX_RANK {
        return Shape::from(dims);
    }
    // `try_with` fails only while the thread is being torn down: then make a new shape.
    RECENT
        .try_with(|r| {
            let mut r = r.borrow_mut();
            let (slots, next) = &mut *r;
            if let Some(s) = slots.iter().flatten().find(|s| same_dims(s, dims)) {
                return s.clone();
            }
            let s = Shape::from(dims);
            slots[*next] = Some(s.clone());
            *next = (*next + 1) % SLOTS;
            s
        })
        .unwrap_or_else(|_| Shape::from(dims))
}

/// `a == b`, compared word by word: slice equality calls `memcmp`, which costs more than the
/// comparison itself for a few dimensions.
#[inline]
fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}
