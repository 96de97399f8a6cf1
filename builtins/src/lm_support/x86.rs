//! The arithmetic of the x86-64 SSE instructions TVM's compiled C++ runs, NaN operands
//! included, so that a NaN result has TVM's sign and payload too.
//!
//! IEEE 754 leaves the choice of NaN open, and so does Rust: LLVM may swap the operands of a
//! commutative `+` or `*`. The hardware does not choose: `addsd a, b` (and `mulsd`, `subsd`,
//! `divsd`, the `ss` forms) returns `a`'s NaN, quieted, when `a` is a NaN; else `b`'s when `b` is
//! one; and the default NaN (sign set, quiet bit set: `0xFFF8…` / `0xFFC0…`) when the operation
//! itself is invalid (`inf - inf`, `0 * inf`, `0 / 0`). Which operand GCC put in the
//! destination register is not the C source's order for commutative operations: each caller
//! passes the operands in the order TVM's binary uses, found by matching every operand order
//! against TVM's recorded outputs with NaNs of both signs (`tests/test_tvm_lm_support.py`); each
//! helper takes the destination first.

/// The quiet bit of an f64 / f32 NaN.
const QUIET64: u64 = 1 << 51;
const QUIET32: u32 = 1 << 22;
/// x86's default NaN ("QNaN floating-point indefinite").
const DEFAULT64: u64 = 0xFFF8_0000_0000_0000;
const DEFAULT32: u32 = 0xFFC0_0000;

/// The result of a binary f64 operation as x86 delivers it.
#[inline]
fn sse64(a: f64, b: f64, r: f64) -> f64 {
    if a.is_nan() {
        f64::from_bits(a.to_bits() | QUIET64)
    } else if b.is_nan() {
        f64::from_bits(b.to_bits() | QUIET64)
    } else if r.is_nan() {
        f64::from_bits(DEFAULT64)
    } else {
        r
    }
}

/// The result of a binary f32 operation as x86 delivers it.
#[inline]
fn sse32(a: f32, b: f32, r: f32) -> f32 {
    if a.is_nan() {
        f32::from_bits(a.to_bits() | QUIET32)
    } else if b.is_nan() {
        f32::from_bits(b.to_bits() | QUIET32)
    } else if r.is_nan() {
        f32::from_bits(DEFAULT32)
    } else {
        r
    }
}

/// `a + b` in double.
#[inline]
pub(super) fn add64(a: f64, b: f64) -> f64 {
    sse64(a, b, a + b)
}

/// `a - b` in double.
#[inline]
pub(super) fn sub64(a: f64, b: f64) -> f64 {
    sse64(a, b, a - b)
}

/// `a * b` in double.
#[inline]
pub(super) fn mul64(a: f64, b: f64) -> f64 {
    sse64(a, b, a * b)
}

/// `a / b` in double.
#[inline]
pub(super) fn div64(a: f64, b: f64) -> f64 {
    sse64(a, b, a / b)
}

/// `a - b` in float.
#[inline]
pub(super) fn sub32(a: f32, b: f32) -> f32 {
    sse32(a, b, a - b)
}

/// `a * b` in float.
#[inline]
pub(super) fn mul32(a: f32, b: f32) -> f32 {
    sse32(a, b, a * b)
}

/// `(float)x` of a double (`cvtsd2ss`: a NaN keeps its sign and the top of its payload, quieted).
#[inline]
pub(super) fn to_f32(x: f64) -> f32 {
    if x.is_nan() {
        let bits = x.to_bits();
        f32::from_bits((((bits >> 63) as u32) << 31) | 0x7FC0_0000 | (((bits >> 29) as u32) & 0x003F_FFFF))
    } else {
        x as f32
    }
}

/// `(double)x` of a float (`cvtss2sd`: a NaN keeps its sign and payload, quieted).
#[inline]
pub(super) fn to_f64(x: f32) -> f64 {
    if x.is_nan() {
        let bits = x.to_bits();
        f64::from_bits((u64::from(bits >> 31) << 63) | 0x7FF8_0000_0000_0000 | (u64::from(bits & 0x003F_FFFF) << 29))
    } else {
        f64::from(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_nan_operand_wins_and_invalid_operations_give_the_default() {
        let pos = f64::from_bits(0x7FF8_0000_0000_0001);
        let neg = f64::from_bits(0xFFF8_0000_0000_0002);
        assert_eq!(add64(pos, neg).to_bits(), pos.to_bits());
        assert_eq!(add64(neg, pos).to_bits(), neg.to_bits());
        assert_eq!(mul64(1.0, pos).to_bits(), pos.to_bits());
        assert_eq!(sub64(f64::INFINITY, f64::INFINITY).to_bits(), DEFAULT64);
        assert_eq!(div64(0.0, 0.0).to_bits(), DEFAULT64);
        assert_eq!(mul32(0.0, f32::INFINITY).to_bits(), DEFAULT32);
        // A signalling NaN comes out quiet.
        let snan = f32::from_bits(0x7F80_0001);
        assert_eq!(sub32(snan, 1.0).to_bits(), 0x7FC0_0001);
        assert_eq!(add64(2.0, 3.0), 5.0);
    }

    #[test]
    fn conversions_keep_sign_and_payload() {
        let n = f32::from_bits(0xFFC0_1234);
        assert_eq!(to_f32(to_f64(n)).to_bits(), 0xFFC0_1234);
        assert_eq!(to_f64(f32::from_bits(0x7F80_0001)).to_bits(), 0x7FF8_0000_2000_0000);
        assert_eq!(to_f32(1.5), 1.5);
        assert_eq!(to_f64(-2.5), -2.5);
    }
}
