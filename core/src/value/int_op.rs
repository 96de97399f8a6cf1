//! The integer operations of `vm.builtin.int.*`, defined once for the builtins and for the
//! interpreter, which runs them inline when both operands are ints (a counting loop then makes
//! no call at all) and calls the builtin for anything else: bools, wrong types, overflow.

use crate::value::Value;

/// A two-int operation: arithmetic (`Add` … `Max`, an int) or a comparison (`Lt` … `Ne`, a bool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a // b`, rounded toward negative infinity as Python's `//`.
    FloorDiv,
    /// `a % b`, with the sign of `b` as Python's `%`.
    FloorMod,
    /// The smaller.
    Min,
    /// The larger.
    Max,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
}

impl IntOp {
    /// The result, or `None` when the operation fails (overflow, division by zero).
    #[inline(always)]
    pub fn apply(self, a: i64, b: i64) -> Option<Value> {
        Some(match self {
            IntOp::Add => Value::Int(a.checked_add(b)?),
            IntOp::Sub => Value::Int(a.checked_sub(b)?),
            IntOp::Mul => Value::Int(a.checked_mul(b)?),
            IntOp::FloorDiv => Value::Int(floordiv(a, b)?),
            IntOp::FloorMod => Value::Int(floormod(a, b)?),
            IntOp::Min => Value::Int(a.min(b)),
            IntOp::Max => Value::Int(a.max(b)),
            IntOp::Lt => Value::Bool(a < b),
            IntOp::Le => Value::Bool(a <= b),
            IntOp::Gt => Value::Bool(a > b),
            IntOp::Ge => Value::Bool(a >= b),
            IntOp::Eq => Value::Bool(a == b),
            IntOp::Ne => Value::Bool(a != b),
        })
    }

    /// The operator as error messages write it (`+`, `//`, `min`, `<`, ...).
    pub const fn symbol(self) -> &'static str {
        match self {
            IntOp::Add => "+",
            IntOp::Sub => "-",
            IntOp::Mul => "*",
            IntOp::FloorDiv => "//",
            IntOp::FloorMod => "%",
            IntOp::Min => "min",
            IntOp::Max => "max",
            IntOp::Lt => "<",
            IntOp::Le => "<=",
            IntOp::Gt => ">",
            IntOp::Ge => ">=",
            IntOp::Eq => "==",
            IntOp::Ne => "!=",
        }
    }
}

/// `a // b` rounded toward negative infinity; `None` on division by zero or overflow.
#[inline]
pub fn floordiv(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    // The remainder of a successful division is exact (MIN % -1 has already been excluded).
    if a % b != 0 && ((a < 0) != (b < 0)) {
        Some(q - 1)
    } else {
        Some(q)
    }
}

/// `a % b` with the sign of `b`; `None` on division by zero.
#[inline]
pub fn floormod(a: i64, b: i64) -> Option<i64> {
    if b == -1 {
        return Some(0);
    }
    let r = a.checked_rem(b)?;
    if r != 0 && ((r < 0) != (b < 0)) {
        Some(r + b)
    } else {
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_rounding_and_failures() {
        for (a, b, q, r) in [(7, 2, 3, 1), (-7, 2, -4, 1), (7, -2, -4, -1), (-7, -2, 3, -1), (6, 3, 2, 0)] {
            assert_eq!((floordiv(a, b), floormod(a, b)), (Some(q), Some(r)), "{a} {b}");
        }
        assert_eq!(floordiv(1, 0), None);
        assert_eq!(floormod(1, 0), None);
        assert_eq!(floordiv(i64::MIN, -1), None);
        assert_eq!(floormod(i64::MIN, -1), Some(0));
        assert!(IntOp::Add.apply(i64::MAX, 1).is_none());
        assert!(IntOp::Mul.apply(i64::MIN, -1).is_none());
        assert!(matches!(IntOp::Le.apply(2, 2), Some(Value::Bool(true))));
        assert!(matches!(IntOp::Max.apply(-3, 2), Some(Value::Int(2))));
        assert_eq!(IntOp::FloorMod.symbol(), "%");
    }
}
