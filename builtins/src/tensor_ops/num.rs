//! Arithmetic on tensor elements with numpy's semantics, for every element type:
//! integers wrap, `maximum`/`minimum` propagate NaN, booleans use logical or/and, and half
//! floats compute in `f32` and round back (as numpy does).

use half::{bf16, f16};
use relaxvm::Element;

/// An element type the elementwise, reduction and matmul kernels run on.
pub(crate) trait Num: Element + bytemuck::Zeroable {
    /// Zero (`false`).
    const ZERO: Self;
    /// `a + b` (wrapping for integers, `or` for booleans).
    fn plus(self, o: Self) -> Self;
    /// `a - b` (wrapping; booleans are rejected before this is reached).
    fn minus(self, o: Self) -> Self;
    /// `a * b` (wrapping for integers, `and` for booleans).
    fn times(self, o: Self) -> Self;
    /// numpy's `maximum`: NaN if either is NaN.
    fn maximum(self, o: Self) -> Self;
    /// numpy's `minimum`: NaN if either is NaN.
    fn minimum(self, o: Self) -> Self;
    /// `-a` (wrapping for integers, so `-(u8 1)` is 255).
    fn negate(self) -> Self;
    /// `maximum(a, 0)`.
    fn relu(self) -> Self;
    /// A Python int as this type, or `None` when it is out of range (NEP 50: numpy 2 raises
    /// `OverflowError` for `uint8_array + 300`). Floats take the nearest value.
    fn from_int(i: i64) -> Option<Self>;
    /// The value as `i64` when it is an integer that fits.
    fn to_int(self) -> Option<i64>;
}

/// A floating-point element type.
pub(crate) trait Float: Num {
    /// True division.
    fn quotient(self, o: Self) -> Self;
    /// `e^a`.
    fn exponential(self) -> Self;
    /// `sqrt(a)` (NaN for negative values).
    fn square_root(self) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            #[inline(always)]
            fn plus(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn minus(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn times(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn maximum(self, o: Self) -> Self { Ord::max(self, o) }
            #[inline(always)]
            fn minimum(self, o: Self) -> Self { Ord::min(self, o) }
            #[inline(always)]
            fn negate(self) -> Self { self.wrapping_neg() }
            #[inline(always)]
            fn relu(self) -> Self { Ord::max(self, 0) }
            fn from_int(i: i64) -> Option<Self> { <$t>::try_from(i).ok() }
            fn to_int(self) -> Option<i64> { i64::try_from(self).ok() }
        }
    )*};
}
int_num!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_num {
    ($($t:ident),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn plus(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn minus(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn times(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn maximum(self, o: Self) -> Self { if self.is_nan() || o.is_nan() { $t::NAN } else if self > o { self } else { o } }
            #[inline(always)]
            fn minimum(self, o: Self) -> Self { if self.is_nan() || o.is_nan() { $t::NAN } else if self < o { self } else { o } }
            #[inline(always)]
            fn negate(self) -> Self { -self }
            #[inline(always)]
            fn relu(self) -> Self { if self > 0.0 || self.is_nan() { self } else { 0.0 } }
            fn from_int(i: i64) -> Option<Self> { Some(i as $t) }
            fn to_int(self) -> Option<i64> { None }
        }
        impl Float for $t {
            #[inline(always)]
            fn quotient(self, o: Self) -> Self { self / o }
            #[inline(always)]
            fn exponential(self) -> Self { self.exp() }
            #[inline(always)]
            fn square_root(self) -> Self { self.sqrt() }
        }
    )*};
}
float_num!(f32, f64);

macro_rules! half_num {
    ($($t:ident),*) => {$(
        impl Num for $t {
            const ZERO: Self = $t::ZERO;
            #[inline(always)]
            fn plus(self, o: Self) -> Self { $t::from_f32(self.to_f32() + o.to_f32()) }
            #[inline(always)]
            fn minus(self, o: Self) -> Self { $t::from_f32(self.to_f32() - o.to_f32()) }
            #[inline(always)]
            fn times(self, o: Self) -> Self { $t::from_f32(self.to_f32() * o.to_f32()) }
            #[inline(always)]
            fn maximum(self, o: Self) -> Self { $t::from_f32(Num::maximum(self.to_f32(), o.to_f32())) }
            #[inline(always)]
            fn minimum(self, o: Self) -> Self { $t::from_f32(Num::minimum(self.to_f32(), o.to_f32())) }
            #[inline(always)]
            fn negate(self) -> Self { -self }
            #[inline(always)]
            fn relu(self) -> Self { $t::from_f32(self.to_f32().relu()) }
            fn from_int(i: i64) -> Option<Self> { Some($t::from_f64(i as f64)) }
            fn to_int(self) -> Option<i64> { None }
        }
        impl Float for $t {
            #[inline(always)]
            fn quotient(self, o: Self) -> Self { $t::from_f32(self.to_f32() / o.to_f32()) }
            #[inline(always)]
            fn exponential(self) -> Self { $t::from_f32(self.to_f32().exp()) }
            #[inline(always)]
            fn square_root(self) -> Self { $t::from_f32(self.to_f32().sqrt()) }
        }
    )*};
}
half_num!(f16, bf16);

impl Num for bool {
    const ZERO: Self = false;
    #[inline(always)]
    fn plus(self, o: Self) -> Self {
        self | o
    }
    #[inline(always)]
    fn minus(self, o: Self) -> Self {
        self ^ o
    }
    #[inline(always)]
    fn times(self, o: Self) -> Self {
        self & o
    }
    #[inline(always)]
    fn maximum(self, o: Self) -> Self {
        self | o
    }
    #[inline(always)]
    fn minimum(self, o: Self) -> Self {
        self & o
    }
    #[inline(always)]
    fn negate(self) -> Self {
        !self
    }
    #[inline(always)]
    fn relu(self) -> Self {
        self
    }
    fn from_int(i: i64) -> Option<Self> {
        match i {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn to_int(self) -> Option<i64> {
        Some(i64::from(self))
    }
}

/// Runs `$body` with `$t` bound to the floating-point element type of `$dtype`; any other
/// dtype evaluates `$other`.
macro_rules! dispatch_float {
    ($dtype:expr, $t:ident => $body:expr, _ => $other:expr) => {{
        use relaxvm::DataType as __D;
        match $dtype {
            __D::F16 => {
                type $t = half::f16;
                $body
            }
            __D::BF16 => {
                type $t = half::bf16;
                $body
            }
            __D::F32 => {
                type $t = f32;
                $body
            }
            __D::F64 => {
                type $t = f64;
                $body
            }
            _ => $other,
        }
    }};
}
pub(crate) use dispatch_float;

/// The fallback of a [`dispatch_float!`] over a dtype already chosen to be a float: the one
/// message of every such site (reached only by a bug in that choice).
pub(crate) fn not_a_float(name: &str, dtype: relaxvm::DataType) -> relaxvm::Error {
    relaxvm::Error::value(format!("{name}: internal error: {dtype} is not a float type"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_wrap_and_floats_propagate_nan() {
        assert_eq!(i8::MAX.plus(1), i8::MIN);
        assert_eq!(1u8.negate(), 255);
        assert_eq!(0u8.minus(1), 255);
        assert_eq!(i64::MIN.times(-1), i64::MIN);
        assert!(Num::maximum(f32::NAN, 1.0).is_nan() && Num::minimum(1.0f64, f64::NAN).is_nan());
        assert!(f16::NAN.maximum(f16::ONE).is_nan());
        assert_eq!((-3i32).relu(), 0);
        assert_eq!((-0.5f32).relu(), 0.0);
        assert!(f64::NAN.relu().is_nan());
        assert!((-0.0f64).relu().is_sign_positive() && Num::maximum(-0.0f32, 0.0).is_sign_positive());
        assert_eq!(bf16::from_f32(-2.0).relu(), bf16::ZERO);
        assert_eq!(f16::from_f32(1.5).plus(f16::from_f32(2.0)), f16::from_f32(3.5));
        assert_eq!(f16::from_f32(1.0).quotient(f16::from_f32(4.0)), f16::from_f32(0.25));
    }

    #[test]
    fn booleans_are_logical() {
        assert!(true.plus(false) && !true.times(false) && true.maximum(false) && !true.minimum(false));
        assert_eq!(bool::from_int(2), None);
        assert_eq!(bool::from_int(1), Some(true));
    }

    #[test]
    fn weak_int_bounds() {
        assert_eq!(u8::from_int(300), None);
        assert_eq!(u8::from_int(-1), None);
        assert_eq!(i8::from_int(-128), Some(-128));
        assert_eq!(f16::from_int(1 << 20), Some(f16::INFINITY));
        assert_eq!(u64::MAX.to_int(), None);
        assert_eq!(7u16.to_int(), Some(7));
        assert_eq!(1.0f32.to_int(), None);
    }
}
