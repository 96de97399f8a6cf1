//! Elementwise operators: binary with broadcasting, and unary.
//!
//! The same-shape contiguous case (and tensor-with-scalar) is a tight loop over slices that
//! the compiler vectorises; other shapes go through ndarray's broadcasting iterators, on the
//! calling thread, polling for interrupts every few MiB (a broadcast view may be huge).

use super::num::{dispatch_float, not_a_float, Float, Num};
use super::promote::float_for;
use super::{
    broadcast_shapes, numel, operand_array, operands_type, parallel, promoted_type, shaped, tensor_value, try_vec,
    Operand, Poll,
};
use crate::args::{self, value_err};
use ndarray::{ArrayD, ArrayViewD, IxDyn};
use relaxvm::{dispatch_dtype, CallCtx, DataType, Error, Result, Value};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unary {
    Neg,
    Exp,
    Sqrt,
    Relu,
}

/// `vm.op.add(a, b)`.
pub(crate) fn add(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    binary(name, args, &mut || ctx.check_interrupt(), Binary::Add)
}

/// `vm.op.sub(a, b)`.
pub(crate) fn sub(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    binary(name, args, &mut || ctx.check_interrupt(), Binary::Sub)
}

/// `vm.op.mul(a, b)`.
pub(crate) fn mul(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    binary(name, args, &mut || ctx.check_interrupt(), Binary::Mul)
}

/// `vm.op.div(a, b)`: true division.
pub(crate) fn div(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    binary(name, args, &mut || ctx.check_interrupt(), Binary::Div)
}

/// `vm.op.maximum(a, b)`.
pub(crate) fn maximum(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    binary(name, args, &mut || ctx.check_interrupt(), Binary::Maximum)
}

/// `vm.op.minimum(a, b)`.
pub(crate) fn minimum(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    binary(name, args, &mut || ctx.check_interrupt(), Binary::Minimum)
}

/// `vm.op.neg(a)`.
pub(crate) fn neg(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    unary(name, args, &mut || ctx.check_interrupt(), Unary::Neg)
}

/// `vm.op.exp(a)`.
pub(crate) fn exp(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    unary(name, args, &mut || ctx.check_interrupt(), Unary::Exp)
}

/// `vm.op.sqrt(a)`.
pub(crate) fn sqrt(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    unary(name, args, &mut || ctx.check_interrupt(), Unary::Sqrt)
}

/// `vm.op.relu(a)`.
pub(crate) fn relu(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    unary(name, args, &mut || ctx.check_interrupt(), Unary::Relu)
}

/// A binary operator's builtin, polling with `poll`.
pub(super) fn binary(name: &'static str, args: &[Value], poll: Poll<'_>, op: Binary) -> Result<Value> {
    args::arity(name, args, 2)?;
    let ops = [Operand::arg(name, args, 0, "lhs")?, Operand::arg(name, args, 1, "rhs")?];
    let shape = broadcast_shapes(name, &ops[0].shape(), &ops[1].shape())?;
    if op == Binary::Div {
        // numpy goes straight to a float loop for `int_array / python_int`: no bounds check.
        let fd = float_for_division(promoted_type(&ops));
        return dispatch_float!(fd, T => float_binary::<T>(name, &ops, &shape, poll),
            _ => Err(not_a_float(name, fd)));
    }
    let dtype = operands_type(name, &ops)?;
    if op == Binary::Sub && dtype == DataType::Bool {
        return Err(value_err(
            name,
            "expected numeric operands, found booleans only (numpy does not subtract booleans; use logical xor)",
        ));
    }
    dispatch_dtype!(dtype, T => num_binary::<T>(name, op, &ops, &shape, poll))
}

/// True division computes integers and bools in `float64`, as numpy does.
fn float_for_division(d: DataType) -> DataType {
    if d.is_float() {
        d
    } else {
        DataType::F64
    }
}

fn num_binary<T: Num>(
    name: &str,
    op: Binary,
    ops: &[Operand<'_>; 2],
    shape: &[usize],
    poll: Poll<'_>,
) -> Result<Value> {
    let x = operand_array::<T>(name, &ops[0], &mut *poll)?;
    let y = operand_array::<T>(name, &ops[1], &mut *poll)?;
    let (x, y) = (x.view(), y.view());
    let out = match op {
        Binary::Add => zip_map(name, &x, &y, shape, poll, T::plus)?,
        Binary::Sub => zip_map(name, &x, &y, shape, poll, T::minus)?,
        Binary::Mul => zip_map(name, &x, &y, shape, poll, T::times)?,
        Binary::Maximum => zip_map(name, &x, &y, shape, poll, T::maximum)?,
        Binary::Minimum => zip_map(name, &x, &y, shape, poll, T::minimum)?,
        Binary::Div => {
            return Err(Error::value(format!("{name}: internal error: division reached the integer kernel")))
        }
    };
    Ok(tensor_value(out))
}

fn float_binary<T: Float>(name: &str, ops: &[Operand<'_>; 2], shape: &[usize], poll: Poll<'_>) -> Result<Value> {
    let x = operand_array::<T>(name, &ops[0], &mut *poll)?;
    let y = operand_array::<T>(name, &ops[1], &mut *poll)?;
    Ok(tensor_value(zip_map(name, &x.view(), &y.view(), shape, poll, T::quotient)?))
}

/// `f(x, y)` for every element of the broadcast shape `shape`.
pub(crate) fn zip_map<T: Copy + Sync, U: Num>(
    name: &str,
    x: &ArrayViewD<'_, T>,
    y: &ArrayViewD<'_, T>,
    shape: &[usize],
    poll: Poll<'_>,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<ArrayD<U>> {
    let n = numel(name, shape, std::mem::size_of::<U>())?;
    // Fast paths: standard-layout operands of the full size or of one element lay their
    // elements out exactly as the result does.
    if let (Some(xs), Some(ys)) = (x.as_slice(), y.as_slice()) {
        if n >= parallel::MIN_PARALLEL_ELEMENTS {
            if let Some(out) = zip_in_pieces(name, [xs, ys], [x.shape(), y.shape()], shape, &mut *poll, &f)? {
                return shaped(name, shape, out);
            }
        }
        let mut out = try_vec(name, n)?;
        if xs.len() == n && ys.len() == n {
            out.extend(xs.iter().zip(ys).map(|(p, q)| f(*p, *q)));
        } else if xs.len() == n && ys.len() == 1 {
            let q = ys[0];
            out.extend(xs.iter().map(|p| f(*p, q)));
        } else if xs.len() == 1 && ys.len() == n {
            let p = xs[0];
            out.extend(ys.iter().map(|q| f(p, *q)));
        } else if xs.len() == n && is_suffix(y.shape(), shape) {
            // A row broadcast against a full operand (e.g. adding a bias): row by row.
            for row in xs.chunks_exact(ys.len()) {
                out.extend(row.iter().zip(ys).map(|(p, q)| f(*p, *q)));
            }
        } else if ys.len() == n && is_suffix(x.shape(), shape) {
            for row in ys.chunks_exact(xs.len()) {
                out.extend(xs.iter().zip(row).map(|(p, q)| f(*p, *q)));
            }
        }
        if out.len() == n {
            return shaped(name, shape, out);
        }
    }
    let bad = || {
        value_err(name, format!("cannot broadcast operands of shapes {:?} and {:?} to {shape:?}", x.shape(), y.shape()))
    };
    let xb = x.broadcast(IxDyn(shape)).ok_or_else(bad)?;
    let yb = y.broadcast(IxDyn(shape)).ok_or_else(bad)?;
    // Any size (broadcast views need no memory): written on this thread, polling as it goes.
    let mut out = try_vec(name, n)?;
    parallel::extend_polled(&mut out, xb.iter().zip(yb.iter()).map(|(p, q)| f(*p, *q)), poll)?;
    shaped(name, shape, out)
}

/// One operand of a large elementwise op, as the result's pieces read it.
enum Source<'a, T> {
    /// As many elements as the result, in its order.
    Full(&'a [T]),
    /// One element for all.
    One(T),
    /// A row repeated once per row of the result.
    Row(&'a [T]),
}

impl<'a, T: Copy> Source<'a, T> {
    /// How a standard-layout operand of `part_shape` with elements `s` maps onto a result of
    /// `n` elements and shape `shape`; `None` when no fast path covers it.
    fn of(s: &'a [T], part_shape: &[usize], shape: &[usize], n: usize) -> Option<Self> {
        match s.len() {
            len if len == n => Some(Source::Full(s)),
            1 => Some(Source::One(s[0])),
            _ if is_suffix(part_shape, shape) => Some(Source::Row(s)),
            _ => None,
        }
    }
}

/// Calls `f(row_offset, len)` for each run of `[start, start + len)` that stays within one
/// row of `row` elements.
fn row_runs(start: usize, len: usize, row: usize, mut f: impl FnMut(usize, usize)) {
    let (mut at, end) = (start, start + len);
    while at < end {
        let offset = at % row;
        let run = (row - offset).min(end - at);
        f(offset, run);
        at += run;
    }
}

/// `zip_map`'s fast paths for a large result, its pieces written across the thread pool;
/// `None` when the operands' layouts are not one of them.
fn zip_in_pieces<T: Copy + Sync, U: Num>(
    name: &str,
    [xs, ys]: [&[T]; 2],
    [x_shape, y_shape]: [&[usize]; 2],
    shape: &[usize],
    poll: Poll<'_>,
    f: &(impl Fn(T, T) -> U + Sync),
) -> Result<Option<Vec<U>>> {
    let n = numel(name, shape, std::mem::size_of::<U>())?;
    let (Some(xsrc), Some(ysrc)) = (Source::of(xs, x_shape, shape, n), Source::of(ys, y_shape, shape, n)) else {
        return Ok(None);
    };
    if matches!((&xsrc, &ysrc), (Source::One(_) | Source::Row(_), Source::One(_) | Source::Row(_))) {
        return Ok(None);
    }
    let mut out = try_vec(name, n)?;
    parallel::fill(name, &mut out, n, poll, &|start, sink| {
        let end = start + sink.capacity();
        match (&xsrc, &ysrc) {
            (Source::Full(a), Source::Full(b)) => {
                sink.extend(a[start..end].iter().zip(&b[start..end]).map(|(p, q)| f(*p, *q)))
            }
            (Source::Full(a), Source::One(q)) => sink.extend(a[start..end].iter().map(|p| f(*p, *q))),
            (Source::One(p), Source::Full(b)) => sink.extend(b[start..end].iter().map(|q| f(*p, *q))),
            (Source::Full(a), Source::Row(r)) => row_runs(start, end - start, r.len(), |offset, run| {
                let at = sink.written() + start;
                sink.extend(a[at..at + run].iter().zip(&r[offset..offset + run]).map(|(p, q)| f(*p, *q)))
            }),
            (Source::Row(r), Source::Full(b)) => row_runs(start, end - start, r.len(), |offset, run| {
                let at = sink.written() + start;
                sink.extend(r[offset..offset + run].iter().zip(&b[at..at + run]).map(|(p, q)| f(*p, *q)))
            }),
            // Excluded above; a piece left unwritten would be reported, not returned.
            _ => {}
        }
    })?;
    Ok(Some(out))
}

/// True when `part` (without leading 1s) is a non-empty trailing part of `whole` with at least
/// one element: then a standard-layout operand of shape `part` repeats once per row of `whole`.
fn is_suffix(part: &[usize], whole: &[usize]) -> bool {
    let start = part.iter().position(|d| *d != 1).unwrap_or(part.len());
    let part = &part[start..];
    !part.is_empty() && part.iter().all(|d| *d > 0) && whole.ends_with(part)
}

/// A unary operator's builtin, polling with `poll`.
pub(super) fn unary(name: &'static str, args: &[Value], poll: Poll<'_>, op: Unary) -> Result<Value> {
    args::arity(name, args, 1)?;
    let x = Operand::arg(name, args, 0, "operand")?;
    let dtype = operands_type(name, &[x])?;
    match op {
        Unary::Neg if dtype == DataType::Bool => Err(value_err(
            name,
            "expected a numeric operand, found a boolean one (numpy does not negate booleans; use logical not)",
        )),
        Unary::Neg => dispatch_dtype!(dtype, T => num_unary::<T>(name, &x, poll, T::negate)),
        Unary::Relu => dispatch_dtype!(dtype, T => num_unary::<T>(name, &x, poll, T::relu)),
        Unary::Exp | Unary::Sqrt => {
            let fd = float_for(dtype);
            dispatch_float!(fd, T => num_unary::<T>(name, &x, poll, if op == Unary::Exp { T::exponential } else { T::square_root }),
                _ => Err(not_a_float(name, fd)))
        }
    }
}

fn num_unary<T: Num>(name: &str, x: &Operand<'_>, poll: Poll<'_>, f: fn(T) -> T) -> Result<Value> {
    let a = operand_array::<T>(name, x, &mut *poll)?;
    Ok(tensor_value(super::map_array(name, &a.view(), poll, f)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_ops::test_util::{out, t};
    use half::f16;
    use relaxvm::Tensor;

    // The builtins as called outside a VM (nothing to poll).
    macro_rules! detached {
        ($($f:ident),*) => {
            $(fn $f(name: &'static str, args: &[Value]) -> Result<Value> {
                super::$f(name, &mut CallCtx::detached(), args)
            })*
        };
    }
    detached!(add, sub, mul, div, maximum, minimum, neg, exp, sqrt, relu);

    #[test]
    fn same_shape_and_broadcast() {
        let a = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t(&[3], vec![10.0f32, 20.0, 30.0]);
        assert_eq!(out::<f32>(add("vm.op.add", &[a.clone(), a.clone()])).2, vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
        assert_eq!(out::<f32>(add("vm.op.add", &[a.clone(), b.clone()])).2, vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
        assert_eq!(out::<f32>(sub("vm.op.sub", &[b.clone(), a.clone()])).2, vec![9.0, 18.0, 27.0, 6.0, 15.0, 24.0]);
        let col = t(&[2, 1], vec![1i32, 2]);
        let row = t(&[1, 3], vec![10i32, 20, 30]);
        let (s, d, v) = out::<i32>(mul("vm.op.mul", &[col, row]));
        assert_eq!((s, d, v), (vec![2, 3], DataType::I32, vec![10, 20, 30, 20, 40, 60]));
        let e = add("vm.op.add", &[a, t(&[2], vec![1.0f32, 2.0])]).unwrap_err().to_string();
        assert!(e.contains("vm.op.add") && e.contains("(2, 3) and (2,)"), "{e}");
    }

    #[test]
    fn row_broadcasts_both_ways() {
        let m = t(&[2, 1, 3], vec![1i64, 2, 3, 4, 5, 6]);
        let row = t(&[1, 3], vec![10i64, 20, 30]);
        let want = vec![11, 22, 33, 14, 25, 36];
        assert_eq!(
            out::<i64>(add("vm.op.add", &[m.clone(), row.clone()])),
            (vec![2, 1, 3], DataType::I64, want.clone())
        );
        assert_eq!(out::<i64>(add("vm.op.add", &[row.clone(), m.clone()])).2, want);
        assert_eq!(out::<i64>(sub("vm.op.sub", &[row, m])).2, vec![9, 18, 27, 6, 15, 24]);
        assert!(is_suffix(&[1, 3], &[2, 3]) && is_suffix(&[3, 4], &[2, 3, 4]));
        assert!(!is_suffix(&[1, 1], &[2, 3]) && !is_suffix(&[2, 1], &[2, 3]) && !is_suffix(&[0], &[2, 0]));
    }

    #[test]
    fn scalars_are_weak() {
        let a = t(&[3], vec![1i8, 2, 127]);
        let (_, d, v) = out::<i8>(add("vm.op.add", &[a.clone(), Value::Int(10)]));
        assert_eq!((d, v), (DataType::I8, vec![11, 12, -119]));
        let (_, d, v) = out::<f64>(add("vm.op.add", &[a.clone(), Value::Float(0.5)]));
        assert_eq!((d, v), (DataType::F64, vec![1.5, 2.5, 127.5]));
        let e = add("vm.op.add", &[a.clone(), Value::Int(1000)]).unwrap_err().to_string();
        assert!(e.contains("Python integer 1000 is out of bounds for int8"), "{e}");
        let (s, d, v) = out::<i64>(sub("vm.op.sub", &[Value::Int(1), Value::Int(3)]));
        assert_eq!((s, d, v), (vec![], DataType::I64, vec![-2]));
        let h = t(&[1], vec![f16::from_f32(1.5)]);
        let (_, d, v) = out::<f16>(mul("vm.op.mul", &[Value::Int(2), h]));
        assert_eq!((d, v), (DataType::F16, vec![f16::from_f32(3.0)]));
        let bools = t(&[2], vec![true, false]);
        let (_, d, v) = out::<i64>(add("vm.op.add", &[bools.clone(), Value::Int(1)]));
        assert_eq!((d, v), (DataType::I64, vec![2, 1]));
        let (_, d, v) = out::<bool>(add("vm.op.add", &[bools.clone(), Value::Bool(false)]));
        assert_eq!((d, v), (DataType::Bool, vec![true, false]));
    }

    #[test]
    fn mixed_dtypes_promote() {
        let u = t(&[2], vec![200u8, 1]);
        let i = t(&[2], vec![-1i8, -2]);
        let (_, d, v) = out::<i16>(add("vm.op.add", &[u.clone(), i.clone()]));
        assert_eq!((d, v), (DataType::I16, vec![199, -1]));
        let f = t(&[2], vec![0.5f32, 0.25]);
        let (_, d, v) = out::<f32>(add("vm.op.add", &[i.clone(), f]));
        assert_eq!((d, v), (DataType::F32, vec![-0.5, -1.75]));
        let l = t(&[2], vec![1i64 << 53, 3]);
        let (_, d, v) = out::<i64>(add("vm.op.add", &[l, t(&[2], vec![1i32, 1])]));
        assert_eq!((d, v), (DataType::I64, vec![(1i64 << 53) + 1, 4]));
    }

    #[test]
    fn division_and_bool_rules() {
        let a = t(&[3], vec![1i32, -3, 0]);
        let (_, d, v) = out::<f64>(div("vm.op.div", &[a.clone(), Value::Int(2)]));
        assert_eq!((d, v), (DataType::F64, vec![0.5, -1.5, 0.0]));
        let (_, d, v) = out::<f64>(div("vm.op.div", &[t(&[1], vec![1i8]), Value::Int(300)]));
        assert_eq!((d, v), (DataType::F64, vec![1.0 / 300.0]));
        let (_, _, v) = out::<f64>(div("vm.op.div", &[a.clone(), Value::Int(0)]));
        assert!(v[0].is_infinite() && v[1] == f64::NEG_INFINITY && v[2].is_nan());
        let b = t(&[2], vec![true, false]);
        assert_eq!(out::<bool>(add("vm.op.add", &[b.clone(), b.clone()])).2, vec![true, false]);
        assert_eq!(out::<bool>(mul("vm.op.mul", &[b.clone(), t(&[2], vec![true, true])])).2, vec![true, false]);
        assert!(sub("vm.op.sub", &[b.clone(), b.clone()]).unwrap_err().to_string().contains("vm.op.sub"));
        assert_eq!(
            format!("{:?}", neg("vm.op.neg", std::slice::from_ref(&b)).expect_err("an error")),
            r#"Value("vm.op.neg: expected a numeric operand, found a boolean one (numpy does not negate booleans; use logical not)")"#
        );
        assert_eq!(out::<f64>(div("vm.op.div", &[b.clone(), Value::Bool(true)])).1, DataType::F64);
    }

    #[test]
    fn max_min_propagate_nan() {
        let a = t(&[3], vec![1.0f64, f64::NAN, -1.0]);
        let b = t(&[3], vec![0.0f64, 0.0, f64::NAN]);
        let v = out::<f64>(maximum("vm.op.maximum", &[a.clone(), b.clone()])).2;
        assert!(v[0] == 1.0 && v[1].is_nan() && v[2].is_nan());
        let v = out::<f64>(minimum("vm.op.minimum", &[a, Value::Float(0.0)])).2;
        assert!(v[0] == 0.0 && v[1].is_nan() && v[2] == -1.0);
    }

    #[test]
    fn unary_ops() {
        let a = t(&[2], vec![-4.0f32, 4.0]);
        assert_eq!(out::<f32>(neg("vm.op.neg", std::slice::from_ref(&a))).2, vec![4.0, -4.0]);
        assert_eq!(out::<f32>(relu("vm.op.relu", std::slice::from_ref(&a))).2, vec![0.0, 4.0]);
        let v = out::<f32>(sqrt("vm.op.sqrt", std::slice::from_ref(&a))).2;
        assert!(v[0].is_nan() && v[1] == 2.0);
        let (_, d, v) = out::<f64>(exp("vm.op.exp", &[Value::Int(0)]));
        assert_eq!((d, v), (DataType::F64, vec![1.0]));
        assert_eq!(out::<f16>(exp("vm.op.exp", &[t(&[1], vec![0i8])])).1, DataType::F16);
        assert_eq!(out::<f32>(sqrt("vm.op.sqrt", &[t(&[1], vec![4u16])])).2, vec![2.0]);
        assert_eq!(out::<f64>(sqrt("vm.op.sqrt", &[t(&[1], vec![4i64])])).2, vec![2.0]);
        assert_eq!(out::<u8>(neg("vm.op.neg", &[t(&[1], vec![1u8])])).2, vec![255]);
        assert_eq!(out::<i32>(relu("vm.op.relu", &[t(&[2], vec![-1i32, 3])])).2, vec![0, 3]);
        assert_eq!(
            format!("{:?}", exp("vm.op.exp", &[Value::str("x")]).expect_err("an error")),
            r#"Type { expected: "tensor, int, float or bool as argument 0 (operand) of vm.op.exp", found: "str" }"#
        );
        assert_eq!(
            format!("{:?}", exp("vm.op.exp", &[]).expect_err("an error")),
            r#"Arity { func: "vm.op.exp", expected: "1", got: 0 }"#
        );
    }

    #[test]
    fn empty_zero_dim_and_strided() {
        let e = t(&[0, 3], Vec::<f32>::new());
        let (s, _, v) = out::<f32>(add("vm.op.add", &[e.clone(), t(&[3], vec![1.0f32, 2.0, 3.0])]));
        assert_eq!((s, v.len()), (vec![0, 3], 0));
        let z = Value::Tensor(Tensor::scalar(2.0f32));
        let (s, _, v) = out::<f32>(mul("vm.op.mul", &[z.clone(), z.clone()]));
        assert_eq!((s, v), (vec![], vec![4.0]));
        let base = Tensor::from_vec([2, 3], (0..6).map(|x| x as f32).collect::<Vec<_>>()).unwrap();
        let tr = Tensor::from_parts(base.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::F32).unwrap();
        let (s, _, v) = out::<f32>(add("vm.op.add", &[Value::Tensor(tr.clone()), Value::Float(1.0)]));
        assert_eq!((s, v), (vec![3, 2], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
        let (_, _, v) = out::<f32>(add("vm.op.add", &[Value::Tensor(tr.clone()), Value::Tensor(tr)]));
        assert_eq!(v, vec![0.0, 6.0, 2.0, 8.0, 4.0, 10.0]);
    }

    #[test]
    fn huge_broadcast_is_an_error() {
        let a = Value::Tensor(Tensor::zeros([1 << 20, 1], DataType::Bool, Default::default()).unwrap());
        let b = Value::Tensor(Tensor::zeros([1, 1 << 20], DataType::Bool, Default::default()).unwrap());
        let e = add("vm.op.add", &[a, b]).unwrap_err();
        assert!(matches!(e.kind(), relaxvm::ErrorKind::Alloc { .. }), "{e}");
        // Empty, but its non-zero dimensions span 2^65 bytes: no tensor may have that shape.
        let a = Value::Tensor(Tensor::zeros([0, 1 << 31, 1], DataType::F64, Default::default()).unwrap());
        let b = Value::Tensor(Tensor::zeros([0, 1, 1 << 31], DataType::F64, Default::default()).unwrap());
        let e = add("vm.op.add", &[a, b]).unwrap_err();
        assert!(e.to_string().contains("too many elements"), "{e}");
    }

    #[test]
    fn large_results_are_the_same_on_any_number_of_threads() {
        use crate::tensor_ops::test_util::on_one_thread;
        let (rows, cols) = (700usize, 1001usize);
        let n = rows * cols;
        let m = t(&[rows as i64, cols as i64], (0..n).map(|i| (i % 977) as f32 * 0.5).collect());
        let m2 = t(&[rows as i64, cols as i64], (0..n).map(|i| (i % 13) as f32).collect());
        let row = t(&[cols as i64], (0..cols).map(|i| i as f32 * 0.25).collect());
        let cases: Vec<(&str, Vec<Value>)> = vec![
            ("full", vec![m.clone(), m2.clone()]),
            ("scalar right", vec![m.clone(), Value::Float(1.5)]),
            ("scalar left", vec![Value::Float(1.5), m.clone()]),
            ("row right", vec![m.clone(), row.clone()]),
            ("row left", vec![row.clone(), m.clone()]),
        ];
        for (what, args) in cases {
            let many = out::<f32>(sub("vm.op.sub", &args));
            let one = on_one_thread(|| out::<f32>(sub("vm.op.sub", &args)));
            assert_eq!(many, one, "{what}");
            assert_eq!(many.0, vec![rows as i64, cols as i64], "{what}");
        }
        // Spot checks against the definition.
        let (_, _, v) = out::<f32>(sub("vm.op.sub", &[row.clone(), m.clone()]));
        let i = 3 * cols + 17;
        assert_eq!(v[i], 17.0 * 0.25 - (i % 977) as f32 * 0.5);
        let (_, _, v) = out::<f32>(sub("vm.op.sub", &[m.clone(), row]));
        assert_eq!(v[n - 1], ((n - 1) % 977) as f32 * 0.5 - (cols - 1) as f32 * 0.25);
        let (_, _, v) = out::<f32>(exp("vm.op.exp", std::slice::from_ref(&m2)));
        assert_eq!(v[n - 1], (((n - 1) % 13) as f32).exp());
    }
}
