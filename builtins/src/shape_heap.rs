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

use crate::args::{self, in_builtin, type_err, value_err};
use crate::table::{builtin, Builtin};
use crate::tensor_ops::num::Num;
use relaxvm::{dispatch_dtype, CallCtx, DataType, Error, Result, Shape, Storage, Tensor, Value};
use smallvec::SmallVec;

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.alloc_shape_heap", ctx alloc_shape_heap),
    builtin!("vm.builtin.shape_of", select shape_of).constant_time(),
    builtin!("vm.builtin.store_shape", store_shape).constant_time(),
    builtin!("vm.builtin.load_shape", load_shape).constant_time(),
    builtin!("vm.builtin.match_shape", match_shape).constant_time(),
    builtin!("vm.builtin.make_shape", make_shape).constant_time(),
    builtin!("vm.builtin.match_prim_value", match_prim_value).constant_time(),
    builtin!("vm.builtin.make_prim_value", make_prim_value).constant_time(),
    builtin!("vm.builtin.tensor_to_shape", tensor_to_shape),
];

/// A shape heap argument: a 1-D `int64` tensor, or null when the program has none. Its length
/// and stride are read once per call, not once per slot.
struct Heap<'a> {
    name: &'static str,
    tensor: Option<&'a Tensor>,
    /// The number of slots.
    len: usize,
    /// The slot stride in elements (`None` when it does not fit `usize`: every slot is then out
    /// of range, as before).
    stride: Option<usize>,
}

impl<'a> Heap<'a> {
    /// Argument `i` of `args` as a heap.
    #[inline(always)]
    fn arg(name: &'static str, args: &'a [Value], i: usize) -> Result<Self> {
        match args.get(i) {
            Some(Value::Null) => Ok(Heap { name, tensor: None, len: 0, stride: None }),
            Some(Value::Tensor(t)) if t.dtype() == DataType::I64 && t.ndim() == 1 => {
                let stride = usize::try_from(t.stride(0)).ok();
                Ok(Heap { name, tensor: Some(t), len: t.numel(), stride })
            }
            _ => Err(Self::bad_arg(name, args, i)),
        }
    }

    #[cold]
    fn bad_arg(name: &str, args: &[Value], i: usize) -> Error {
        match args.get(i) {
            Some(other) => type_err(name, i, "shape heap", "1-D int64 tensor or null", other),
            None => Error::arity(name, format!("at least {}", i + 1), args.len()),
        }
    }

    /// The heap tensor, or the error for a slot access without one.
    #[inline]
    fn tensor(&self, idx: i64) -> Result<&'a Tensor> {
        self.tensor.ok_or_else(|| self.no_heap(idx))
    }

    #[cold]
    fn no_heap(&self, idx: i64) -> Error {
        value_err(self.name, format!("reading or writing slot {idx} needs a shape heap, found null"))
    }

    #[cold]
    fn out_of_range(&self, idx: i64) -> Error {
        Error::index(format!("shape heap (in {})", self.name), idx, self.len)
    }

    /// The byte offset of slot `idx` in the heap's storage.
    #[inline]
    fn slot(&self, t: &Tensor, idx: i64) -> Result<usize> {
        usize::try_from(idx)
            .ok()
            .filter(|i| *i < self.len)
            .and_then(|i| i.checked_mul(self.stride?))
            .and_then(|e| e.checked_mul(8))
            .and_then(|b| b.checked_add(t.byte_offset()))
            .ok_or_else(|| self.out_of_range(idx))
    }

    /// `heap[idx]`, read from `bytes`, the heap storage's bytes.
    #[inline]
    fn load_from(&self, t: &Tensor, bytes: &[u8], idx: i64) -> Result<i64> {
        let offset = self.slot(t, idx)?;
        bytes
            .get(offset..)
            .and_then(|b| b.first_chunk::<8>())
            .map(|b| i64::from_ne_bytes(*b))
            .ok_or_else(|| Error::index(format!("shape heap storage (in {})", self.name), idx, self.len))
    }

    /// `heap[idx]`.
    fn load(&self, idx: i64) -> Result<i64> {
        let t = self.tensor(idx)?;
        self.load_from(t, &t.storage().bytes(), idx)
    }

    /// `heap[idx] = value`.
    #[inline]
    fn store(&self, idx: i64, value: i64) -> Result<()> {
        let t = self.tensor(idx)?;
        let offset = self.slot(t, idx)?;
        t.storage().write(offset, &value.to_ne_bytes()).map_err(|e| in_builtin(self.name, e))
    }
}

/// `alloc_shape_heap(size)` or `alloc_shape_heap(%vm, size)`: a zeroed int64 tensor.
fn alloc_shape_heap(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
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
    let storage = Storage::alloc_checked(i128::from(size) * 8, ctx.device()).map_err(|e| in_builtin(name, e))?;
    let heap =
        Tensor::from_parts(storage, 0, Shape::from([size]), None, DataType::I64).map_err(|e| in_builtin(name, e))?;
    Ok(Value::Tensor(heap))
}

/// `shape_of(tensor)`: the tensor's shape, lent by reference: the interpreter clones it only
/// when the destination does not hold it already (a selecting builtin, like `vm.builtin.copy`).
fn shape_of<'a>(name: &str, args: &'a [Value]) -> Result<&'a Value> {
    args::arity(name, args, 1)?;
    Ok(args::tensor(name, args, 0, "tensor")?.shape_value())
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
    for (k, dim) in shape.iter().enumerate() {
        let idx = args::int(name, args, k + 2, "heap index")?;
        heap.store(idx, *dim)?;
    }
    Ok(Value::Null)
}

/// `load_shape(heap, idx...)`: the shape `(heap[idx_0], heap[idx_1], ...)`.
fn load_shape(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 1)?;
    let heap = Heap::arg(name, args, 0)?;
    let dims =
        (1..args.len()).map(|k| heap.load(args::int(name, args, k, "heap index")?)).collect::<Result<Shape>>()?;
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
    heap: &Heap<'_>,
    code: i64,
    v: i64,
    actual: i64,
    err_ctx: Option<&str>,
    what: Subject,
) -> Result<()> {
    match code {
        0 if actual == v => Ok(()),
        1 => heap.store(v, actual),
        2 => Ok(()),
        3 => {
            let expected = heap.load(v)?;
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

/// `match_shape(value, heap, ndim, (code, v)*ndim, err_ctx)`: checks and records the dimensions
/// of a tensor or shape.
fn match_shape(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 3)?;
    let pairs = pair_count(name, args, 2, 1)?;
    let err_ctx = args::opt_str(name, args, 3 + 2 * pairs, "err_ctx")?;
    let dims: &[i64] = match &args[0] {
        Value::Tensor(t) => t.shape(),
        Value::Shape(s) => s,
        other => return Err(type_err(name, 0, "value", "tensor or shape", other)),
    };
    let heap = Heap::arg(name, args, 1)?;
    if dims.len() != pairs {
        return Err(ndim_mismatch(name, err_ctx, pairs, dims));
    }
    for (i, actual) in dims.iter().enumerate() {
        let code = args::int(name, args, 3 + 2 * i, "match code")?;
        let v = args::int(name, args, 4 + 2 * i, "match value")?;
        match_one(name, &heap, code, v, *actual, err_ctx, Subject::Dim(i))?;
    }
    Ok(Value::Null)
}

/// Applies one make code.
fn make_one(name: &'static str, heap: &Heap<'_>, code: i64, v: i64) -> Result<i64> {
    match code {
        0 => Ok(v),
        1 => heap.load(v),
        other => Err(unknown_make_code(name, other)),
    }
}

/// `make_shape(heap, ndim, (code, v)*ndim)`: a shape of immediates and heap slots.
fn make_shape(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 2)?;
    let pairs = pair_count(name, args, 1, 0)?;
    let heap = Heap::arg(name, args, 0)?;
    // One read of the heap's bytes serves every slot: the reader count is taken once per call.
    let read = heap.tensor.map(|t| (t, t.storage().bytes()));
    let mut dims: SmallVec<[i64; 8]> = SmallVec::new();
    for i in 0..pairs {
        let code = args::int(name, args, 2 + 2 * i, "make code")?;
        let v = args::int(name, args, 3 + 2 * i, "make value")?;
        dims.push(match (code, &read) {
            (0, _) => v,
            (1, Some((t, bytes))) => heap.load_from(t, bytes, v)?,
            (1, None) => return Err(heap.no_heap(v)),
            (other, _) => return Err(unknown_make_code(name, other)),
        });
    }
    Ok(Value::Shape(recent::shape_of_dims(&dims)))
}

/// The shapes `make_shape` made last on this thread, handed out again for equal dimensions.
///
/// Shapes are immutable values, so a result equal to a recent one can be that one, shared (a
/// reference count, instead of an allocation and a later free): nothing can tell the two apart
/// but identity, which only lets the interpreter skip writes of a value already in place.
/// Compiled programs make the same few shapes at every call (the sizes of their allocations).
mod recent {
    use relaxvm::Shape;
    use std::cell::RefCell;

    /// How many shapes are kept (a compiled model makes a handful of distinct ones per call).
    const SLOTS: usize = 4;

    /// The largest rank kept: longer shapes are rare and costlier to compare.
    const MAX_RANK: usize = 6;

    thread_local! {
        /// Recent shapes, and the slot the next new one replaces (round robin).
        static RECENT: RefCell<([Option<Shape>; SLOTS], usize)> = const { RefCell::new(([const { None }; SLOTS], 0)) };
    }

    /// A shape of `dims`: a recent equal one when there is one, else a new one, remembered.
    pub(super) fn shape_of_dims(dims: &[i64]) -> Shape {
        if dims.len() > MAX_RANK {
            return Shape::from(dims);
        }
        // `try_with` fails only while the thread is being torn down: then make a new shape.
        RECENT
            .try_with(|r| {
                let mut r = r.borrow_mut();
                let (slots, next) = &mut *r;
                if let Some(s) = slots.iter().flatten().find(|s| s.dims() == dims) {
                    return s.clone();
                }
                let s = Shape::from(dims);
                slots[*next] = Some(s.clone());
                *next = (*next + 1) % SLOTS;
                s
            })
            .unwrap_or_else(|_| Shape::from(dims))
    }
}

/// `match_prim_value(value, heap, code, v, err_ctx)`: `match_shape` for one integer.
fn match_prim_value(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 4, 5)?;
    let value = args::int(name, args, 0, "value")?;
    let heap = Heap::arg(name, args, 1)?;
    let code = args::int(name, args, 2, "match code")?;
    let v = args::int(name, args, 3, "match value")?;
    let err_ctx = args::opt_str(name, args, 4, "err_ctx")?;
    match_one(name, &heap, code, v, value, err_ctx, Subject::Value)?;
    Ok(Value::Null)
}

/// `make_prim_value(heap, code, v)`: an immediate or a heap slot, as an int.
fn make_prim_value(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let heap = Heap::arg(name, args, 0)?;
    let code = args::int(name, args, 1, "make code")?;
    Ok(Value::Int(make_one(name, &heap, code, args::int(name, args, 2, "make value")?)?))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &[Value]) -> Result<Value> {
        crate::table::call(BUILTINS, name, args)
    }

    fn heap(n: i64) -> Value {
        call("vm.builtin.alloc_shape_heap", &[Value::Int(n)]).unwrap()
    }

    #[test]
    fn design_doc_store_and_load() {
        let h = heap(2);
        let x = Value::Tensor(Tensor::zeros([32, 16], DataType::F32, Default::default()).unwrap());
        let s = call("vm.builtin.shape_of", &[x]).unwrap();
        call("vm.builtin.store_shape", &[s, h.clone(), Value::Int(0), Value::Int(1)]).unwrap();
        let out = call("vm.builtin.load_shape", &[h.clone(), Value::Int(1), Value::Int(0)]).unwrap();
        assert_eq!(out.as_shape().unwrap().dims(), &[16, 32]);
        let with_vm = call("vm.builtin.alloc_shape_heap", &[Value::VmState, Value::Int(3)]).unwrap();
        assert_eq!(with_vm.as_tensor().unwrap().shape().dims(), &[3]);
    }

    #[test]
    fn shape_of_lends_the_tensors_own_shape() {
        let t = Tensor::zeros([32, 16], DataType::F32, Default::default()).unwrap();
        let s = call("vm.builtin.shape_of", &[Value::Tensor(t.clone())]).unwrap();
        // No new shape object: the result is the tensor's, so the interpreter can skip writing
        // it into a register that holds it already.
        assert!(s.same_object(t.shape_value()) && s.as_shape().unwrap().ptr_eq(t.shape()));
        assert_eq!(
            format!("{:?}", call("vm.builtin.shape_of", &[Value::Int(1)]).expect_err("an error")),
            r#"Type { expected: "tensor as argument 0 (tensor) of vm.builtin.shape_of", found: "int 1" }"#
        );
    }

    #[test]
    fn make_shape_reads_every_slot_under_one_read() {
        let h = heap(3);
        call("vm.builtin.store_shape", &[Value::Shape([5, 6, 7].into()), h.clone(), 0.into(), 1.into(), 2.into()])
            .unwrap();
        let args =
            [h.clone(), 4.into(), 1.into(), 2.into(), 0.into(), 9.into(), 1.into(), 0.into(), 1.into(), 2.into()];
        assert_eq!(call("vm.builtin.make_shape", &args).unwrap().as_shape().unwrap().dims(), &[7, 9, 5, 7]);
        let e = call("vm.builtin.make_shape", &[h.clone(), 2.into(), 1.into(), 0.into(), 1.into(), 3.into()])
            .expect_err("an error");
        assert_eq!(format!("{e:?}"), r#"Index { what: "shape heap (in vm.builtin.make_shape)", index: 3, len: 3 }"#);
        // The read ended with the call: the heap is writable again.
        call("vm.builtin.store_shape", &[Value::Shape([1].into()), h, 0.into()]).unwrap();
    }

    #[test]
    fn make_shape_shares_a_recent_equal_shape() {
        let make = |dims: &[i64]| {
            let mut args = vec![Value::Null, Value::Int(dims.len() as i64)];
            for d in dims {
                args.extend([Value::Int(0), Value::Int(*d)]);
            }
            call("vm.builtin.make_shape", &args).unwrap().as_shape().unwrap().clone()
        };
        let a = make(&[1, 32]);
        let b = make(&[1, 32]);
        assert!(a.ptr_eq(&b), "an equal recent shape is shared");
        let c = make(&[32, 1]);
        assert!(!c.ptr_eq(&a) && c.dims() == [32, 1]);
        // Once enough other shapes were made, the first is forgotten: equal, not shared.
        for n in 0..8 {
            make(&[n]);
        }
        let d = make(&[1, 32]);
        assert!(!d.ptr_eq(&a) && d == a);
        let long = [1, 2, 3, 4, 5, 6, 7];
        assert!(!make(&long).ptr_eq(&make(&long)), "long shapes are not kept");
        assert_eq!(make(&[]).dims(), &[] as &[i64]);
    }

    #[test]
    fn match_and_make() {
        let h = heap(4);
        let s = Value::Shape([8, 4, 9].into());
        let args = [
            s.clone(),
            h.clone(),
            Value::Int(3),
            0.into(),
            8.into(),
            1.into(),
            2.into(),
            2.into(),
            0.into(),
            Value::str("ctx"),
        ];
        call("vm.builtin.match_shape", &args).unwrap();
        assert_eq!(call("vm.builtin.make_prim_value", &[h.clone(), 1.into(), 2.into()]).unwrap().as_int().unwrap(), 4);
        let again = [
            s.clone(),
            h.clone(),
            Value::Int(3),
            2.into(),
            0.into(),
            3.into(),
            2.into(),
            2.into(),
            0.into(),
            Value::Null,
        ];
        call("vm.builtin.match_shape", &again).unwrap();
        let bad = [
            Value::Shape([8, 5, 9].into()),
            h.clone(),
            Value::Int(3),
            2.into(),
            0.into(),
            3.into(),
            2.into(),
            2.into(),
            0.into(),
            Value::str("my_fn"),
        ];
        let e = call("vm.builtin.match_shape", &bad).unwrap_err().to_string();
        assert!(
            e.contains("my_fn match_cast error,  shape[1] mismatch to a previous populated value. (5 vs. 4"),
            "{e}"
        );
        let made =
            call("vm.builtin.make_shape", &[h.clone(), 2.into(), 1.into(), 2.into(), 0.into(), 7.into()]).unwrap();
        assert_eq!(made.as_shape().unwrap().dims(), &[4, 7]);
        let immediate_only = call("vm.builtin.make_shape", &[Value::Null, 1.into(), 0.into(), 5.into()]).unwrap();
        assert_eq!(immediate_only.as_shape().unwrap().dims(), &[5]);
    }

    #[test]
    fn match_errors() {
        let h = heap(1);
        let t = Value::Tensor(Tensor::zeros([2], DataType::F32, Default::default()).unwrap());
        let e = call("vm.builtin.match_shape", &[t.clone(), h.clone(), 1.into(), 0.into(), 3.into(), Value::str("c")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("c match_cast error,  shape[0] mismatch to specified constant. (2 vs. 3)"), "{e}");
        let e = call(
            "vm.builtin.match_shape",
            &[t.clone(), h.clone(), 2.into(), 0.into(), 2.into(), 0.into(), 1.into(), Value::Null],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("match_cast shape size mismatch. (expected 2 dimensions, found 1"), "{e}");
        let e = call("vm.builtin.match_shape", &[t.clone(), h.clone(), 1.into(), 9.into(), 0.into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown match code 9"), "{e}");
        let e = call("vm.builtin.match_shape", &[t.clone(), h.clone(), 1.into(), 1.into(), 5.into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("index 5 out of range") && e.contains("match_shape"), "{e}");
        let e = call("vm.builtin.match_shape", &[t.clone(), Value::Null, 1.into(), 1.into(), 0.into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a shape heap, found null"), "{e}");
        for ndim in [-1, i64::MAX, 5] {
            assert!(format!(
                "{:?}",
                call("vm.builtin.match_shape", &[t.clone(), h.clone(), ndim.into(), 0.into(), 2.into()])
                    .expect_err("an error")
            )
            .starts_with(r#"Value("#));
        }
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.match_shape", &[Value::Int(1), h.clone(), 0.into()]).expect_err("an error")
            ),
            r#"Type { expected: "tensor or shape as argument 0 (value) of vm.builtin.match_shape", found: "int 1" }"#
        );
        call("vm.builtin.match_prim_value", &[5.into(), h.clone(), 1.into(), 0.into(), Value::Null]).unwrap();
        call("vm.builtin.match_prim_value", &[5.into(), h.clone(), 3.into(), 0.into()]).unwrap();
        let e = call("vm.builtin.match_prim_value", &[6.into(), h.clone(), 3.into(), 0.into(), Value::str("pv")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("pv match_cast error,  PrimValue mismatch to a previous populated value. (6 vs. 5"), "{e}");
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.make_prim_value", &[h.clone(), 2.into(), 0.into()]).expect_err("an error")
            ),
            r#"Value("vm.builtin.make_prim_value: unknown make code 2: expected 0 (immediate) or 1 (load from heap)")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.make_prim_value", &[Value::Null, 1.into(), 0.into()]).expect_err("an error")
            ),
            r#"Value("vm.builtin.make_prim_value: reading or writing slot 0 needs a shape heap, found null")"#
        );
    }

    #[test]
    fn heap_errors() {
        let h = heap(2);
        assert_eq!(
            format!("{:?}", call("vm.builtin.alloc_shape_heap", &[Value::Int(-1)]).expect_err("an error")),
            r#"Value("vm.builtin.alloc_shape_heap: the heap size must be non-negative, found -1")"#
        );
        let e = call("vm.builtin.alloc_shape_heap", &[Value::Int(i64::MAX)]).unwrap_err().to_string();
        assert!(e.contains("cannot allocate") && e.contains("alloc_shape_heap"), "{e}");
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.alloc_shape_heap", &[Value::Int(1), Value::Int(1)]).expect_err("an error")
            ),
            r#"Type { expected: "vm_state (%vm) or null as argument 0 (the VM state) of vm.builtin.alloc_shape_heap", found: "int 1" }"#
        );
        assert_eq!(
            call("vm.builtin.alloc_shape_heap", &[Value::Shape([0].into())]).unwrap().as_tensor().unwrap().numel(),
            0
        );
        let e = call("vm.builtin.load_shape", &[h.clone(), Value::Int(2)]).unwrap_err().to_string();
        assert!(e.contains("index 2 out of range for shape heap (in vm.builtin.load_shape) of length 2"), "{e}");
        assert_eq!(
            format!("{:?}", call("vm.builtin.load_shape", &[h.clone(), Value::Int(-1)]).expect_err("an error")),
            r#"Index { what: "shape heap (in vm.builtin.load_shape)", index: -1, len: 2 }"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.load_shape", &[h.clone(), Value::Int(i64::MIN)]).expect_err("an error")),
            r#"Index { what: "shape heap (in vm.builtin.load_shape)", index: -9223372036854775808, len: 2 }"#
        );
        let s = Value::Shape([1, 2].into());
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.store_shape", &[s.clone(), h.clone(), Value::Int(0)]).expect_err("an error")
            ),
            r#"Value("vm.builtin.store_shape: expected one heap index per dimension of shape (1, 2) (2), found 1")"#
        );
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.store_shape", &[s.clone(), h.clone(), 0.into(), 5.into()]).expect_err("an error")
            ),
            r#"Index { what: "shape heap (in vm.builtin.store_shape)", index: 5, len: 2 }"#
        );
        let f32_heap = Value::Tensor(Tensor::zeros([2], DataType::F32, Default::default()).unwrap());
        let e = call("vm.builtin.store_shape", &[s, f32_heap, 0.into(), 1.into()]).unwrap_err().to_string();
        assert!(e.contains("1-D int64 tensor") && e.contains("float32"), "{e}");
    }

    #[test]
    fn strided_heap_writes_the_right_slots() {
        let base = Tensor::from_vec([4], vec![0i64; 4]).unwrap();
        let strided = Tensor::from_parts(base.storage().clone(), 8, [2].into(), Some(vec![2]), DataType::I64).unwrap();
        call("vm.builtin.store_shape", &[Value::Shape([7, 9].into()), Value::Tensor(strided), 0.into(), 1.into()])
            .unwrap();
        assert_eq!(base.to_vec::<i64>().unwrap(), vec![0, 7, 0, 9]);
    }

    #[test]
    fn tensor_to_shape_converts_integer_tensors() {
        for t in [
            Tensor::from_vec([2], vec![3i32, 4]).unwrap(),
            Tensor::from_vec([2], vec![3u8, 4]).unwrap(),
            Tensor::from_vec([2], vec![3i64, 4]).unwrap(),
        ] {
            let s = call("vm.builtin.tensor_to_shape", &[Value::Tensor(t)]).unwrap();
            assert_eq!(s.as_shape().unwrap().dims(), &[3, 4]);
        }
        let big = Tensor::from_vec([1], vec![u64::MAX]).unwrap();
        assert_eq!(
            format!("{:?}", call("vm.builtin.tensor_to_shape", &[Value::Tensor(big)]).expect_err("an error")),
            r#"Value("vm.builtin.tensor_to_shape: dimension 18446744073709551615 does not fit in int64")"#
        );
        let exact = Tensor::from_vec([1], vec![i64::MAX]).unwrap();
        let s = call("vm.builtin.tensor_to_shape", &[Value::Tensor(exact)]).unwrap();
        assert_eq!(s.as_shape().unwrap().dims(), &[i64::MAX]);
        assert!(
            call("vm.builtin.tensor_to_shape", &[Value::Tensor(Tensor::from_vec([1], vec![1.0f32]).unwrap())]).is_err()
        );
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.tensor_to_shape", &[Value::Tensor(Tensor::scalar(1i64))]).expect_err("an error")
            ),
            r#"Value("vm.builtin.tensor_to_shape: expected a 1-D integer tensor, found tensor of shape () and dtype int64")"#
        );
    }
}
