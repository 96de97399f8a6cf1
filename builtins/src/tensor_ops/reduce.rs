//! Reductions: `vm.op.sum(x, [axis, [keepdims]])`.
//!
//! `axis` is null (every axis), an int, or a shape or tuple of ints; negative axes count from
//! the end, and an empty list reduces nothing. `keepdims` is a bool (or int; null is false).
//! The result dtype is numpy's: `int64` for bools and signed integers, `uint64` for unsigned
//! integers, the input's for floats. Integer sums wrap; float sums are pairwise, as numpy's,
//! with `float16`/`bfloat16` accumulated in `float32`.

use super::num::{not_a_float, Num};
use super::{numel, operand_array, operands_type, parallel, shaped, tensor_value, try_vec, Operand, Poll};
use crate::args::{self, type_err, value_err};
use ndarray::{ArrayD, ArrayViewD};
use relaxvm::dtype::TypeClass;
use relaxvm::{pool, CallCtx, DataType, Result, Value};

/// `vm.op.sum(x, [axis, [keepdims]])`.
pub(crate) fn sum(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    sum_polled(name, args, &mut || ctx.check_interrupt())
}

/// [`sum`] with `poll` called every few MiB of work.
pub(super) fn sum_polled(name: &'static str, args: &[Value], poll: Poll<'_>) -> Result<Value> {
    args::arity_range(name, args, 1, 3)?;
    let x = Operand::arg(name, args, 0, "operand")?;
    let dtype = operands_type(name, &[x])?;
    let ndim = x.shape().len();
    let axes = parse_axes(name, args.get(1), ndim)?;
    let keepdims = match args.get(2) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Int(i)) => *i != 0,
        Some(other) => return Err(type_err(name, 2, "keepdims", "bool", other)),
    };
    match dtype.class() {
        TypeClass::Bool | TypeClass::Int => sum_as::<i64>(name, &x, &axes, keepdims, &mut *poll).map(tensor_value),
        TypeClass::UInt => sum_as::<u64>(name, &x, &axes, keepdims, &mut *poll).map(tensor_value),
        TypeClass::Float | TypeClass::BFloat => {
            match dtype {
                DataType::F64 => sum_as::<f64>(name, &x, &axes, keepdims, &mut *poll).map(tensor_value),
                DataType::F32 => sum_as::<f32>(name, &x, &axes, keepdims, &mut *poll).map(tensor_value),
                DataType::F16 => sum_as::<f32>(name, &x, &axes, keepdims, &mut *poll)
                    .map(|a| tensor_value(a.mapv(half::f16::from_f32))),
                DataType::BF16 => sum_as::<f32>(name, &x, &axes, keepdims, &mut *poll)
                    .map(|a| tensor_value(a.mapv(half::bf16::from_f32))),
                other => Err(not_a_float(name, other)),
            }
        }
    }
}

/// The reduction axes, sorted and distinct.
fn parse_axes(name: &str, v: Option<&Value>, ndim: usize) -> Result<Vec<usize>> {
    let raw: Vec<i64> = match v {
        None | Some(Value::Null) => return Ok((0..ndim).collect()),
        Some(Value::Int(i)) => vec![*i],
        Some(Value::Shape(s)) => s.to_vec(),
        Some(Value::Tuple(items)) => items
            .iter()
            .map(|item| match item {
                Value::Int(i) => Ok(*i),
                other => Err(type_err(name, 1, "axis", "int in the axis tuple", other)),
            })
            .collect::<Result<_>>()?,
        Some(other) => return Err(type_err(name, 1, "axis", "null, int, shape or tuple of ints", other)),
    };
    let n = ndim as i64;
    let mut axes = raw
        .iter()
        .map(|a| {
            let k = if *a < 0 { a.checked_add(n) } else { Some(*a) };
            k.filter(|k| (0..n).contains(k))
                .map(|k| k as usize)
                .ok_or_else(|| value_err(name, format!("axis {a} is out of bounds for a tensor of dimension {ndim}")))
        })
        .collect::<Result<Vec<usize>>>()?;
    axes.sort_unstable();
    if axes.windows(2).any(|w| w[0] == w[1]) {
        return Err(value_err(name, format!("duplicate value in axis {raw:?}")));
    }
    Ok(axes)
}

/// The sum over `axes`, accumulated in `A`.
fn sum_as<A: Num>(name: &str, x: &Operand<'_>, axes: &[usize], keepdims: bool, poll: Poll<'_>) -> Result<ArrayD<A>> {
    let a = operand_array::<A>(name, x, &mut *poll)?;
    let out = reduce(name, a.view(), axes, poll)?;
    if !keepdims {
        return Ok(out);
    }
    let kept_shape: Vec<usize> =
        a.shape().iter().enumerate().map(|(i, d)| if axes.contains(&i) { 1 } else { *d }).collect();
    shaped(name, &kept_shape, out.into_raw_vec_and_offset().0)
}

/// Sums the axes `axes` (sorted) away: the kept axes are moved first and the reduced ones
/// last, so each output element sums one contiguous run. Every loop polls every few MiB of
/// elements read (the input may be a huge view); the pieces and the order in which each sum
/// adds do not depend on polling.
fn reduce<A: Num>(name: &str, a: ArrayViewD<'_, A>, axes: &[usize], poll: Poll<'_>) -> Result<ArrayD<A>> {
    let kept: Vec<usize> = (0..a.ndim()).filter(|i| !axes.contains(i)).collect();
    let out_shape: Vec<usize> = kept.iter().map(|k| a.shape()[*k]).collect();
    // The product of the reduced dimensions can only overflow when a kept dimension is 0 (the
    // tensor exists, so its element count fits); the result is then empty either way.
    let inner = axes.iter().try_fold(1usize, |acc, k| acc.checked_mul(a.shape()[*k])).unwrap_or(0);
    let outer = numel(name, &out_shape, std::mem::size_of::<A>())?;
    // Leading axes of a standard-layout array: add whole rows (vectorised), as numpy does.
    let leading = !kept.is_empty() && axes.iter().enumerate().all(|(i, k)| i == *k);
    if let (true, Some(data), true) = (leading, a.as_slice(), inner > 0) {
        let mut out = try_vec(name, outer)?;
        if data.len() >= parallel::MIN_PARALLEL_ELEMENTS && outer > 1 {
            // Pieces of columns across the pool, each column summed row by row as below.
            // Each column is summed in the same order whatever the piece: any size will do.
            let piece = (outer / 16).clamp(64, parallel::ELEMENTS_PER_PIECE / 8);
            parallel::fill_pieces(name, &mut out, outer, piece, data.len(), poll, &|start, sink| {
                let end = start + sink.capacity();
                let mut acc = data[start..end].to_vec();
                for row in data.chunks_exact(outer).skip(1) {
                    // A piece reads every row: long when there are many.
                    if !sink.progress(end - start) {
                        return;
                    }
                    for (o, x) in acc.iter_mut().zip(&row[start..end]) {
                        *o = o.plus(*x);
                    }
                }
                sink.extend(acc);
            })?;
            return shaped(name, &out_shape, out);
        }
        let mut rows = data.chunks_exact(outer.max(1));
        out.extend_from_slice(rows.next().unwrap_or(&[]));
        // Few columns (one, say) may have many rows: poll every few MiB of rows.
        let rows_per_poll = (pool::POLL_EVERY / outer.max(1)).max(1);
        for (i, row) in rows.enumerate() {
            if i % rows_per_poll == rows_per_poll - 1 {
                poll()?;
            }
            for (o, x) in out.iter_mut().zip(row) {
                *o = o.plus(*x);
            }
        }
        out.truncate(outer);
        return shaped(name, &out_shape, out);
    }
    let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let permuted = a.permuted_axes(perm);
    // A copy in the permuted order, allocated fallibly (a broadcast input may be huge).
    let copied;
    let data = match permuted.as_slice() {
        Some(d) => d,
        None => {
            let mut v = try_vec(name, permuted.len())?;
            parallel::extend_polled(&mut v, permuted.iter().copied(), &mut *poll)?;
            copied = v;
            &copied[..]
        }
    };
    let mut out = try_vec(name, outer)?;
    if inner == 0 {
        out.resize(outer, A::ZERO);
    } else if data.len() < parallel::MIN_PARALLEL_ELEMENTS {
        out.extend(data.chunks_exact(inner).map(pairwise));
    } else if outer == 1 || inner > parallel::ELEMENTS_PER_PIECE {
        // Long runs: each in leaves across the pool (the same sums as `pairwise`).
        for run in data.chunks_exact(inner) {
            out.push(pairwise_in_pieces(name, run, &mut *poll)?);
        }
    } else {
        // Whole runs, several to a piece, across the pool.
        let piece = (parallel::ELEMENTS_PER_PIECE / inner).max(1);
        parallel::fill_pieces(name, &mut out, outer, piece, data.len(), poll, &|start, sink| {
            let end = start + sink.capacity();
            sink.extend(data[start * inner..end * inner].chunks_exact(inner).map(pairwise))
        })?;
    }
    shaped(name, &out_shape, out)
}

/// The length of the first half when [`pairwise`] splits `len` elements (more than 128).
fn pairwise_split(len: usize) -> usize {
    let half = len / 2;
    half - half % 8
}

/// [`pairwise`] of a large slice with its leaves — the subtrees of at most
/// [`parallel::ELEMENTS_PER_PIECE`] elements — summed across the thread pool and combined in
/// the same tree on this thread: the same result as `pairwise(s)`, whatever the thread count.
fn pairwise_in_pieces<A: Num>(name: &str, s: &[A], poll: Poll<'_>) -> Result<A> {
    fn leaves(start: usize, len: usize, out: &mut Vec<(usize, usize)>) {
        if len <= parallel::ELEMENTS_PER_PIECE {
            out.push((start, len));
        } else {
            let left = pairwise_split(len);
            leaves(start, left, out);
            leaves(start + left, len - left, out);
        }
    }
    fn combine<A: Num>(len: usize, sums: &mut impl Iterator<Item = A>) -> A {
        if len <= parallel::ELEMENTS_PER_PIECE {
            // One sum per leaf, in order: the iterator cannot run dry.
            sums.next().unwrap_or(A::ZERO)
        } else {
            let left = pairwise_split(len);
            let l = combine(left, sums);
            l.plus(combine(len - left, sums))
        }
    }
    let mut ranges = Vec::new();
    leaves(0, s.len(), &mut ranges);
    let mut sums = try_vec(name, ranges.len())?;
    parallel::fill_pieces(name, &mut sums, ranges.len(), 1, s.len(), poll, &|i, sink| {
        let (start, len) = ranges[i];
        // A piece writes one sum of up to a piece's elements: count what it reads.
        if sink.progress(len) {
            sink.push(pairwise(&s[start..start + len]));
        }
    })?;
    Ok(combine(s.len(), &mut sums.into_iter()))
}

/// numpy's block of pairwise summation: a run of at most this many elements is summed with
/// eight accumulators.
const PAIRWISE_BLOCK: usize = 128;

/// Pairwise summation (numpy's scheme: eight accumulators on blocks of up to 128 elements).
fn pairwise<A: Num>(s: &[A]) -> A {
    if s.len() < 8 {
        return s.iter().fold(A::ZERO, |acc, x| acc.plus(*x));
    }
    if s.len() <= PAIRWISE_BLOCK {
        let mut acc = [A::ZERO; 8];
        let mut chunks = s.chunks_exact(8);
        for c in &mut chunks {
            for (a, x) in acc.iter_mut().zip(c) {
                *a = a.plus(*x);
            }
        }
        let total =
            (acc[0].plus(acc[1])).plus(acc[2].plus(acc[3])).plus((acc[4].plus(acc[5])).plus(acc[6].plus(acc[7])));
        return chunks.remainder().iter().fold(total, |acc, x| acc.plus(*x));
    }
    let half = s.len() / 2;
    let mid = half - half % 8;
    pairwise(&s[..mid]).plus(pairwise(&s[mid..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_ops::test_util::{out, t};
    use relaxvm::Tensor;

    /// `vm.op.sum` outside a VM (nothing to poll).
    fn sum(name: &'static str, args: &[Value]) -> Result<Value> {
        super::sum(name, &mut CallCtx::detached(), args)
    }

    const N: &str = "vm.op.sum";

    #[test]
    fn sums_over_axes() {
        let x = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(out::<f32>(sum(N, std::slice::from_ref(&x))), (vec![], DataType::F32, vec![21.0]));
        assert_eq!(out::<f32>(sum(N, &[x.clone(), 0.into()])).2, vec![5.0, 7.0, 9.0]);
        assert_eq!(out::<f32>(sum(N, &[x.clone(), (-1).into()])).2, vec![6.0, 15.0]);
        assert_eq!(out::<f32>(sum(N, &[x.clone(), Value::Shape([0, 1].into())])).2, vec![21.0]);
        assert_eq!(
            out::<f32>(sum(N, &[x.clone(), Value::tuple(vec![Value::Int(1)]), Value::Bool(true)])).0,
            vec![2, 1]
        );
        assert_eq!(out::<f32>(sum(N, &[x.clone(), Value::Null, Value::Bool(true)])).0, vec![1, 1]);
        let (s, _, v) = out::<f32>(sum(N, &[x.clone(), Value::Shape([].into())]));
        assert_eq!((s, v), (vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    }

    #[test]
    fn leading_axes_add_rows() {
        let x = t(&[2, 2, 3], (0..12).map(|v| v as f64).collect());
        assert_eq!(out::<f64>(sum(N, &[x.clone(), 0.into()])).2, vec![6.0, 8.0, 10.0, 12.0, 14.0, 16.0]);
        assert_eq!(out::<f64>(sum(N, &[x.clone(), Value::Shape([0, 1].into())])).2, vec![18.0, 22.0, 26.0]);
        assert_eq!(out::<f64>(sum(N, &[x.clone(), Value::Shape([0, 2].into())])).2, vec![24.0, 42.0]);
        let zero_cols = t(&[3, 0], Vec::<f64>::new());
        assert_eq!(out::<f64>(sum(N, &[zero_cols, 0.into()])).0, vec![0]);
    }

    #[test]
    fn sum_dtypes_follow_numpy() {
        assert_eq!(out::<i64>(sum(N, &[t(&[3], vec![true, true, false])])), (vec![], DataType::I64, vec![2]));
        assert_eq!(out::<i64>(sum(N, &[t(&[2], vec![100i8, 100])])).2, vec![200]);
        assert_eq!(out::<u64>(sum(N, &[t(&[2], vec![200u8, 100])])).2, vec![300]);
        assert_eq!(out::<i64>(sum(N, &[t(&[2], vec![i64::MAX, 1])])).2, vec![i64::MIN]);
        assert_eq!(
            out::<half::f16>(sum(N, &[t(&[2], vec![half::f16::ONE, half::f16::ONE])])).2,
            vec![half::f16::from_f32(2.0)]
        );
        assert_eq!(out::<half::bf16>(sum(N, &[t(&[1], vec![half::bf16::ONE])])).1, DataType::BF16);
        assert_eq!(out::<i64>(sum(N, &[Value::Int(4)])).2, vec![4]);
    }

    #[test]
    fn pairwise_is_accurate() {
        let n = 1_000_003usize;
        let x = t(&[n as i64], vec![0.1f32; n]);
        let v = out::<f32>(sum(N, &[x])).2[0];
        assert!((v as f64 - 0.1 * n as f64).abs() < 1.0, "{v}");
        let ints: Vec<i64> = (0..1000).collect();
        assert_eq!(pairwise(&ints), 499_500);
    }

    #[test]
    fn empty_nan_and_errors() {
        let e = t(&[0, 3], Vec::<f64>::new());
        assert_eq!(out::<f64>(sum(N, std::slice::from_ref(&e))).2, vec![0.0]);
        assert_eq!(out::<f64>(sum(N, &[e.clone(), 0.into()])).2, vec![0.0, 0.0, 0.0]);
        assert_eq!(out::<f64>(sum(N, &[e.clone(), 1.into()])).0, vec![0]);
        assert!(out::<f64>(sum(N, &[t(&[2], vec![1.0f64, f64::NAN])])).2[0].is_nan());
        let x = t(&[2, 3], vec![0i32; 6]);
        for bad in [Value::Int(2), Value::Int(-3), Value::Int(i64::MIN), Value::Shape([0, 0].into()), Value::str("x")] {
            let e = sum(N, &[x.clone(), bad]).unwrap_err().to_string();
            assert!(e.contains(N), "{e}");
        }
        assert_eq!(
            format!("{:?}", sum(N, &[x.clone(), Value::Null, Value::str("yes")]).expect_err("an error")),
            r#"Type { expected: "bool as argument 2 (keepdims) of vm.op.sum", found: "str" }"#
        );
        assert_eq!(
            format!("{:?}", sum(N, &[Value::Tensor(Tensor::scalar(1.0f32)), 0.into()]).expect_err("an error")),
            r#"Value("vm.op.sum: axis 0 is out of bounds for a tensor of dimension 0")"#
        );
        assert_eq!(
            format!("{:?}", sum(N, &[]).expect_err("an error")),
            r#"Arity { func: "vm.op.sum", expected: "1 to 3", got: 0 }"#
        );
    }

    #[test]
    fn large_sums_are_the_same_on_any_number_of_threads() {
        use crate::tensor_ops::test_util::on_one_thread;
        let n = 3_001_017usize;
        let data: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1013) as f32 * 0.37 - 150.0).collect();
        let x = t(&[n as i64], data.clone());
        let many = out::<f32>(sum(N, std::slice::from_ref(&x))).2[0];
        let one = on_one_thread(|| out::<f32>(sum(N, std::slice::from_ref(&x))).2[0]);
        // The same tree as the sequential pairwise sum, to the bit.
        assert_eq!((many.to_bits(), one.to_bits()), (pairwise(&data).to_bits(), pairwise(&data).to_bits()));
        // Rows, columns and a middle axis of a large matrix.
        let m = t(&[1000, 3001], data[..3_001_000].to_vec());
        for axis in [Value::Int(0), Value::Int(1), Value::Int(-1)] {
            let args = [m.clone(), axis];
            let many = out::<f32>(sum(N, &args)).2;
            let one = on_one_thread(|| out::<f32>(sum(N, &args)).2);
            assert_eq!(
                many.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                one.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
        let cols = out::<f32>(sum(N, &[m.clone(), Value::Int(0)])).2;
        let want: f32 = (0..1000).fold(0.0, |acc, r| acc + data[r * 3001 + 5]);
        assert_eq!(cols[5].to_bits(), want.to_bits());
        let rows = out::<f32>(sum(N, &[m, Value::Int(1)])).2;
        assert_eq!(rows[7].to_bits(), pairwise(&data[7 * 3001..8 * 3001]).to_bits());
    }
}
