//! Run-time checks of argument structure that compiled programs emit at function entry.
//!
//! | builtin | arguments |
//! |---|---|
//! | `vm.builtin.check_tensor_info` | `(value, ndim, [dtype,] err_ctx)` — ndim -1 is any; dtype null/`"void"` is any |
//! | `vm.builtin.check_shape_info` | `(value, ndim, err_ctx)` — ndim -1 is any |
//! | `vm.builtin.check_tuple_info` | `(value, size, err_ctx)` |
//! | `vm.builtin.check_prim_value_info` | `(value, dtype, err_ctx)` — dtype null/`"void"` is any int, float or bool |
//! | `vm.builtin.check_func_info` | `(value, err_ctx)` |
//!
//! Each returns null, or fails with an error that starts with `err_ctx`: a type error when the
//! value is of the wrong kind, a value error when its ndim, dtype or size differs.

use crate::args::{self, in_ctx, value_err};
use crate::table::{builtin, Builtin};
use relaxvm::dtype::TypeClass;
use relaxvm::{DataType, Error, Result, Value};

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.check_tensor_info", check_tensor_info).constant_time(),
    builtin!("vm.builtin.check_shape_info", check_shape_info).constant_time(),
    builtin!("vm.builtin.check_tuple_info", check_tuple_info),
    builtin!("vm.builtin.check_prim_value_info", check_prim_value_info).constant_time(),
    builtin!("vm.builtin.check_func_info", check_func_info).constant_time(),
];

/// A kind mismatch: a type error carrying the context, the builtin, and what was found.
#[cold]
fn kind_err(name: &str, err_ctx: Option<&str>, expected: &str, found: &Value) -> Error {
    Error::type_mismatch(format!("{expected} ({})", in_ctx(name, err_ctx)), found.describe())
}

/// An expected ndim: -1 (any) or a non-negative count.
fn ndim_arg(name: &str, args: &[Value], i: usize) -> Result<Option<usize>> {
    match args::int(name, args, i, "ndim")? {
        -1 => Ok(None),
        n => usize::try_from(n)
            .map(Some)
            .map_err(|_| value_err(name, format!("ndim must be -1 (any) or non-negative, found {n}"))),
    }
}

/// `check_tensor_info(value, ndim, [dtype,] err_ctx)`.
fn check_tensor_info(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 3, 4)?;
    let ndim = ndim_arg(name, args, 1)?;
    let (dtype, err_ctx) = if args.len() == 3 {
        (None, args::opt_str(name, args, 2, "err_ctx")?)
    } else {
        (args::opt_dtype(name, args, 2, "dtype")?, args::opt_str(name, args, 3, "err_ctx")?)
    };
    let Value::Tensor(t) = &args[0] else {
        return Err(kind_err(name, err_ctx, "tensor", &args[0]));
    };
    if let Some(n) = ndim.filter(|n| *n != t.ndim()) {
        return Err(value_err(
            name,
            // TVM's text, so messages match what its users and tests expect.
            format!(
                "{}expect Tensor with ndim {n} but get {} (shape {})",
                args::ctx_lead(err_ctx),
                t.ndim(),
                t.shape()
            ),
        ));
    }
    if let Some(d) = dtype.filter(|d| *d != t.dtype()) {
        return Err(value_err(
            name,
            format!("{}expect Tensor with dtype {d} but get {}", args::ctx_lead(err_ctx), t.dtype()),
        ));
    }
    Ok(Value::Null)
}

/// `check_shape_info(value, ndim, err_ctx)`.
fn check_shape_info(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let ndim = ndim_arg(name, args, 1)?;
    let err_ctx = args::opt_str(name, args, 2, "err_ctx")?;
    let Value::Shape(s) = &args[0] else {
        return Err(kind_err(name, err_ctx, "shape", &args[0]));
    };
    if let Some(n) = ndim.filter(|n| *n != s.len()) {
        return Err(value_err(
            name,
            format!("{}expect Shape with ndim {n} but get {} (shape {s})", args::ctx_lead(err_ctx), s.len()),
        ));
    }
    Ok(Value::Null)
}

/// `check_tuple_info(value, size, err_ctx)`.
fn check_tuple_info(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let size = args::int(name, args, 1, "size")?;
    let err_ctx = args::opt_str(name, args, 2, "err_ctx")?;
    let Value::Tuple(items) = &args[0] else {
        return Err(kind_err(name, err_ctx, "tuple", &args[0]));
    };
    if i64::try_from(items.len()).ok() != Some(size) {
        return Err(value_err(
            name,
            format!(
                "{}expect a Tuple with {size} elements,  but get a Tuple with {} elements.",
                args::ctx_lead(err_ctx),
                items.len()
            ),
        ));
    }
    Ok(Value::Null)
}

/// `check_prim_value_info(value, dtype, err_ctx)`: the value is a scalar of the dtype's kind.
/// As in TVM, ints are accepted where floats are expected, and bools where ints are.
fn check_prim_value_info(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let dtype = args::opt_dtype(name, args, 1, "dtype")?;
    let err_ctx = args::opt_str(name, args, 2, "err_ctx")?;
    let v = &args[0];
    let ok = match dtype.map(DataType::class) {
        None => matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_)),
        Some(TypeClass::Bool) => matches!(v, Value::Bool(_) | Value::Int(_)),
        Some(TypeClass::Int) => matches!(v, Value::Int(_) | Value::Bool(_)),
        Some(TypeClass::UInt) => matches!(v, Value::Int(i) if *i >= 0) || matches!(v, Value::Bool(_)),
        Some(TypeClass::Float | TypeClass::BFloat) => {
            matches!(v, Value::Float(_) | Value::Int(_) | Value::Bool(_))
        }
    };
    if !ok {
        let expected = match dtype {
            Some(d) => format!("prim value of dtype {d}"),
            None => "prim value (int, float or bool)".to_string(),
        };
        return Err(kind_err(name, err_ctx, &expected, v));
    }
    Ok(Value::Null)
}

/// `check_func_info(value, err_ctx)`.
fn check_func_info(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let err_ctx = args::opt_str(name, args, 1, "err_ctx")?;
    match &args[0] {
        Value::Func(_) => Ok(Value::Null),
        other => Err(kind_err(name, err_ctx, "function", other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{ErrorKind, PackedFunc, Tensor};

    fn call(name: &str, args: &[Value]) -> Result<Value> {
        crate::table::call(BUILTINS, name, args)
    }

    fn t() -> Value {
        Value::Tensor(Tensor::zeros([2, 3], DataType::F32, Default::default()).unwrap())
    }

    #[test]
    fn tensor_info() {
        let n = "vm.builtin.check_tensor_info";
        call(n, &[t(), 2.into(), Value::DType(DataType::F32), Value::str("ctx")]).unwrap();
        call(n, &[t(), (-1).into(), Value::Null, Value::Null]).unwrap();
        call(n, &[t(), (-1).into(), Value::str("void"), Value::Null]).unwrap();
        call(n, &[t(), 2.into(), Value::str("f")]).unwrap();
        let e = call(n, &[t(), 3.into(), Value::Null, Value::str("arg x")]).unwrap_err().to_string();
        assert!(e.contains("arg x expect Tensor with ndim 3 but get 2") && e.contains(n), "{e}");
        let e = call(n, &[t(), 2.into(), Value::str("int32"), Value::str("arg x")]).unwrap_err().to_string();
        assert!(e.contains("arg x expect Tensor with dtype int32 but get float32"), "{e}");
        let e = call(n, &[Value::Int(1), 2.into(), Value::Null, Value::str("arg x")]).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Type { .. }), "{e}");
        assert!(e.to_string().contains("expected tensor (in vm.builtin.check_tensor_info, arg x), found int 1"), "{e}");
        // Without a context, no stray space where it would go (TVM's own text has one).
        let e = call(n, &[t(), 3.into(), Value::Null, Value::str("")]).unwrap_err().to_string();
        assert!(e.contains("check_tensor_info: expect Tensor with ndim 3"), "{e}");
        assert_eq!(
            format!("{:?}", call(n, &[t(), (-2).into(), Value::Null]).expect_err("an error")),
            r#"Value("vm.builtin.check_tensor_info: ndim must be -1 (any) or non-negative, found -2")"#
        );
        assert_eq!(
            format!("{:?}", call(n, &[t(), 2.into(), Value::Int(3), Value::Null]).expect_err("an error")),
            r#"Type { expected: "dtype, dtype name or null as argument 2 (dtype) of vm.builtin.check_tensor_info", found: "int 3" }"#
        );
        assert_eq!(
            format!("{:?}", call(n, &[t(), 2.into()]).expect_err("an error")),
            r#"Arity { func: "vm.builtin.check_tensor_info", expected: "3 to 4", got: 2 }"#
        );
    }

    #[test]
    fn shape_tuple_func_info() {
        let s = Value::Shape([1, 2].into());
        call("vm.builtin.check_shape_info", &[s.clone(), 2.into(), Value::Null]).unwrap();
        call("vm.builtin.check_shape_info", &[s.clone(), (-1).into(), Value::Null]).unwrap();
        let e = call("vm.builtin.check_shape_info", &[s.clone(), 3.into(), Value::str("c")]).unwrap_err().to_string();
        assert!(e.contains("c expect Shape with ndim 3 but get 2 (shape (1, 2))"), "{e}");
        assert_eq!(
            format!("{:?}", call("vm.builtin.check_shape_info", &[t(), 2.into(), Value::Null]).expect_err("an error")),
            r#"Type { expected: "shape (in vm.builtin.check_shape_info)", found: "tensor of shape (2, 3) and dtype float32" }"#
        );
        let tup = Value::tuple(vec![Value::Int(1), Value::Null]);
        call("vm.builtin.check_tuple_info", &[tup.clone(), 2.into(), Value::Null]).unwrap();
        let e = call("vm.builtin.check_tuple_info", &[tup, 3.into(), Value::str("c")]).unwrap_err().to_string();
        assert!(e.contains("c expect a Tuple with 3 elements,  but get a Tuple with 2 elements."), "{e}");
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.check_tuple_info", &[s.clone(), 2.into(), Value::Null]).expect_err("an error")
            ),
            r#"Type { expected: "tuple (in vm.builtin.check_tuple_info)", found: "shape (1, 2)" }"#
        );
        let f = Value::packed(PackedFunc::from_fn("f", |_| Ok(Value::Null)));
        call("vm.builtin.check_func_info", &[f, Value::Null]).unwrap();
        let e = call("vm.builtin.check_func_info", &[s, Value::str("c")]).unwrap_err().to_string();
        assert!(e.contains("expected function (in vm.builtin.check_func_info, c), found shape"), "{e}");
    }

    #[test]
    fn prim_value_info() {
        let n = "vm.builtin.check_prim_value_info";
        call(n, &[Value::Int(3), Value::str("int64"), Value::Null]).unwrap();
        call(n, &[Value::Int(3), Value::str("float32"), Value::Null]).unwrap();
        call(n, &[Value::Float(f64::NAN), Value::str("float32"), Value::Null]).unwrap();
        call(n, &[Value::Bool(true), Value::str("bool"), Value::Null]).unwrap();
        call(n, &[Value::Float(1.5), Value::Null, Value::Null]).unwrap();
        assert_eq!(
            format!("{:?}", call(n, &[Value::Float(1.5), Value::str("int64"), Value::str("c")]).expect_err("an error")),
            r#"Type { expected: "prim value of dtype int64 (in vm.builtin.check_prim_value_info, c)", found: "float 1.5" }"#
        );
        assert_eq!(
            format!("{:?}", call(n, &[Value::Int(-1), Value::str("uint8"), Value::str("c")]).expect_err("an error")),
            r#"Type { expected: "prim value of dtype uint8 (in vm.builtin.check_prim_value_info, c)", found: "int -1" }"#
        );
        let e = call(n, &[t(), Value::str("int64"), Value::str("c")]).unwrap_err().to_string();
        assert!(e.contains("prim value of dtype int64 (in vm.builtin.check_prim_value_info, c), found tensor"), "{e}");
    }
}
