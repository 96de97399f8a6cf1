//! numpy's type promotion: the table for two tensors (`np.promote_types`) and NEP 50's weak
//! Python scalars (numpy 2).
//!
//! Tensor with tensor, as numpy:
//! - `bool` promotes to anything; same-kind integers or floats take the wider type;
//! - a signed and an unsigned integer take the smallest signed type holding both
//!   (`uint8 + int8 -> int16`, `uint32 + int32 -> int64`), and `uint64` with any signed
//!   integer gives `float64`;
//! - an integer with a float takes the float wide enough for the integer's 8/16/32+ bits
//!   (`float16`, `float32`, `float64`) or the float itself if wider (`int8 + float16 ->
//!   float16`, `int16 + float16 -> float32`, `int32 + float32 -> float64`).
//!
//! `bfloat16` (which numpy lacks; this follows `ml_dtypes`): it holds 8-bit integers exactly, so
//! `bfloat16` with `bool`/`int8`/`uint8` stays `bfloat16`; with wider integers it follows the
//! float16 rule; `bfloat16 + float16 -> float32`.
//!
//! Weak scalars (a `Value::Int`, `Value::Float` or `Value::Bool` operand) do not widen a
//! tensor's type: `int8_tensor + 1 -> int8`, `float16_tensor + 2.5 -> float16`. A weak scalar
//! of a higher kind takes that kind's default: `int_tensor + 2.5 -> float64`,
//! `bool_tensor + 1 -> int64`. Scalars alone give `int64`, `float64` or `bool`. An int scalar
//! that does not fit an integer result type is an error (numpy 2 raises `OverflowError`).

use relaxvm::dtype::TypeClass;
use relaxvm::DataType;

/// The kind of a weak (Python) scalar, ordered bool < int < float.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WeakKind {
    /// A Python bool.
    Bool,
    /// A Python int.
    Int,
    /// A Python float.
    Float,
}

/// `np.promote_types(a, b)`.
pub fn promote_types(a: DataType, b: DataType) -> DataType {
    use TypeClass as C;
    if a == b {
        return a;
    }
    match (a.class(), b.class()) {
        (C::Bool, _) => b,
        (_, C::Bool) => a,
        (C::Int, C::Int) | (C::UInt, C::UInt) => wider(a, b),
        (C::Int, C::UInt) => signed_with_unsigned(a, b),
        (C::UInt, C::Int) => signed_with_unsigned(b, a),
        (C::Float | C::BFloat, C::Int | C::UInt) => float_with_int(a, b),
        (C::Int | C::UInt, C::Float | C::BFloat) => float_with_int(b, a),
        (C::Float | C::BFloat, C::Float | C::BFloat) => float_with_float(a, b),
    }
}

fn wider(a: DataType, b: DataType) -> DataType {
    if a.bits() >= b.bits() {
        a
    } else {
        b
    }
}

fn signed_with_unsigned(signed: DataType, unsigned: DataType) -> DataType {
    if signed.bits() > unsigned.bits() {
        return signed;
    }
    match unsigned.bits() {
        8 => DataType::I16,
        16 => DataType::I32,
        32 => DataType::I64,
        _ => DataType::F64,
    }
}

fn float_with_int(float: DataType, int: DataType) -> DataType {
    if float == DataType::BF16 && int.bits() == 8 {
        return DataType::BF16;
    }
    let needed = match int.bits() {
        8 => DataType::F16,
        16 => DataType::F32,
        _ => DataType::F64,
    };
    float_with_float(float, needed)
}

fn float_with_float(a: DataType, b: DataType) -> DataType {
    match (a, b) {
        _ if a == b => a,
        (DataType::F16, DataType::BF16) | (DataType::BF16, DataType::F16) => DataType::F32,
        _ => wider(a, b),
    }
}

/// The result type of an operation on tensors of types `strong` (already promoted together,
/// `None` when there are no tensors) and weak scalars of kind up to `weak`.
pub fn result_type(strong: Option<DataType>, weak: Option<WeakKind>) -> DataType {
    match (strong, weak) {
        (None, None | Some(WeakKind::Bool)) => DataType::Bool,
        (None, Some(WeakKind::Int)) => DataType::I64,
        (None, Some(WeakKind::Float)) => DataType::F64,
        (Some(d), None | Some(WeakKind::Bool)) => d,
        (Some(DataType::Bool), Some(WeakKind::Int)) => DataType::I64,
        (Some(d), Some(WeakKind::Int)) => d,
        (Some(d), Some(WeakKind::Float)) if d.is_float() => d,
        (Some(_), Some(WeakKind::Float)) => DataType::F64,
    }
}

/// The float type numpy's float functions (`exp`, `sqrt`, true division of one operand)
/// compute an integer or bool type in: the smallest float holding it exactly
/// (`bool`/`int8`/`uint8` -> `float16`, 16-bit -> `float32`, wider -> `float64`).
pub fn float_for(d: DataType) -> DataType {
    if d.is_float() {
        return d;
    }
    match d.bits() {
        8 => DataType::F16,
        16 => DataType::F32,
        _ => DataType::F64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DataType::*;

    #[test]
    fn numpy_promotion_table() {
        let cases = [
            (Bool, Bool, Bool),
            (Bool, I8, I8),
            (U8, Bool, U8),
            (I8, I16, I16),
            (U16, U64, U64),
            (U8, I8, I16),
            (I8, U8, I16),
            (U16, I16, I32),
            (U32, I32, I64),
            (U32, I64, I64),
            (U64, I64, F64),
            (U64, I8, F64),
            (I16, U8, I16),
            (I8, F16, F16),
            (U8, F16, F16),
            (I16, F16, F32),
            (I32, F16, F64),
            (I64, F32, F64),
            (I16, F32, F32),
            (I32, F32, F64),
            (F16, F32, F32),
            (F32, F64, F64),
            (Bool, F16, F16),
            (BF16, I8, BF16),
            (BF16, I16, F32),
            (BF16, F16, F32),
            (BF16, F32, F32),
            (BF16, F64, F64),
            (I64, F64, F64),
        ];
        for (a, b, want) in cases {
            assert_eq!(promote_types(a, b), want, "{a} + {b}");
            assert_eq!(promote_types(b, a), want, "{b} + {a}");
        }
    }

    #[test]
    fn promotion_is_symmetric_for_every_pair() {
        for a in DataType::ALL {
            for b in DataType::ALL {
                assert_eq!(promote_types(a, b), promote_types(b, a), "{a} {b}");
            }
        }
    }

    #[test]
    fn weak_scalars() {
        assert_eq!(result_type(Some(I8), Some(WeakKind::Int)), I8);
        assert_eq!(result_type(Some(U8), Some(WeakKind::Bool)), U8);
        assert_eq!(result_type(Some(Bool), Some(WeakKind::Int)), I64);
        assert_eq!(result_type(Some(I32), Some(WeakKind::Float)), F64);
        assert_eq!(result_type(Some(F16), Some(WeakKind::Float)), F16);
        assert_eq!(result_type(None, Some(WeakKind::Int)), I64);
        assert_eq!(result_type(None, Some(WeakKind::Float)), F64);
        assert_eq!(result_type(None, Some(WeakKind::Bool)), Bool);
        assert_eq!(float_for(Bool), F16);
        assert_eq!(float_for(U16), F32);
        assert_eq!(float_for(I32), F64);
        assert_eq!(float_for(BF16), BF16);
    }
}
