//! Tensor operators with numpy's semantics.
//!
//! | builtin | arguments | numpy equivalent |
//! |---|---|---|
//! | `vm.op.add`, `vm.op.sub`, `vm.op.mul` | `(a, b)` | `a + b`, `a - b`, `a * b` |
//! | `vm.op.div` | `(a, b)` | `a / b` (true division: integers give `float64`) |
//! | `vm.op.maximum`, `vm.op.minimum` | `(a, b)` | `np.maximum`, `np.minimum` (NaN propagates) |
//! | `vm.op.neg` | `(a)` | `-a` |
//! | `vm.op.exp`, `vm.op.sqrt` | `(a)` | `np.exp`, `np.sqrt` |
//! | `vm.op.relu` | `(a)` | `np.maximum(a, 0)` (same dtype) |
//! | `vm.op.sum` | `(a, [axis, [keepdims]])` | `np.sum(a, axis, keepdims=keepdims)` |
//! | `vm.op.matmul` | `(a, b)` | `a @ b` |
//!
//! Operands are tensors or scalars: an int, float or bool [`Value`] acts as a Python scalar
//! (weak, numpy 2 / NEP 50), so `vm.op.add(int8_tensor, 10)` is `int8`. Tensors of different
//! dtypes promote by numpy's table (see [`promote`] for the rules, including `bfloat16`).
//! Shapes broadcast as in numpy. The result is always a new contiguous tensor; an operation on
//! scalars alone gives a zero-dimensional tensor.
//!
//! Element semantics follow numpy: integer arithmetic wraps; `bool + bool` is logical or,
//! `bool * bool` logical and, `maximum`/`minimum` of bools are or/and, `bool - bool` and
//! `-bool` are errors (numpy raises `TypeError`); `exp`/`sqrt` of integers compute in the
//! smallest float that holds them (`int8 -> float16`, `int16 -> float32`, wider -> `float64`);
//! `sum` of booleans and signed integers gives `int64` and of unsigned integers `uint64`;
//! `float16` and `bfloat16` compute in `float32` and round back.
//!
//! Large calls use every thread of the process's pool ([`relaxvm::pool`], shared with TVM
//! kernels, sized by `RELAXVM_NUM_THREADS`): `matmul` above about 2M multiply-adds, elementwise
//! ops and `sum` above 128K elements (see `parallel.rs`). Their results do not depend on the
//! number of threads: the work is cut into pieces fixed by the shapes alone, each computed the
//! same way on any thread, and a sum's pieces combine in numpy's pairwise tree on the calling
//! thread. A long `matmul` checks for an interrupt between its pieces (every few milliseconds);
//! the other ops every `relaxvm::pool::POLL_EVERY` elements of work, on every path.

pub(crate) mod num;
pub mod promote;

mod elementwise;
// The one module with `unsafe` code: `gemm`'s entry point takes raw pointers, and the
// products it writes into uninitialised room are then taken as initialised.
#[allow(unsafe_code)]
mod float_gemm;
mod matmul;
mod parallel;
#[cfg(test)]
mod poll_tests;
mod reduce;
mod tiled;

use crate::args::{self, type_err, value_err};
use crate::table::{builtin, Builtin};
use ndarray::{ArrayD, ArrayViewD, IxDyn};
use num::Num;
use parallel::Poll;
use promote::WeakKind;
use relaxvm::{dispatch_dtype, DataType, Element, Error, Result, Tensor, TensorView, Value};

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.op.add", ctx elementwise::add),
    builtin!("vm.op.sub", ctx elementwise::sub),
    builtin!("vm.op.mul", ctx elementwise::mul),
    builtin!("vm.op.div", ctx elementwise::div),
    builtin!("vm.op.maximum", ctx elementwise::maximum),
    builtin!("vm.op.minimum", ctx elementwise::minimum),
    builtin!("vm.op.neg", ctx elementwise::neg),
    builtin!("vm.op.exp", ctx elementwise::exp),
    builtin!("vm.op.sqrt", ctx elementwise::sqrt),
    builtin!("vm.op.relu", ctx elementwise::relu),
    builtin!("vm.op.sum", ctx reduce::sum),
    builtin!("vm.op.matmul", ctx matmul::matmul),
];

/// One operand of an operator: a tensor, or a weak Python scalar.
#[derive(Clone, Copy)]
pub(crate) enum Operand<'a> {
    /// A tensor (its dtype is strong).
    Tensor(&'a Tensor),
    /// A Python int.
    Int(i64),
    /// A Python float.
    Float(f64),
    /// A Python bool.
    Bool(bool),
}

impl<'a> Operand<'a> {
    /// Argument `i` as an operand.
    pub(crate) fn arg(name: &str, args: &'a [Value], i: usize, what: &str) -> Result<Self> {
        match args.get(i) {
            Some(Value::Tensor(t)) => Ok(Operand::Tensor(t)),
            Some(Value::Int(v)) => Ok(Operand::Int(*v)),
            Some(Value::Float(v)) => Ok(Operand::Float(*v)),
            Some(Value::Bool(v)) => Ok(Operand::Bool(*v)),
            Some(other) => Err(type_err(name, i, what, "tensor, int, float or bool", other)),
            None => Err(Error::arity(name, format!("at least {}", i + 1), args.len())),
        }
    }

    /// The shape (scalars are zero-dimensional).
    pub(crate) fn shape(&self) -> Vec<usize> {
        match self {
            // Tensor dimensions are non-negative: `Tensor::from_parts` checks them.
            Operand::Tensor(t) => t.shape().iter().map(|d| *d as usize).collect(),
            _ => Vec::new(),
        }
    }

    fn weak(&self) -> Option<WeakKind> {
        match self {
            Operand::Tensor(_) => None,
            Operand::Bool(_) => Some(WeakKind::Bool),
            Operand::Int(_) => Some(WeakKind::Int),
            Operand::Float(_) => Some(WeakKind::Float),
        }
    }
}

/// The dtype an operation on `ops` computes in (numpy promotion with NEP 50 weak scalars);
/// fails when an int scalar does not fit an integer result type.
pub(crate) fn operands_type(name: &str, ops: &[Operand<'_>]) -> Result<DataType> {
    let dtype = promoted_type(ops);
    check_weak_ints(name, ops, dtype)?;
    Ok(dtype)
}

/// The promoted dtype of `ops`, without checking that int scalars fit it.
pub(crate) fn promoted_type(ops: &[Operand<'_>]) -> DataType {
    let strong = ops
        .iter()
        .filter_map(|o| if let Operand::Tensor(t) = o { Some(t.dtype()) } else { None })
        .reduce(promote::promote_types);
    let weak = ops.iter().filter_map(Operand::weak).max();
    promote::result_type(strong, weak)
}

/// Fails when an int scalar of `ops` is out of range for an integer `dtype` (numpy 2 raises
/// `OverflowError` for `uint8_array + 300`).
pub(crate) fn check_weak_ints(name: &str, ops: &[Operand<'_>], dtype: DataType) -> Result<()> {
    if dtype.is_float() || dtype == DataType::Bool {
        return Ok(());
    }
    for o in ops {
        if let Operand::Int(i) = o {
            if dispatch_dtype!(dtype, T => T::from_int(*i).is_none()) {
                return Err(value_err(
                    name,
                    format!("Python integer {i} is out of bounds for {dtype} (the dtype of the tensor operand)"),
                ));
            }
        }
    }
    Ok(())
}

/// The operand's elements as type `T`: a view when the tensor already has type `T`, else a
/// converted copy. Conversions follow safe promotions (exact) or go to float (rounding, as
/// numpy). Scalars become zero-dimensional arrays.
pub(crate) fn operand_array<'a, T: Num>(name: &str, op: &Operand<'a>, poll: Poll<'_>) -> Result<Elements<'a, T>> {
    let scalar = match *op {
        Operand::Tensor(t) => return cast_tensor(name, t, poll),
        Operand::Int(i) => T::from_int(i)
            .ok_or_else(|| value_err(name, format!("Python integer {i} is out of bounds for {}", T::DTYPE)))?,
        Operand::Float(x) => T::from_f64(x),
        Operand::Bool(b) => T::from_f64(f64::from(u8::from(b))),
    };
    Ok(Elements::Owned(ArrayD::from_elem(IxDyn(&[]), scalar)))
}

/// Elements of type `T`: a tensor's own (viewed under its storage's read guard) or a converted
/// copy.
pub(crate) enum Elements<'a, T> {
    /// The tensor's elements, in place.
    View(TensorView<'a, T>),
    /// Elements computed from the operand.
    Owned(ArrayD<T>),
}

impl<T> Elements<'_, T> {
    /// The elements as an ndarray view.
    pub(crate) fn view(&self) -> ArrayViewD<'_, T> {
        match self {
            Elements::View(v) => v.view(),
            Elements::Owned(a) => a.view(),
        }
    }

    /// The dimensions.
    pub(crate) fn shape(&self) -> &[usize] {
        match self {
            Elements::View(v) => v.shape(),
            Elements::Owned(a) => a.shape(),
        }
    }
}

/// A tensor's elements as type `T` (a view when no conversion is needed).
pub(crate) fn cast_tensor<'a, T: Num>(name: &str, t: &'a Tensor, poll: Poll<'_>) -> Result<Elements<'a, T>> {
    if t.dtype() == T::DTYPE {
        return Ok(Elements::View(args::view::<T>(name, t)?));
    }
    dispatch_dtype!(t.dtype(), S => {
        let v = args::view::<S>(name, t)?;
        Ok(Elements::Owned(map_array(name, &v, poll, |x| T::from_f64(x.to_f64()))?))
    })
}

/// `f` applied to every element, in a new standard-layout array (polling as it goes).
pub(crate) fn map_array<S: Copy + Sync, T: Copy + Send>(
    name: &str,
    v: &ArrayViewD<'_, S>,
    poll: Poll<'_>,
    f: impl Fn(S) -> T + Sync,
) -> Result<ArrayD<T>> {
    let mut out = try_vec(name, v.len())?;
    match v.as_slice() {
        // Large: pieces written across the thread pool.
        Some(s) if s.len() >= parallel::MIN_PARALLEL_ELEMENTS => {
            parallel::fill(name, &mut out, s.len(), poll, &|start, sink| {
                let end = start + sink.capacity();
                sink.extend(s[start..end].iter().map(|x| f(*x)))
            })?
        }
        // Small (below the parallel threshold): no poll needed.
        Some(s) => out.extend(s.iter().map(|x| f(*x))),
        // A strided view, of any size (a broadcast has no memory behind its elements).
        None => parallel::extend_polled(&mut out, v.iter().map(|x| f(*x)), poll)?,
    }
    shaped(name, v.shape(), out)
}

/// An array of `shape` holding `data` (in row-major order).
pub(crate) fn shaped<T>(name: &str, shape: &[usize], data: Vec<T>) -> Result<ArrayD<T>> {
    ArrayD::from_shape_vec(IxDyn(shape), data)
        .map_err(|e| value_err(name, format!("cannot build a result of shape {shape:?}: {e}")))
}

/// An empty vector with room for `n` elements, or an allocation error (never an abort).
pub(crate) fn try_vec<T>(name: &str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| out_of_memory::<T>(name, n))?;
    Ok(v)
}

/// A vector of `n` zeros, or an allocation error (never an abort). Large ones come zeroed from
/// the allocator (`calloc`: fresh pages from the system need no pass over them).
pub(crate) fn try_zeros<T: bytemuck::Zeroable>(name: &str, n: usize) -> Result<Vec<T>> {
    bytemuck::allocation::try_zeroed_vec(n).map_err(|()| out_of_memory::<T>(name, n))
}

#[cold]
fn out_of_memory<T>(name: &str, n: usize) -> Error {
    let bytes = (n as u128).saturating_mul(std::mem::size_of::<T>() as u128);
    Error::alloc(bytes, format!("out of memory for a result of {n} elements (in {name})"))
}

/// The number of elements of a result of `shape` with `itemsize`-byte elements, or an error
/// when it overflows or its non-zero dimensions span more than `isize::MAX` bytes (which
/// `Tensor::from_parts` rejects even for empty tensors, so `Tensor::from_array` would panic).
pub(crate) fn numel(name: &str, shape: &[usize], itemsize: usize) -> Result<usize> {
    let too_big =
        || Error::alloc(u128::MAX, format!("a result of shape {} has too many elements (in {name})", fmt_shape(shape)));
    let n = shape.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d)).ok_or_else(too_big)?;
    let span = shape.iter().filter(|d| **d != 0).try_fold(itemsize, |acc, d| acc.checked_mul(*d));
    match span {
        Some(b) if b <= isize::MAX as usize => Ok(n),
        _ => Err(too_big()),
    }
}

/// numpy's broadcast of two shapes.
pub(crate) fn broadcast_shapes(name: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= n {
            s[i + s.len() - n]
        } else {
            1
        }
    };
    (0..n)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            (x, y) => Err(value_err(
                name,
                format!(
                    "operands could not be broadcast together with shapes {} and {} (dimension {i}: {x} vs {y})",
                    fmt_shape(a),
                    fmt_shape(b)
                ),
            )),
        })
        .collect()
}

/// A shape in Python tuple syntax.
pub(crate) fn fmt_shape(s: &[usize]) -> String {
    relaxvm::Shape::from(s.iter().map(|d| *d as i64).collect::<Vec<_>>()).to_string()
}

/// Wraps a result array as a tensor value (zero-copy).
pub(crate) fn tensor_value<T: Element>(a: ArrayD<T>) -> Value {
    Value::Tensor(Tensor::from_array(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_shapes("f", &[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
        assert_eq!(broadcast_shapes("f", &[], &[5]).unwrap(), vec![5]);
        assert_eq!(broadcast_shapes("f", &[0], &[1]).unwrap(), vec![0]);
        let e = broadcast_shapes("f", &[2, 3], &[4]).unwrap_err().to_string();
        assert!(e.contains("f: operands could not be broadcast together with shapes (2, 3) and (4,)"), "{e}");
    }

    #[test]
    fn operand_types() {
        let t8 = Tensor::from_vec([1], vec![1i8]).unwrap();
        let tf = Tensor::from_vec([1], vec![1.0f32]).unwrap();
        let ty = |ops: &[Operand<'_>]| operands_type("f", ops);
        assert_eq!(ty(&[Operand::Tensor(&t8), Operand::Int(100)]).unwrap(), DataType::I8);
        assert_eq!(
            format!("{:?}", ty(&[Operand::Tensor(&t8), Operand::Int(300)]).expect_err("an error")),
            r#"Value("f: Python integer 300 is out of bounds for int8 (the dtype of the tensor operand)")"#
        );
        assert_eq!(ty(&[Operand::Tensor(&t8), Operand::Float(1.5)]).unwrap(), DataType::F64);
        assert_eq!(ty(&[Operand::Tensor(&tf), Operand::Int(1 << 40)]).unwrap(), DataType::F32);
        assert_eq!(ty(&[Operand::Tensor(&t8), Operand::Tensor(&tf)]).unwrap(), DataType::F32);
        assert_eq!(ty(&[Operand::Int(1), Operand::Bool(true)]).unwrap(), DataType::I64);
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(
            format!("{:?}", numel("f", &[usize::MAX, 2], 1).expect_err("an error")),
            r#"Alloc { bytes: 340282366920938463463374607431768211455, reason: "a result of shape (-1, 2) has too many elements (in f)" }"#
        );
        assert_eq!(
            format!("{:?}", numel("f", &[1 << 40, 1 << 40], 1).expect_err("an error")),
            r#"Alloc { bytes: 340282366920938463463374607431768211455, reason: "a result of shape (1099511627776, 1099511627776) has too many elements (in f)" }"#
        );
        assert_eq!(
            format!("{:?}", numel("f", &[0, 1 << 31, 1 << 31], 8).expect_err("an error")),
            r#"Alloc { bytes: 340282366920938463463374607431768211455, reason: "a result of shape (0, 2147483648, 2147483648) has too many elements (in f)" }"#
        );
        assert_eq!(numel("f", &[0, 1 << 30, 1 << 30], 4).unwrap(), 0);
        assert_eq!(numel("f", &[], 8).unwrap(), 1);
        assert_eq!(
            format!("{:?}", try_vec::<f64>("f", usize::MAX / 4).expect_err("an error")),
            r#"Alloc { bytes: 36893488147419103224, reason: "out of memory for a result of 4611686018427387903 elements (in f)" }"#
        );
        assert_eq!(
            format!("{:?}", try_zeros::<f32>("f", usize::MAX / 2).expect_err("an error")),
            r#"Alloc { bytes: 36893488147419103228, reason: "out of memory for a result of 9223372036854775807 elements (in f)" }"#
        );
        // Past the allocator's limit though the layout is valid (an error, not an abort). The
        // result goes through `black_box`: an allocation whose memory is never used may be
        // removed by the optimiser (it is in release builds), which would make the call succeed.
        let huge = std::hint::black_box(try_zeros::<u8>("f", std::hint::black_box(1 << 60)));
        assert_eq!(
            format!("{:?}", huge.expect_err("an error")),
            r#"Alloc { bytes: 1152921504606846976, reason: "out of memory for a result of 1152921504606846976 elements (in f)" }"#
        );
        let zeros = try_zeros::<half::f16>("f", 3).unwrap();
        assert_eq!(zeros, [half::f16::ZERO; 3]);
        assert_eq!(try_zeros::<bool>("f", 2).unwrap(), [false, false]);
    }
}

/// Helpers shared by the tensor-op unit tests.
#[cfg(test)]
pub(crate) mod test_util {
    use relaxvm::{DataType, Result, Shape, Tensor, Value};

    /// A tensor value of `shape` holding `v`.
    pub(crate) fn t<T: relaxvm::Element>(shape: &[i64], v: Vec<T>) -> Value {
        Value::Tensor(Tensor::from_vec(Shape::from(shape), v).unwrap())
    }

    /// `f()` with the thread pool unavailable: inside a pool task, launches run inline, so
    /// the operators run on this thread alone.
    pub(crate) fn on_one_thread<R: Send>(f: impl Fn() -> R + Sync) -> R {
        let out = std::sync::Mutex::new(None);
        let r: std::result::Result<(), _> = relaxvm::pool::global().run(1, &|_| {
            *out.lock().unwrap() = Some(f());
            Ok::<(), ()>(())
        });
        r.unwrap();
        out.into_inner().unwrap().unwrap()
    }

    /// The shape, dtype and elements of a tensor result.
    pub(crate) fn out<T: relaxvm::Element>(v: Result<Value>) -> (Vec<i64>, DataType, Vec<T>) {
        let v = v.unwrap();
        let t = v.as_tensor().unwrap();
        (t.shape().to_vec(), t.dtype(), t.to_vec::<T>().unwrap())
    }
}
