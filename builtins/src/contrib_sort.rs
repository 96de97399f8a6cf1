//! TVM's `tvm.contrib.sort.*` functions, which compiled sort, argsort and top-k kernels call by
//! name through the runtime (`__TVMFFIFunctionCall`), with TVM 0.27's semantics
//! (`src/runtime/extra/contrib/sort/sort.cc`):
//!
//! | function | arguments | writes |
//! |---|---|---|
//! | `tvm.contrib.sort.sort` | `(input, output, axis, is_ascend)` | the values, sorted along `axis` |
//! | `tvm.contrib.sort.argsort` | `(input, output, axis, is_ascend)` | the indices that sort `input` |
//! | `tvm.contrib.sort.topk` | `(input, out..., k, axis, ret_type, is_ascend)` | the first `k` of the sorted order: values and/or indices as `ret_type` says (`"both"`, `"values"`, `"indices"`); `k < 1` means all |
//!
//! The results are TVM's bit for bit (checked against TVM's outputs in
//! `tests/contrib_sort.rs`): TVM sorts `(index, value)` pairs with libstdc++'s
//! `std::stable_sort` comparing values with `<` (`>` descending), so equal values keep their
//! order, and NaN — for which `<` is false both ways — lands wherever that algorithm's steps
//! leave it; top-k keeps a heap (`std::make_heap`/`push_heap`/`pop_heap`) ordered by value then
//! lower index. `stl.rs` reproduces those libstdc++ algorithms step for step.

use crate::args::{self, type_err, value_err};
use crate::table::{builtin, Builtin};
use relaxvm::{dispatch_dtype, CallCtx, DataType, Error, Result, Tensor, Value};
use stl::Ticker;

pub(crate) mod stl;

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("tvm.contrib.sort.sort", ctx sort),
    builtin!("tvm.contrib.sort.argsort", ctx argsort),
    builtin!("tvm.contrib.sort.topk", ctx topk),
];

/// The input dtypes each function accepts (TVM's dispatch tables).
const SORT_DTYPES: &[DataType] = &[DataType::F32, DataType::F64, DataType::I32, DataType::I64, DataType::F16];
const TOPK_DTYPES: &[DataType] =
    &[DataType::F32, DataType::F64, DataType::U8, DataType::I8, DataType::I32, DataType::I64, DataType::F16];
/// Index output dtypes.
const INDEX_DTYPES: &[DataType] = &[DataType::I32, DataType::I64, DataType::F32, DataType::F64];

fn tensor<'a>(name: &str, args: &'a [Value], i: usize, what: &str) -> Result<&'a Tensor> {
    match args.get(i) {
        Some(Value::Tensor(t)) => Ok(t),
        Some(other) => Err(type_err(name, i, what, "tensor", other)),
        None => Err(Error::arity(name, format!("at least {}", i + 1), args.len())),
    }
}

fn flag(name: &str, args: &[Value], i: usize, what: &str) -> Result<bool> {
    match args.get(i) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::Int(v)) => Ok(*v != 0),
        Some(other) => Err(type_err(name, i, what, "bool", other)),
        None => Err(Error::arity(name, format!("at least {}", i + 1), args.len())),
    }
}

fn check_dtype(name: &str, t: &Tensor, allowed: &[DataType], what: &str) -> Result<()> {
    if allowed.contains(&t.dtype()) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(value_err(name, format!("unsupported {what} dtype {} (supported: {})", t.dtype(), names.join(", "))))
}

/// The axis, normalized; TVM's "Axis out of boundary" check.
fn axis_of(name: &str, input: &Tensor, axis: i64) -> Result<usize> {
    let nd = input.ndim() as i64;
    let a = if axis < 0 { axis + nd } else { axis };
    if !(0..nd).contains(&a) {
        return Err(value_err(name, format!("Axis out of boundary for input ndim {nd} (axis {axis})")));
    }
    Ok(a as usize)
}

/// `(before, n, after)`: a tensor of shape `dims` seen as `before x n x after` around `axis`.
fn split(dims: &[i64], axis: usize) -> (usize, usize, usize) {
    let size = |d: &[i64]| d.iter().map(|x| *x as usize).product::<usize>();
    (size(&dims[..axis]), dims[axis] as usize, size(&dims[axis + 1..]))
}

/// TVM's `CompareAscend<T, stable>` / `CompareDescend<T, stable>` on `(index, value)` pairs:
/// `<` (or `>`) on the values, ties broken by the lower index when `stable`.
fn comparator<T: PartialOrd>(ascend: bool, stable: bool) -> impl Fn(&(i64, T), &(i64, T)) -> bool {
    move |a, b| {
        if stable && a.1 == b.1 {
            return a.0 < b.0;
        }
        if ascend {
            a.1 < b.1
        } else {
            a.1 > b.1
        }
    }
}

/// Writes `values` (of the output's dtype) into a compact output tensor of `expected` shape.
fn write_out(name: &str, out: &Tensor, expected: &[i64], bytes: &[u8]) -> Result<()> {
    if out.shape().dims() != expected {
        return Err(value_err(name, format!("output of shape {} where {:?} is needed", out.shape(), expected)));
    }
    if !out.is_contiguous() {
        return Err(value_err(name, "the output must be a compact tensor"));
    }
    out.storage().write(out.byte_offset(), bytes)
}

/// Index `i` converted to `dtype` as TVM's `static_cast` does (integers wrap), written to `out`
/// (one element's bytes).
fn put_index(name: &str, dtype: DataType, i: i64, out: &mut [u8]) -> Result<()> {
    match dtype {
        DataType::I32 => out.copy_from_slice(&(i as i32).to_le_bytes()),
        DataType::I64 => out.copy_from_slice(&i.to_le_bytes()),
        DataType::F32 => out.copy_from_slice(&(i as f32).to_le_bytes()),
        DataType::F64 => out.copy_from_slice(&(i as f64).to_le_bytes()),
        DataType::U8 => out.copy_from_slice(&(i as u8).to_le_bytes()),
        DataType::I8 => out.copy_from_slice(&(i as i8).to_le_bytes()),
        other => return Err(value_err(name, format!("internal error: index output dtype {other} was not checked"))),
    }
    Ok(())
}

/// Indices converted to `dtype` (see [`put_index`]), as bytes.
fn index_bytes(name: &str, dtype: DataType, indices: &[i64]) -> Result<Vec<u8>> {
    let item = dtype.itemsize();
    let mut out = vec![0u8; indices.len() * item];
    for (i, chunk) in indices.iter().zip(out.chunks_exact_mut(item)) {
        put_index(name, dtype, *i, chunk)?;
    }
    Ok(out)
}

/// `sort` or `argsort`, polling with `poll` every few MiB of work.
fn sort_like(name: &'static str, args: &[Value], indices: bool, poll: &mut dyn FnMut() -> Result<()>) -> Result<Value> {
    args::arity(name, args, 4)?;
    let input = tensor(name, args, 0, "input")?;
    let output = tensor(name, args, 1, "output")?;
    let axis = axis_of(name, input, args::int(name, args, 2, "axis")?)?;
    let ascend = flag(name, args, 3, "is_ascend")?;
    check_dtype(name, input, SORT_DTYPES, "input")?;
    let dims = input.shape().dims().to_vec();
    if indices {
        check_dtype(name, output, INDEX_DTYPES, "output")?;
    } else if output.dtype() != input.dtype() {
        return Err(value_err(
            name,
            format!("output dtype {} differs from input dtype {}", output.dtype(), input.dtype()),
        ));
    }
    let (before, n, after) = split(&dims, axis);
    dispatch_dtype!(input.dtype(), T => {
        let data = input.to_vec::<T>()?;
        let mut pos = vec![0i64; data.len()];
        let mut vals = data.clone();
        let less = comparator::<T>(ascend, false);
        let mut sorter: Vec<(i64, T)> = Vec::with_capacity(n);
        let ticker = &mut Ticker::new(&mut *poll);
        for i in 0..before {
            for j in 0..after {
                let base = i * n * after + j;
                sorter.clear();
                sorter.extend((0..n).map(|k| (k as i64, data[base + k * after])));
                stl::stable_sort(&mut sorter, &less, ticker)?;
                for (k, (index, value)) in sorter.iter().enumerate() {
                    pos[base + k * after] = *index;
                    vals[base + k * after] = *value;
                }
            }
        }
        if indices {
            write_out(name, output, &dims, &index_bytes(name, output.dtype(), &pos)?)
        } else {
            write_out(name, output, &dims, &Tensor::from_vec(dims.clone(), vals)?.contiguous_bytes()?)
        }
    })?;
    Ok(Value::Null)
}

fn sort(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    sort_like(name, args, false, &mut || ctx.check_interrupt())
}

fn argsort(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    sort_like(name, args, true, &mut || ctx.check_interrupt())
}

/// The top `k` of one line, in order, as TVM computes them: a heap of the first `k` elements,
/// each later element replacing the heap's top when it ranks before it, then a stable sort.
fn top_of_line<T: Copy>(
    line: impl Iterator<Item = T>,
    k: usize,
    heap: &mut Vec<(i64, T)>,
    less: &impl Fn(&(i64, T), &(i64, T)) -> bool,
    ticker: &mut Ticker<'_>,
) -> Result<()> {
    heap.clear();
    let mut line = line.enumerate().map(|(i, v)| (i as i64, v));
    heap.extend(line.by_ref().take(k));
    ticker.tick(heap.len())?;
    stl::make_heap(heap, less);
    for cur in line {
        if (cur.0 as usize).is_multiple_of(stl::BLOCK) {
            ticker.tick(stl::BLOCK)?;
        }
        if less(&cur, &heap[0]) {
            heap.push(cur);
            stl::push_heap(heap, less);
            stl::pop_heap(heap, less);
            heap.pop();
        }
    }
    stl::stable_sort(heap, less, ticker)
}

/// `topk(input, [values_out,] [indices_out,] k, axis, ret_type, is_ascend)`.
fn topk(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    topk_polled(name, args, &mut || ctx.check_interrupt())
}

/// [`topk`], polling with `poll` every few MiB of work.
fn topk_polled(name: &'static str, args: &[Value], poll: &mut dyn FnMut() -> Result<()>) -> Result<Value> {
    args::arity_range(name, args, 6, 7)?;
    let n_args = args.len();
    let ret_type = match &args[n_args - 2] {
        Value::Str(s) => s.to_string(),
        other => return Err(type_err(name, n_args - 2, "ret_type", "str", other)),
    };
    let outputs = match (ret_type.as_str(), n_args) {
        ("both", 7) => 2,
        ("values" | "indices", 6) => 1,
        ("both" | "values" | "indices", _) => {
            return Err(Error::arity(name, if ret_type == "both" { "7" } else { "6" }, n_args));
        }
        _ => return Err(value_err(name, format!("Unsupported ret type: {ret_type}"))),
    };
    let input = tensor(name, args, 0, "input")?;
    let values_out =
        matches!(ret_type.as_str(), "both" | "values").then(|| tensor(name, args, 1, "values")).transpose()?;
    let indices_out = match ret_type.as_str() {
        "both" => Some(tensor(name, args, 2, "indices")?),
        "indices" => Some(tensor(name, args, 1, "indices")?),
        _ => None,
    };
    let k = args::int(name, args, 1 + outputs, "k")?;
    let axis = axis_of(name, input, args::int(name, args, 2 + outputs, "axis")?)?;
    let ascend = flag(name, args, n_args - 1, "is_ascend")?;
    check_dtype(name, input, TOPK_DTYPES, "input")?;
    if let Some(ix) = indices_out {
        let ok = INDEX_DTYPES.contains(&ix.dtype())
            || ix.dtype() == input.dtype() && matches!(ix.dtype(), DataType::U8 | DataType::I8);
        if !ok {
            return Err(value_err(name, format!("Unsupported output dtype: {}", ix.dtype())));
        }
    }
    if let Some(v) = values_out {
        if v.dtype() != input.dtype() {
            return Err(value_err(
                name,
                format!("values output dtype {} differs from input dtype {}", v.dtype(), input.dtype()),
            ));
        }
    }
    let dims = input.shape().dims().to_vec();
    let (before, n, after) = split(&dims, axis);
    let k = if k < 1 { n } else { usize::try_from(k).map_err(|_| value_err(name, "k too large"))? };
    let mut out_dims = dims.clone();
    out_dims[axis] = k as i64;
    for (which, t) in [("values", values_out), ("indices", indices_out)] {
        if let Some(t) = t.filter(|t| t.shape().dims() != out_dims.as_slice()) {
            return Err(value_err(
                name,
                format!("the {which} output has shape {}, expected {out_dims:?} (k={k} along axis {axis})", t.shape()),
            ));
        }
    }
    // TVM writes min(k, n) results per line and leaves the rest of the outputs (k > n) as they
    // were: start from the outputs' current contents.
    let mut indices_bytes = indices_out.map(Tensor::contiguous_bytes).transpose()?.unwrap_or_default();
    let values_bytes = dispatch_dtype!(input.dtype(), T => {
        let data = input.to_vec::<T>()?;
        let mut values: Vec<T> = match values_out {
            Some(v) => v.to_vec::<T>()?,
            None => Vec::new(),
        };
        let index_item = indices_out.map_or(0, |t| t.dtype().itemsize());
        let less = comparator::<T>(ascend, true);
        let mut heap: Vec<(i64, T)> = Vec::with_capacity(k.min(n) + 1);
        let ticker = &mut Ticker::new(&mut *poll);
        for i in 0..before {
            for j in 0..after {
                let src = i * n * after + j;
                top_of_line((0..n).map(|kk| data[src + kk * after]), k, &mut heap, &less, ticker)?;
                let dst = i * k * after + j;
                for (kk, (index, value)) in heap.iter().enumerate() {
                    let at = dst + kk * after;
                    if let Some(ix) = indices_out {
                        put_index(name, ix.dtype(), *index, &mut indices_bytes[at * index_item..(at + 1) * index_item])?;
                    }
                    if values_out.is_some() {
                        values[at] = *value;
                    }
                }
            }
        }
        Ok::<Vec<u8>, Error>(if values_out.is_some() {
            Tensor::from_vec(out_dims.clone(), values)?.contiguous_bytes()?
        } else {
            Vec::new()
        })
    })?;
    if let Some(v) = values_out {
        write_out(name, v, &out_dims, &values_bytes)?;
    }
    if let Some(ix) = indices_out {
        write_out(name, ix, &out_dims, &indices_bytes)?;
    }
    Ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::Device;

    fn call(name: &str, args: &[Value]) -> Result<Value> {
        crate::table::call(BUILTINS, name, args)
    }

    fn t<T: relaxvm::Element>(shape: &[i64], v: Vec<T>) -> Tensor {
        Tensor::from_vec(shape.to_vec(), v).unwrap()
    }

    fn zeros(shape: &[i64], d: DataType) -> Tensor {
        Tensor::zeros(shape.to_vec(), d, Device::cpu(0)).unwrap()
    }

    /// Runs `op` with a poll that fails on its second call: its error, and how many calls.
    fn stopped(op: impl FnOnce(&mut dyn FnMut() -> Result<()>) -> Result<Value>) -> (String, usize) {
        let mut calls = 0;
        let e = op(&mut || {
            calls += 1;
            if calls == 2 {
                Err(Error::value("polled out"))
            } else {
                Ok(())
            }
        })
        .expect_err("the sort was not stopped");
        (e.to_string(), calls)
    }

    #[test]
    fn long_sorts_stop_when_a_poll_fails_and_polling_changes_nothing() {
        let n: i32 = 4 << 20;
        // A line in reverse order (every merge moves every element), then many short lines.
        let x = t(&[n as i64], (0..n).rev().collect());
        let out = zeros(&[n as i64], DataType::I32);
        let args = [x.clone().into(), out.clone().into(), 0.into(), true.into()];
        assert_eq!(stopped(|p| sort_like("tvm.contrib.sort.sort", &args, false, p)), ("polled out".into(), 2));
        let lines = t(&[(n / 8) as i64, 8], (0..n).rev().collect());
        let line_out = zeros(&[(n / 8) as i64, 8], DataType::I64);
        let args = [lines.into(), line_out.into(), 1.into(), true.into()];
        assert_eq!(stopped(|p| sort_like("tvm.contrib.sort.argsort", &args, true, p)).0, "polled out");
        let top = zeros(&[3], DataType::I32);
        let args = [x.clone().into(), top.clone().into(), 3.into(), 0.into(), Value::str("values"), false.into()];
        assert_eq!(stopped(|p| topk_polled("tvm.contrib.sort.topk", &args, p)).0, "polled out");
        // With a poll that never fails, the same result as without (polls only observe).
        let mut polls = 0;
        let args = [x.into(), out.clone().into(), 0.into(), true.into()];
        sort_like("tvm.contrib.sort.sort", &args, false, &mut || {
            polls += 1;
            Ok(())
        })
        .unwrap();
        assert!(polls > 1, "{polls}");
        assert_eq!(out.to_vec::<i32>().unwrap(), (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn sort_and_argsort_are_stable_in_both_directions() {
        let x = t(&[2, 4], vec![3.0f32, 1.0, 3.0, 2.0, 0.0, -1.0, 0.0, 5.0]);
        let out = zeros(&[2, 4], DataType::F32);
        call("tvm.contrib.sort.sort", &[x.clone().into(), out.clone().into(), Value::Int(1), Value::Bool(true)])
            .unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 3.0, -1.0, 0.0, 0.0, 5.0]);
        let idx = zeros(&[2, 4], DataType::I32);
        call("tvm.contrib.sort.argsort", &[x.clone().into(), idx.clone().into(), Value::Int(-1), Value::Bool(false)])
            .unwrap();
        // Descending, ties keep index order (0 before 2; 4 before 6).
        assert_eq!(idx.to_vec::<i32>().unwrap(), vec![0, 2, 3, 1, 3, 0, 2, 1]);
        // Along axis 0.
        let idx = zeros(&[2, 4], DataType::I64);
        call("tvm.contrib.sort.argsort", &[x.into(), idx.clone().into(), Value::Int(0), Value::Int(1)]).unwrap();
        assert_eq!(idx.to_vec::<i64>().unwrap(), vec![1, 1, 1, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn nan_is_placed_as_tvm_places_it() {
        // `<` with NaN is false both ways, so NaN stays where the merge steps leave it; the
        // expected orders are TVM 0.27's (tests/contrib_sort.rs checks many more).
        let x = t(&[4], vec![2.0f64, f64::NAN, 1.0, f64::NAN]);
        let idx = zeros(&[4], DataType::I64);
        call("tvm.contrib.sort.argsort", &[x.clone().into(), idx.clone().into(), Value::Int(0), Value::Bool(true)])
            .unwrap();
        assert_eq!(idx.to_vec::<i64>().unwrap(), vec![2, 0, 1, 3]);
        call("tvm.contrib.sort.argsort", &[x.into(), idx.clone().into(), Value::Int(0), Value::Bool(false)]).unwrap();
        assert_eq!(idx.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn topk_returns_what_ret_type_asks() {
        let x = t(&[5], vec![4i32, 9, 4, 1, 9]);
        let (v, i) = (zeros(&[3], DataType::I32), zeros(&[3], DataType::I64));
        let args = |outs: Vec<Value>, k: i64, ret: &str, asc: bool| {
            let mut a = vec![Value::Tensor(x.clone())];
            a.extend(outs);
            a.extend([Value::Int(k), Value::Int(0), Value::str(ret), Value::Bool(asc)]);
            a
        };
        call("tvm.contrib.sort.topk", &args(vec![v.clone().into(), i.clone().into()], 3, "both", false)).unwrap();
        assert_eq!((v.to_vec::<i32>().unwrap(), i.to_vec::<i64>().unwrap()), (vec![9, 9, 4], vec![1, 4, 0]));
        call("tvm.contrib.sort.topk", &args(vec![i.clone().into()], 3, "indices", true)).unwrap();
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![3, 0, 2]);
        let all = zeros(&[5], DataType::I32);
        call("tvm.contrib.sort.topk", &args(vec![all.clone().into()], 0, "values", true)).unwrap();
        assert_eq!(all.to_vec::<i32>().unwrap(), vec![1, 4, 4, 9, 9]);
        let e =
            call("tvm.contrib.sort.topk", &args(vec![all.clone().into()], 0, "mode", true)).unwrap_err().to_string();
        assert!(e.contains("Unsupported ret type: mode"), "{e}");
        // A huge k is checked against the outputs before anything is allocated for it.
        for k in [1i64 << 40, i64::MAX] {
            let e = call("tvm.contrib.sort.topk", &args(vec![all.clone().into()], k, "values", true)).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("tvm.contrib.sort.topk: the values output has shape (5,), expected [{k}] (k={k} along axis 0)")
            );
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let x = t(&[2], vec![true, false]);
        let out = zeros(&[2], DataType::Bool);
        let e = call("tvm.contrib.sort.sort", &[x.into(), out.into(), Value::Int(0), Value::Bool(true)]).unwrap_err();
        assert!(e.to_string().contains("unsupported input dtype bool"), "{e}");
        let x = t(&[2], vec![1.0f32, 2.0]);
        let e = call(
            "tvm.contrib.sort.sort",
            &[x.clone().into(), zeros(&[2], DataType::F32).into(), Value::Int(1), Value::Bool(true)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("Axis out of boundary for input ndim 1"), "{e}");
        let e = call(
            "tvm.contrib.sort.sort",
            &[x.clone().into(), zeros(&[3], DataType::F32).into(), Value::Int(0), Value::Bool(true)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("output of shape (3,)"), "{e}");
        let e = call(
            "tvm.contrib.sort.argsort",
            &[x.into(), zeros(&[2], DataType::U16).into(), Value::Int(0), Value::Bool(true)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("unsupported output dtype uint16"), "{e}");
    }
}
