//! `relax.run.unique`: TVM's `numpy_unique` (python/tvm/relax/op/set.py), which calls numpy 2.x's
//! `np.unique` and reorders for `sorted=False`.
//!
//! Semantics reproduced (checked against TVM 0.27 with numpy 2.4):
//! - `axis` null: the flattened input; NaNs collapse into one group (numpy 2's `equal_nan=True`)
//!   sorted last; `-0.0 == 0.0`. The inverse has the input's shape (0-d for a 0-d input).
//! - `axis` given (negative counts from the end): unique slices along the axis, compared
//!   lexicographically; slices containing NaN never equal one another (numpy compares them as
//!   structured records, where `equal_nan` does not apply). The inverse is 1-D.
//! - Outputs: the unique values alone when no flag is set, else a tuple of the values, then the
//!   first-occurrence indices, the inverse and the counts, each present when asked for (int64).
//! - `sorted=False`: groups in order of first occurrence, indices ascending, inverse and counts
//!   remapped to match.
//!
//! One representative per group is the element of its first occurrence. numpy picks the same
//! whenever it sorts stably (`return_index`, or `sorted=False`); otherwise its unstable sort may
//! pick another member of an equal group, which differs only in the sign of a zero or a NaN's
//! payload. `bfloat16` (an opaque ml_dtypes type to numpy) compares NaN as equal to everything
//! while sorting, so numpy's result for bfloat16 input containing NaN depends on its sort's
//! internals; here such NaNs stay distinct and sort last.

use super::elements::{elements_polled, Raw};
use crate::args::{self, in_builtin, type_err, value_err};
use half::{bf16, f16};
use relaxvm::{dispatch_dtype, CallCtx, Element, Error, Result, Tensor, Value};
use std::cmp::Ordering;

/// numpy's ordering and equality for one element type.
pub(crate) trait Key: Raw {
    /// The sort order: NaN after everything, NaNs equal; `-0.0 == 0.0`.
    fn order(a: Self, b: Self) -> Ordering;
    /// Equality when grouping; `nan_equal` is numpy's `equal_nan` (flattened input only).
    fn same(a: Self, b: Self, nan_equal: bool) -> bool;
}

macro_rules! ord_key {
    ($($t:ty),*) => {$(
        impl Key for $t {
            fn order(a: Self, b: Self) -> Ordering { a.cmp(&b) }
            fn same(a: Self, b: Self, _: bool) -> bool { a == b }
        }
    )*};
}
ord_key!(bool, i8, i16, i32, i64, u8, u16, u32, u64);

/// Float order with NaN last (numpy's sort order for floats).
fn float_order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

macro_rules! float_key {
    ($($t:ty => $nan_groups:expr),*) => {$(
        impl Key for $t {
            fn order(a: Self, b: Self) -> Ordering { float_order(Element::to_f64(a), Element::to_f64(b)) }
            fn same(a: Self, b: Self, nan_equal: bool) -> bool {
                let (x, y) = (Element::to_f64(a), Element::to_f64(b));
                x == y || ($nan_groups && nan_equal && x.is_nan() && y.is_nan())
            }
        }
    )*};
}
// bfloat16 is not a float "kind" to numpy, so its NaNs never collapse.
float_key!(f16 => true, f32 => true, f64 => true, bf16 => false);

/// `relax.run.unique(x, sorted, return_index, return_inverse, return_counts, [axis])`.
pub(crate) fn unique(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 5, 6)?;
    let x = args::tensor(name, args, 0, "x")?;
    let flag = |i: usize, what: &str| args::int(name, args, i, what).map(|v| v != 0);
    let opts = Opts {
        sorted: flag(1, "sorted")?,
        index: flag(2, "return_index")?,
        inverse: flag(3, "return_inverse")?,
        counts: flag(4, "return_counts")?,
    };
    let axis = match args.get(5) {
        None | Some(Value::Null) => None,
        Some(Value::Int(a)) => Some(*a),
        Some(other) => return Err(type_err(name, 5, "axis", "int or null", other)),
    };
    let poll = &mut || ctx.check_interrupt();
    dispatch_dtype!(x.dtype(), T => run::<T>(name, x, opts, axis, &mut *poll))
}

/// Which outputs are asked for, and the order of the unique values.
#[derive(Clone, Copy)]
struct Opts {
    sorted: bool,
    index: bool,
    inverse: bool,
    counts: bool,
}

fn run<T: Key>(
    name: &'static str,
    x: &Tensor,
    opts: Opts,
    axis: Option<i64>,
    poll: &mut dyn FnMut() -> Result<()>,
) -> Result<Value> {
    let data = elements_polled::<T>(name, x, poll)?;
    let dims: Vec<usize> = x.shape().iter().map(|d| *d as usize).collect();
    // The input as `outer x n x inner`: `n` rows (slices along the axis) of `outer * inner`
    // elements; the flattened case is `1 x numel x 1`.
    let (ax, outer, n, inner) = match axis {
        None => (None, 1, data.len(), 1),
        Some(a) => {
            let nd = dims.len() as i64;
            let ax = if a < 0 { a + nd } else { a };
            if !(0..nd).contains(&ax) {
                // numpy's AxisError text.
                return Err(value_err(name, format!("axis {a} is out of bounds for array of dimension {nd}")));
            }
            let ax = ax as usize;
            (Some(ax), dims[..ax].iter().product(), dims[ax], dims[ax + 1..].iter().product())
        }
    };
    let at = |row: usize, j: usize| data[(j / inner) * n * inner + row * inner + j % inner];
    let m = outer * inner;
    let cmp_rows = |a: usize, b: usize| {
        (0..m).map(|j| T::order(at(a, j), at(b, j))).find(|o| *o != Ordering::Equal).unwrap_or(Ordering::Equal)
    };
    // numpy compares 1-D input along axis 0 as it does flattened input (NaNs collapse); only
    // rows of higher-dimensional input are compared field by field, where NaNs never match.
    let nan_equal = ax.is_none() || dims.len() == 1;
    let same_rows = |a: usize, b: usize| (0..m).all(|j| T::same(at(a, j), at(b, j), nan_equal));

    // numpy's `_unique1d`: a stable argsort, then a group starts wherever neighbours differ.
    let mut perm: Vec<usize> = (0..n).collect();
    perm.sort_by(|a, b| cmp_rows(*a, *b));
    let mut first = Vec::new(); // first occurrence of each group, groups in sorted order
    let mut counts: Vec<i64> = Vec::new();
    let mut group_of = vec![0usize; n];
    for (i, &row) in perm.iter().enumerate() {
        if i == 0 || !same_rows(perm[i - 1], row) {
            first.push(row);
            counts.push(0);
        }
        let g = first.len() - 1;
        counts[g] += 1;
        group_of[row] = g;
    }
    // The order the groups are output in: sorted, or by first occurrence.
    let mut order: Vec<usize> = (0..first.len()).collect();
    if !opts.sorted {
        order.sort_by_key(|g| first[*g]);
    }
    let mut position = vec![0i64; first.len()];
    for (p, g) in order.iter().enumerate() {
        position[*g] = p as i64;
    }

    let k = order.len();
    let mut values = Vec::with_capacity(k * m);
    for o in 0..outer {
        for g in &order {
            for i in 0..inner {
                values.push(data[o * n * inner + first[*g] * inner + i]);
            }
        }
    }
    let values_shape: Vec<i64> = match ax {
        None => vec![k as i64],
        Some(ax) => dims.iter().enumerate().map(|(d, v)| if d == ax { k as i64 } else { *v as i64 }).collect(),
    };
    let values = Value::Tensor(make(name, values_shape, values)?);
    if !(opts.index || opts.inverse || opts.counts) {
        return Ok(values);
    }
    let mut out = vec![values];
    if opts.index {
        let idx: Vec<i64> = order.iter().map(|g| first[*g] as i64).collect();
        out.push(Value::Tensor(make(name, vec![k as i64], idx)?));
    }
    if opts.inverse {
        let inv: Vec<i64> = group_of.iter().map(|g| position[*g]).collect();
        let shape = match ax {
            None => x.shape().dims().to_vec(),
            Some(_) => vec![n as i64],
        };
        out.push(Value::Tensor(make(name, shape, inv)?));
    }
    if opts.counts {
        let c: Vec<i64> = order.iter().map(|g| counts[*g]).collect();
        out.push(Value::Tensor(make(name, vec![k as i64], c)?));
    }
    Ok(Value::tuple(out))
}

fn make<T: relaxvm::Element>(name: &str, shape: Vec<i64>, data: Vec<T>) -> Result<Tensor> {
    Tensor::from_vec(shape, data).map_err(|e: Error| in_builtin(name, e))
}
