//! The Rust element types of tensors ([`Element`]) and [`dispatch_dtype!`], which picks the
//! element type for a runtime [`DataType`].
//!
//! [`dispatch_dtype!`]: crate::dispatch_dtype

use crate::dtype::DataType;
use half::{bf16, f16};
use std::fmt;

/// A Rust element type that tensors can hold.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + fmt::Display + 'static {
    /// The matching data type.
    const DTYPE: DataType;
    /// The value as `f64` (booleans as 0 or 1; wide integers may round).
    fn to_f64(self) -> f64;
    /// The value nearest `x` (saturating for integers, `x != 0` for booleans).
    fn from_f64(x: f64) -> Self;
}

macro_rules! impl_element {
    ($($t:ty => $d:ident),* $(,)?) => { $(impl Element for $t {
        const DTYPE: DataType = DataType::$d;
        fn to_f64(self) -> f64 { self as f64 }
        fn from_f64(x: f64) -> Self { x as $t }
    })* };
}
impl_element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16,
    u32 => U32, u64 => U64, f32 => F32, f64 => F64);

impl Element for bool {
    const DTYPE: DataType = DataType::Bool;
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn from_f64(x: f64) -> Self {
        x != 0.0
    }
}

macro_rules! impl_half_element {
    ($($t:ty => $d:ident),*) => { $(impl Element for $t {
        const DTYPE: DataType = DataType::$d;
        fn to_f64(self) -> f64 { self.to_f64() }
        fn from_f64(x: f64) -> Self { <$t>::from_f64(x) }
    })* };
}
impl_half_element!(f16 => F16, bf16 => BF16);

/// Runs `$body` with `$t` bound to the Rust element type of `$dtype`.
///
/// ```
/// use relaxvm_core::{dispatch_dtype, DataType};
/// let size = dispatch_dtype!(DataType::F32, T => std::mem::size_of::<T>());
/// assert_eq!(size, 4);
/// ```
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {{
        use $crate::DataType as __D;
        match $dtype {
            __D::Bool => {
                type $t = bool;
                $body
            }
            __D::I8 => {
                type $t = i8;
                $body
            }
            __D::I16 => {
                type $t = i16;
                $body
            }
            __D::I32 => {
                type $t = i32;
                $body
            }
            __D::I64 => {
                type $t = i64;
                $body
            }
            __D::U8 => {
                type $t = u8;
                $body
            }
            __D::U16 => {
                type $t = u16;
                $body
            }
            __D::U32 => {
                type $t = u32;
                $body
            }
            __D::U64 => {
                type $t = u64;
                $body
            }
            __D::F16 => {
                type $t = $crate::half::f16;
                $body
            }
            __D::BF16 => {
                type $t = $crate::half::bf16;
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
        }
    }};
}
