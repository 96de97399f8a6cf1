//! The float closeness test against a table written once from numpy:
//! `np.isclose(a, b, rtol, atol, equal_nan=True)` for each pair and tolerance (the same table is
//! checked against numpy itself by tests/test_trace_compare.py).

use super::{close, tensor_difference, Tolerance};
use crate::element::Element;
use crate::tensor::Tensor;
use half::{bf16, f16};

const INF: f64 = f64::INFINITY;
const NAN: f64 = f64::NAN;

/// The tolerances of the table's columns, as `(rtol, atol)`.
const TOLS: [(f64, f64); 4] = [(1e-5, 1e-8), (0.0, 0.0), (0.5, 0.0), (0.0, 1.5)];

/// `(a, b, numpy's isclose under each of TOLS)`.
#[rustfmt::skip]
const TABLE: &[(f64, f64, [bool; 4])] = &[
    (INF, INF, [true, true, true, true]),
    (-INF, -INF, [true, true, true, true]),
    (INF, -INF, [false, false, false, false]),
    (-INF, INF, [false, false, false, false]),
    (65504.0, INF, [false, false, false, false]),
    (INF, 65504.0, [false, false, false, false]),
    (1.0, INF, [false, false, false, false]),
    (-INF, -1.0, [false, false, false, false]),
    (0.0, INF, [false, false, false, false]),
    (NAN, NAN, [true, true, true, true]),
    (NAN, 1.0, [false, false, false, false]),
    (1.0, NAN, [false, false, false, false]),
    (NAN, INF, [false, false, false, false]),
    (INF, NAN, [false, false, false, false]),
    (0.0, 0.0, [true, true, true, true]),
    (0.0, -0.0, [true, true, true, true]),
    (1.0, 1.0, [true, true, true, true]),
    (1.0, 1.00001, [true, false, true, true]),
    (1.0, 1.001, [false, false, true, true]),
    (1e-9, 0.0, [true, false, false, true]),
    (0.0, 1e-7, [false, false, false, true]),
    (1e300, -1e300, [false, false, false, false]),
    (f64::MAX, -f64::MAX, [false, false, false, false]),
    (3.0, 2.0, [false, false, true, true]),
];

fn tol(i: usize) -> Tolerance {
    Tolerance::new(TOLS[i].0, TOLS[i].1).unwrap()
}

#[test]
fn close_is_numpys_isclose_with_equal_nan() {
    for &(a, b, expected) in TABLE {
        for (i, want) in expected.into_iter().enumerate() {
            assert_eq!(close(a, b, tol(i)), want, "close({a}, {b}) with (rtol, atol) = {:?}", TOLS[i]);
        }
    }
}

/// Every row whose two values the dtype holds exactly, as one-element tensors of that dtype:
/// they agree (no difference) exactly when numpy says close.
fn check_dtype<T: Element>() -> usize {
    let mut rows = 0;
    for &(a, b, expected) in TABLE {
        let (x, y) = (T::from_f64(a), T::from_f64(b));
        let exact = |v: f64, t: T| v.is_nan() && t.to_f64().is_nan() || t.to_f64() == v;
        if !exact(a, x) || !exact(b, y) {
            continue;
        }
        rows += 1;
        let ta = Tensor::from_vec(vec![1], vec![x]).unwrap();
        let tb = Tensor::from_vec(vec![1], vec![y]).unwrap();
        for (i, want) in expected.into_iter().enumerate() {
            let d = tensor_difference(&ta, &tb, tol(i));
            assert_eq!(d.is_none(), want, "{} {a} vs {b} with {:?}: {d:?}", ta.dtype(), TOLS[i]);
        }
    }
    rows
}

#[test]
fn every_float_dtype_keeps_infinities_apart() {
    // The rows each dtype holds: all of them in f64, fewer in the narrower types (65504 is
    // float16's largest finite value, and bfloat16 rounds it).
    assert_eq!(check_dtype::<f64>(), TABLE.len());
    let n32 = check_dtype::<f32>();
    assert!(n32 >= 18, "{n32}");
    let n16 = check_dtype::<f16>();
    assert!(n16 >= 14, "{n16}");
    let nb16 = check_dtype::<bf16>();
    assert!(nb16 >= 14, "{nb16}");
}

#[test]
fn the_largest_float16_against_infinity_is_reported() {
    let a = Tensor::from_vec(vec![2], vec![f16::MAX, f16::INFINITY]).unwrap();
    let b = Tensor::from_vec(vec![2], vec![f16::INFINITY, f16::NEG_INFINITY]).unwrap();
    let d = tensor_difference(&a, &b, Tolerance::default()).expect("a difference");
    assert!(d.starts_with("2 of 2 elements differ; the largest difference is inf"), "{d}");
}
