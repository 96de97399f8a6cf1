//! The shape heap: a 1-D `int64` tensor in which programs keep symbolic dimensions, and the
//! builtins that fill it from tensors and shapes and build shapes and values from it.
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.alloc_shape_heap` | `(size)` or `(%vm, size)` | a zeroed `int64` tensor of `size` slots |
//! | `vm.builtin.shape_of` | `(tensor)` | its shape |
//! | `vm.builtin.store_shape` | `(shape, heap, idx...)` | null; `heap[idx_i] = shape[i]` |
//! | `vm.builtin.load_shape` | `(heap, idx...)` | the shape `(heap[idx_0], ...)` |
//! | `vm.builtin.match_shape` | `(value, heap, ndim, (code, v)*ndim, err_ctx)` | null |
//! | `vm.builtin.make_shape` | `(heap, ndim, (code, v)*ndim)` | a shape |
//! | `vm.builtin.match_prim_value` | `(value, heap, code, v, err_ctx)` | null |
//! | `vm.builtin.make_prim_value` | `(heap, code, v)` | an int |
//! | `vm.builtin.tensor_to_shape` | `(tensor)` | the shape held by a 1-D integer tensor |
//!
//! Match codes (TVM's `MatchShapeCode`): 0 the dimension must equal the immediate `v`; 1 store
//! the dimension in `heap[v]`; 2 no-op; 3 the dimension must equal `heap[v]`. Make codes
//! (`MakeShapeCode`): 0 the immediate `v`; 1 `heap[v]`. The heap may be null when no code
//! touches it. A mismatch is a value error that starts with `err_ctx`.
//!
//! `match_shape` and `make_shape` read all their pairs before they apply any (a pair that is
//! not two ints is reported before the mismatch of an earlier one, and nothing is stored). A
//! call whose `ndim`, pairs and `err_ctx` are fixed operands (as TVM emits them) is specialised
//! when it is loaded: the pairs become steps once, and a shape of immediates only is made once
//! (see `site.rs`).

use crate::args::{self, in_builtin, type_err, value_err};
use crate::table::{builtin, Builtin};
use crate::tensor_ops::num::Num;
use heap::{Heap, Slots};
use relaxvm::storage::Storage;
use relaxvm::{dispatch_dtype, CallCtx, DataType, Device, Error, PackedFunc, Result, Selected, Shape, Tensor, Value};
use smallvec::SmallVec;
use std::sync::atomic::Ordering;

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.alloc_shape_heap", ctx alloc_shape_heap).specialized(specialize_alloc_shape_heap),
    builtin!("vm.builtin.shape_of", select shape_of).constant_time(),
    builtin!("vm.builtin.store_shape", store_shape).constant_time(),
    builtin!("vm.builtin.load_shape", load_shape).constant_time(),
    builtin!("vm.builtin.match_shape", match_shape).constant_time().specialized(site::specialize_match_shape),
    builtin!("vm.builtin.make_shape", ctx make_shape).constant_time().specialized(site::specialize_make_shape),
    builtin!("vm.builtin.match_prim_value", match_prim_value).constant_time(),
    builtin!("vm.builtin.make_prim_value", make_prim_value).constant_time(),
    builtin!("vm.builtin.tensor_to_shape", tensor_to_shape),
];

/// The size of `alloc_shape_heap(size)` or `alloc_shape_heap(%vm, size)`, checked.
fn heap_size(name: &'static str, args: &[Value]) -> Result<i64> {
    args::arity_range(name, args, 1, 2)?;
    if args.len() == 2 {
        args::vm_state(name, args, 0)?;
    }
    let i = args.len() - 1;
    let size = match &args[i] {
        Value::Shape(s) if s.len() == 1 => s[0],
        Value::Int(n) => *n,
        other => return Err(type_err(name, i, "heap size", "int or one-element shape", other)),
    };
    if size < 0 {
        return Err(value_err(name, format!("the heap size must be non-negative, found {size}")));
    }
    Ok(size)
}

/// `alloc_shape_heap(size)` or `alloc_shape_heap(%vm, size)`: a zeroed int64 tensor.
fn alloc_shape_heap(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    make_heap(name, ctx, heap_size(name, args)?)
}

/// `alloc_shape_heap` specialised to a call whose operands are all fixed (as TVM emits it):
/// they are checked here, once, and the site hands out its last heap again (zeroed) when nothing
/// holds it any more (see [`crate::site_alloc`]).
fn specialize_alloc_shape_heap(name: &'static str, fixed: &[Option<&Value>]) -> Option<PackedFunc> {
    let size = heap_size(name, &args::fixed_from(fixed, 0)?).ok()?;
    Some(PackedFunc::new(name, move |ctx, _| make_heap(name, ctx, size)).reading_first(0))
}

/// A zeroed heap of `size` slots, from the call site's cache when it has one.
fn make_heap(name: &str, ctx: &mut CallCtx<'_>, size: i64) -> Result<Value> {
    let device = ctx.device();
    let heap = own_heap(ctx.pool_cache(), size, device).map_err(|e| in_builtin(name, e))?;
    Ok(Value::Tensor(heap))
}

/// A zeroed heap of `size` slots on `device` in word storage of its own
/// ([`Storage::alloc_words`]): the site's last one when that (and its storage) is free and the
/// same, else a new one, which becomes the site's last (the rule `site_alloc::own_tensor` keeps
/// for tensors, with word storage).
fn own_heap(cache: Option<&mut Value>, size: i64, device: Device) -> Result<Tensor> {
    let new = || {
        // `size` was checked non-negative (`heap_size`); one beyond `usize` fails to allocate.
        let words = usize::try_from(size).unwrap_or(usize::MAX);
        Tensor::from_parts(Storage::alloc_words(words, device)?, 0, Shape::interned(&[size]), None, DataType::I64)
    };
    let Some(cache) = cache else { return new() };
    if let Value::Tensor(t) = cache {
        let s = t.storage();
        let same = t.dtype() == DataType::I64 && t.shape().has_dims(&[size]) && s.device() == device;
        if same && t.is_sole() && s.is_sole() {
            let cleared = match s.words_for_write() {
                Ok(Some(words)) => {
                    words.iter().for_each(|w| w.store(0, Ordering::Relaxed));
                    true
                }
                // A heap too large for word storage.
                Ok(None) => s.write_with(|b| b.fill(0)).is_ok(),
                Err(_) => false,
            };
            if cleared {
                return Ok(t.clone());
            }
        }
    }
    let t = new()?;
    *cache = Value::Tensor(t.clone());
    Ok(t)
}

/// `shape_of(tensor)`: the tensor's shape, lent by reference: the interpreter clones it only
/// when the destination does not hold it already (a selecting builtin, like `vm.builtin.copy`).
fn shape_of<'a>(name: &str, args: &'a [Value]) -> Result<Selected<'a>> {
    args::arity(name, args, 1)?;
    Ok(Selected::Shape(args::tensor(name, args, 0, "tensor")?.shape()))
}

/// `store_shape(shape, heap, idx_0, ..., idx_{n-1})`: `heap[idx_i] = shape[i]`.
fn store_shape(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 2)?;
    let shape = args::shape(name, args, 0, "shape")?;
    let heap = Heap::arg(name, args, 1)?;
    if args.len() - 2 != shape.len() {
        return Err(value_err(
            name,
            format!(
                "expected one heap index per dimension of shape {shape} ({}), found {}",
                shape.len(),
                args.len() - 2
            ),
        ));
    }
    let idxs =
        (2..args.len()).map(|k| args::int(name, args, k, "heap index")).collect::<Result<SmallVec<[i64; 8]>>>()?;
    heap.with_slots(true, |slots| shape.iter().zip(&idxs).try_for_each(|(dim, &idx)| slots.store(idx, *dim)))?;
    Ok(Value::Null)
}

/// `load_shape(heap, idx...)`: the shape `(heap[idx_0], heap[idx_1], ...)`.
fn load_shape(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 1)?;
    let heap = Heap::arg(name, args, 0)?;
    let idxs =
        (1..args.len()).map(|k| args::int(name, args, k, "heap index")).collect::<Result<SmallVec<[i64; 8]>>>()?;
    let dims = heap.with_slots(false, |slots| idxs.iter().map(|&idx| slots.load(idx)).collect::<Result<Shape>>())?;
    Ok(Value::Shape(dims))
}

/// The number of `(code, value)` pairs a call announces, checked against the argument count
/// (`fixed` arguments before the pairs, plus `trailing_max` optional ones after).
#[inline(always)]
fn pair_count(name: &str, args: &[Value], ndim_at: usize, trailing_max: usize) -> Result<usize> {
    let ndim = args::int(name, args, ndim_at, "ndim")?;
    let pairs = usize::try_from(ndim)
        .ok()
        .filter(|n| n.checked_mul(2).is_some_and(|p| p <= args.len()))
        .ok_or_else(|| bad_ndim(name, ndim, args.len()))?;
    let min = ndim_at + 1 + 2 * pairs;
    if args.len() < min || args.len() > min + trailing_max {
        return Err(bad_pair_arity(name, min, trailing_max, pairs, args.len()));
    }
    Ok(pairs)
}

#[cold]
fn bad_ndim(name: &str, ndim: i64, nargs: usize) -> Error {
    value_err(
        name,
        format!("ndim must be a non-negative count of (code, value) pairs that were passed, found {ndim} with {nargs} arguments"),
    )
}

#[cold]
fn bad_pair_arity(name: &str, min: usize, trailing_max: usize, pairs: usize, nargs: usize) -> Error {
    let expected = if trailing_max == 0 { min.to_string() } else { format!("{min} to {}", min + trailing_max) };
    Error::arity(name, format!("{expected} (ndim = {pairs})"), nargs)
}

/// What a match code is applied to, named in mismatch errors (formatted only on error).
#[derive(Clone, Copy)]
enum Subject {
    /// Dimension `i` of a shape.
    Dim(usize),
    /// A primitive value.
    Value,
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Dim(i) => write!(f, "shape[{i}]"),
            Subject::Value => f.write_str("PrimValue"),
        }
    }
}

/// Applies one match code to a runtime dimension `actual`.
#[inline]
fn match_one(
    name: &'static str,
    slots: &mut Slots<'_, '_>,
    code: i64,
    v: i64,
    actual: i64,
    err_ctx: Option<&str>,
    what: Subject,
) -> Result<()> {
    match code {
        0 if actual == v => Ok(()),
        1 => slots.store(v, actual),
        2 => Ok(()),
        3 => {
            let expected = slots.load(v)?;
            if expected == actual {
                Ok(())
            } else {
                Err(heap_mismatch(name, err_ctx, what, actual, expected, v))
            }
        }
        0 => Err(constant_mismatch(name, err_ctx, what, actual, v)),
        other => Err(unknown_match_code(name, other)),
    }
}

#[cold]
fn constant_mismatch(name: &str, err_ctx: Option<&str>, what: Subject, actual: i64, v: i64) -> Error {
    value_err(
        name,
        format!(
            "{}match_cast error,  {what} mismatch to specified constant. ({actual} vs. {v})",
            args::ctx_lead(err_ctx)
        ),
    )
}

#[cold]
fn heap_mismatch(name: &str, err_ctx: Option<&str>, what: Subject, actual: i64, expected: i64, v: i64) -> Error {
    value_err(
        name,
        format!(
            "{}match_cast error,  {what} mismatch to a previous populated value. ({actual} vs. {expected}, shape heap slot {v})",
            args::ctx_lead(err_ctx)
        ),
    )
}

#[cold]
fn unknown_match_code(name: &str, code: i64) -> Error {
    value_err(name, format!("unknown match code {code}: expected 0 (assert equal to immediate), 1 (store to heap), 2 (no-op) or 3 (assert equal to heap slot)"))
}

#[cold]
fn unknown_make_code(name: &str, code: i64) -> Error {
    value_err(name, format!("unknown make code {code}: expected 0 (immediate) or 1 (load from heap)"))
}

#[cold]
fn ndim_mismatch(name: &str, err_ctx: Option<&str>, pairs: usize, dims: &[i64]) -> Error {
    value_err(
        name,
        format!(
            "{}match_cast shape size mismatch. (expected {pairs} dimensions, found {} in shape {})",
            args::ctx_lead(err_ctx),
            dims.len(),
            Shape::from(dims)
        ),
    )
}

/// The `(code, value)` pairs of a `match_shape` or `make_shape` call.
type Pairs = SmallVec<[(i64, i64); 4]>;

/// Reads `n` `(code, value)` pairs from `args[first..]`, naming them `what` in errors.
fn parse_pairs(name: &str, args: &[Value], first: usize, n: usize, what: [&str; 2]) -> Result<Pairs> {
    (0..n)
        .map(|i| {
            Ok((args::int(name, args, first + 2 * i, what[0])?, args::int(name, args, first + 1 + 2 * i, what[1])?))
        })
        .collect()
}

/// What `match_shape` reads of its operands from `ndim` on: the pairs and the error context.
struct MatchPlan<'a> {
    pairs: Pairs,
    /// Whether a pair stores into the heap (code 1): the heap is then taken for writing.
    stores: bool,
    err_ctx: Option<&'a str>,
}

impl<'a> MatchPlan<'a> {
    fn parse(name: &str, args: &'a [Value]) -> Result<Self> {
        args::arity_at_least(name, args, 3)?;
        let n = pair_count(name, args, 2, 1)?;
        let err_ctx = args::opt_str(name, args, 3 + 2 * n, "err_ctx")?;
        let pairs = parse_pairs(name, args, 3, n, ["match code", "match value"])?;
        let stores = pairs.iter().any(|&(code, _)| code == 1);
        Ok(MatchPlan { pairs, stores, err_ctx })
    }
}

/// `match_shape(value, heap, ndim, (code, v)*ndim, err_ctx)`: checks and records the dimensions
/// of a tensor or shape.
fn match_shape(name: &'static str, args: &[Value]) -> Result<Value> {
    let plan = MatchPlan::parse(name, args)?;
    apply_match(name, args, &plan.pairs, plan.stores, plan.err_ctx)
}

/// The work of `match_shape` once its pairs are parsed (`stores`: whether one stores).
fn apply_match(
    name: &'static str,
    args: &[Value],
    pairs: &[(i64, i64)],
    stores: bool,
    err_ctx: Option<&str>,
) -> Result<Value> {
    let dims: &[i64] = match &args[0] {
        Value::Tensor(t) => t.shape(),
        Value::Shape(s) => s,
        other => return Err(type_err(name, 0, "value", "tensor or shape", other)),
    };
    let heap = Heap::arg(name, args, 1)?;
    if dims.len() != pairs.len() {
        return Err(ndim_mismatch(name, err_ctx, pairs.len(), dims));
    }
    heap.with_slots(stores, |slots| {
        for (i, (actual, &(code, v))) in dims.iter().zip(pairs).enumerate() {
            match_one(name, slots, code, v, *actual, err_ctx, Subject::Dim(i))?;
        }
        Ok(Value::Null)
    })
}

/// Applies one make code.
#[inline]
fn make_one(name: &'static str, slots: &Slots<'_, '_>, code: i64, v: i64) -> Result<i64> {
    match code {
        0 => Ok(v),
        1 => slots.load(v),
        other => Err(unknown_make_code(name, other)),
    }
}

/// What `make_shape` reads of its operands from `ndim` on: the pairs.
fn make_pairs(name: &str, args: &[Value]) -> Result<Pairs> {
    args::arity_at_least(name, args, 2)?;
    let n = pair_count(name, args, 1, 0)?;
    parse_pairs(name, args, 2, n, ["make code", "make value"])
}

/// `make_shape(heap, ndim, (code, v)*ndim)`: a shape of immediates and heap slots. The call
/// site's cache, when it has one (a compiled-mode model's native call sites each have theirs),
/// keeps the shape made last, handed out again while the dimensions stay the same.
fn make_shape(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    build_shape(name, args, &make_pairs(name, args)?, ctx.site_cache())
}

/// The most dimensions a shape is built in place for (on the stack): more than any model's.
const INLINE_RANK: usize = 8;

/// The work of `make_shape` once its pairs are parsed; `last` is the call site's cache, when it
/// has one: the shape it holds is reused when its dimensions are the same, else the new one
/// ([`Shape::interned`]) replaces it.
fn build_shape(name: &'static str, args: &[Value], pairs: &[(i64, i64)], last: Option<&mut Value>) -> Result<Value> {
    let heap = Heap::arg(name, args, 0)?;
    let (mut inline, mut long) = ([0i64; INLINE_RANK], Vec::new());
    let dims: &mut [i64] = if pairs.len() <= INLINE_RANK {
        &mut inline[..pairs.len()]
    } else {
        long.resize(pairs.len(), 0);
        &mut long
    };
    heap.with_slots(false, |slots| {
        for (d, &(code, v)) in dims.iter_mut().zip(pairs) {
            *d = make_one(name, slots, code, v)?;
        }
        Ok(())
    })?;
    Ok(site::recent_or_last(dims, last))
}

/// `match_prim_value(value, heap, code, v, err_ctx)`: `match_shape` for one integer.
fn match_prim_value(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 4, 5)?;
    let value = args::int(name, args, 0, "value")?;
    let heap = Heap::arg(name, args, 1)?;
    let code = args::int(name, args, 2, "match code")?;
    let v = args::int(name, args, 3, "match value")?;
    let err_ctx = args::opt_str(name, args, 4, "err_ctx")?;
    heap.with_slots(code == 1, |slots| match_one(name, slots, code, v, value, err_ctx, Subject::Value))?;
    Ok(Value::Null)
}

/// `make_prim_value(heap, code, v)`: an immediate or a heap slot, as an int.
fn make_prim_value(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let heap = Heap::arg(name, args, 0)?;
    let code = args::int(name, args, 1, "make code")?;
    let v = args::int(name, args, 2, "make value")?;
    Ok(Value::Int(heap.with_slots(false, |slots| make_one(name, slots, code, v))?))
}

/// `tensor_to_shape(tensor)`: the dimensions held by a 1-D integer tensor.
fn tensor_to_shape(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    let t = args::tensor(name, args, 0, "tensor")?;
    let integral = !t.dtype().is_float() && t.dtype() != DataType::Bool;
    if t.ndim() != 1 || !integral {
        return Err(value_err(
            name,
            format!("expected a 1-D integer tensor, found {}", Value::Tensor(t.clone()).describe()),
        ));
    }
    let dims = dispatch_dtype!(t.dtype(), T => to_i64s::<T>(name, t)?);
    Ok(Value::Shape(dims.into()))
}

/// The elements of an integer tensor as `i64`, failing for values beyond `i64` (`uint64`).
fn to_i64s<T: Num>(name: &str, t: &Tensor) -> Result<Vec<i64>> {
    let view = args::view::<T>(name, t)?;
    view.iter()
        .map(|x| x.to_int().ok_or_else(|| value_err(name, format!("dimension {x} does not fit in int64"))))
        .collect()
}

mod heap;
mod site;
#[cfg(test)]
mod tests;
