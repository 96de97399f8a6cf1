//! Shape tuples: immutable, cheaply cloned lists of dimensions.

mod recent;

use smallvec::SmallVec;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A tuple of dimensions (TVM's `ShapeTuple`). Cloning shares the data; one pointer wide.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Shape(Arc<Dims>);

/// Dimensions stored inline for the common ranks: a shape of rank up to 4 is one allocation.
type Dims = SmallVec<[i64; 4]>;

impl Shape {
    /// A shape from its dimensions.
    pub fn new(dims: impl Into<Vec<i64>>) -> Self {
        Shape::from(dims.into())
    }

    /// A shape of `dims`, interned per thread: one made recently on this thread with equal
    /// dimensions when there is one (shared, no allocation), else a new one, remembered. For
    /// shapes made again and again, such as those a compiled model or its caller make at every
    /// call.
    pub fn interned(dims: &[i64]) -> Self {
        recent::shape_of_dims(dims)
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.0
    }

    /// True when the dimensions are `dims` (compared word by word: cheaper than slice
    /// equality's `memcmp` for a few dimensions).
    #[inline]
    pub fn has_dims(&self, dims: &[i64]) -> bool {
        recent::same_dims(&self.0, dims)
    }

    /// True when both handles share one shape object.
    pub fn ptr_eq(&self, other: &Shape) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The number of elements a tensor of this shape holds, or `None` on overflow or a
    /// negative dimension.
    pub fn numel(&self) -> Option<usize> {
        numel(&self.0)
    }
}

/// The product of `dims`, or `None` on overflow or a negative dimension.
pub fn numel(dims: &[i64]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
}

impl Deref for Shape {
    type Target = [i64];
    fn deref(&self) -> &[i64] {
        &self.0
    }
}

impl From<Vec<i64>> for Shape {
    fn from(v: Vec<i64>) -> Self {
        Shape(Arc::new(if v.len() <= 4 { Dims::from_slice(&v) } else { Dims::from_vec(v) }))
    }
}

impl From<&[i64]> for Shape {
    fn from(v: &[i64]) -> Self {
        Shape(Arc::new(Dims::from_slice(v)))
    }
}

impl FromIterator<i64> for Shape {
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Self {
        Shape(Arc::new(iter.into_iter().collect()))
    }
}

impl<const N: usize> From<[i64; N]> for Shape {
    fn from(v: [i64; N]) -> Self {
        Shape(Arc::new(Dims::from_slice(&v)))
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Shape {
    /// Python tuple syntax: `(32, 16)`, `(3,)`, `()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        if self.0.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_like_python() {
        assert_eq!(Shape::from([32, 16]).to_string(), "(32, 16)");
        assert_eq!(Shape::from([3]).to_string(), "(3,)");
        assert_eq!(Shape::from([]).to_string(), "()");
    }

    #[test]
    fn numel_checks_overflow_and_sign() {
        assert_eq!(Shape::from([2, 3]).numel(), Some(6));
        assert_eq!(Shape::from([]).numel(), Some(1));
        assert_eq!(Shape::from([-1, 3]).numel(), None);
        assert_eq!(Shape::from([i64::MAX, 4]).numel(), None);
    }
}
