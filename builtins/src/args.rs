//! Argument checking shared by the builtins: counts, types and ranges. Every error names the
//! builtin, what it expected and what it found.

use relaxvm::{DataType, Element, Error, ErrorKind, Result, Shape, Tensor, TensorView, Value};

/// Fails unless exactly `n` arguments were passed.
#[inline(always)]
pub(crate) fn arity(name: &str, args: &[Value], n: usize) -> Result<()> {
    if args.len() != n {
        return Err(arity_error(name, n, args.len()));
    }
    Ok(())
}

/// The error of [`arity`], out of line: builtins check their arity on every call, and the
/// formatting would otherwise make each one set up a stack frame it rarely needs.
#[cold]
#[inline(never)]
fn arity_error(name: &str, n: usize, got: usize) -> Error {
    Error::arity(name, n.to_string(), got)
}

/// Fails unless between `min` and `max` arguments (inclusive) were passed.
pub(crate) fn arity_range(name: &str, args: &[Value], min: usize, max: usize) -> Result<()> {
    if args.len() < min || args.len() > max {
        return Err(Error::arity(name, format!("{min} to {max}"), args.len()));
    }
    Ok(())
}

/// Fails unless at least `min` arguments were passed.
pub(crate) fn arity_at_least(name: &str, args: &[Value], min: usize) -> Result<()> {
    if args.len() < min {
        return Err(Error::arity(name, format!("at least {min}"), args.len()));
    }
    Ok(())
}

/// The error for a missing argument `i` (out of line, like [`arity_error`]).
#[cold]
#[inline(never)]
pub(crate) fn missing(name: &str, i: usize, got: usize) -> Error {
    Error::arity(name, format!("at least {}", i + 1), got)
}

/// A type mismatch for argument `i` (described by `what`) of builtin `name`.
#[cold]
pub(crate) fn type_err(name: &str, i: usize, what: &str, expected: &str, found: &Value) -> Error {
    Error::type_mismatch(format!("{expected} as argument {i} ({what}) of {name}"), found.describe())
}

/// A value error whose message starts with the builtin's name.
#[cold]
pub(crate) fn value_err(name: &str, msg: impl std::fmt::Display) -> Error {
    Error::value(format!("{name}: {msg}"))
}

/// Adds the builtin's name to an error raised by the core runtime (allocation, view, shape
/// errors), whatever its kind.
#[cold]
pub(crate) fn in_builtin(name: &str, e: Error) -> Error {
    match e.into_kind() {
        ErrorKind::Alloc { bytes, reason } => Error::alloc(bytes, format!("{reason} (in {name})")),
        ErrorKind::Index { what, index, len } => Error::index(format!("{what} (in {name})"), index, len),
        ErrorKind::Arithmetic(m) => Error::arithmetic(format!("{name}: {m}")),
        other => Error::from(other).context(name),
    }
}

/// Argument `i` as an integer (bools count, as in TVM).
pub(crate) fn int(name: &str, args: &[Value], i: usize, what: &str) -> Result<i64> {
    match args.get(i) {
        Some(Value::Int(v)) => Ok(*v),
        Some(Value::Bool(b)) => Ok(i64::from(*b)),
        Some(other) => Err(type_err(name, i, what, "int", other)),
        None => Err(missing(name, i, args.len())),
    }
}

/// Argument `i` as a tensor.
pub(crate) fn tensor<'a>(name: &str, args: &'a [Value], i: usize, what: &str) -> Result<&'a Tensor> {
    match args.get(i) {
        Some(Value::Tensor(t)) => Ok(t),
        Some(other) => Err(type_err(name, i, what, "tensor", other)),
        None => Err(missing(name, i, args.len())),
    }
}

/// Argument `i` as a shape.
pub(crate) fn shape<'a>(name: &str, args: &'a [Value], i: usize, what: &str) -> Result<&'a Shape> {
    match args.get(i) {
        Some(Value::Shape(s)) => Ok(s),
        Some(other) => Err(type_err(name, i, what, "shape", other)),
        None => Err(missing(name, i, args.len())),
    }
}

/// Argument `i` as an optional string: null (or a missing trailing argument) is `None`.
pub(crate) fn opt_str<'a>(name: &str, args: &'a [Value], i: usize, what: &str) -> Result<Option<&'a str>> {
    match args.get(i) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(other) => Err(type_err(name, i, what, "str or null", other)),
    }
}

/// Argument `i` as an optional data type: null, `"void"`, `"handle"` and `""` mean any.
pub(crate) fn opt_dtype(name: &str, args: &[Value], i: usize, what: &str) -> Result<Option<DataType>> {
    match args.get(i) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::DType(d)) => Ok(Some(*d)),
        Some(Value::Str(s)) if matches!(&**s, "" | "void" | "handle") => Ok(None),
        Some(Value::Str(s)) => s.parse().map(Some).map_err(|e| in_builtin(name, e)),
        Some(other) => Err(type_err(name, i, what, "dtype, dtype name or null", other)),
    }
}

/// Argument `i` as a data type.
pub(crate) fn dtype(name: &str, args: &[Value], i: usize, what: &str) -> Result<DataType> {
    match args.get(i) {
        Some(Value::DType(d)) => Ok(*d),
        Some(Value::Str(s)) => s.parse().map_err(|e| in_builtin(name, e)),
        Some(other) => Err(type_err(name, i, what, "dtype or dtype name", other)),
        None => Err(missing(name, i, args.len())),
    }
}

/// Checks that argument `i` is the VM-state register (`%vm`); null is accepted too, for calls
/// made from outside a VM.
pub(crate) fn vm_state(name: &str, args: &[Value], i: usize) -> Result<()> {
    match args.get(i) {
        Some(Value::VmState | Value::Null) => Ok(()),
        Some(other) => Err(type_err(name, i, "the VM state", "vm_state (%vm) or null", other)),
        None => Err(missing(name, i, args.len())),
    }
}

/// A typed view of a tensor's elements; a failure (a misaligned tensor) names the builtin.
pub(crate) fn view<'a, T: Element>(name: &str, t: &'a Tensor) -> Result<TensorView<'a, T>> {
    t.view::<T>().map_err(|e| in_builtin(name, e))
}

/// `err_ctx` leading a value error's sentence as TVM places it (`"ctx expect ..."`): `"ctx "`,
/// or nothing.
pub(crate) fn ctx_lead(err_ctx: Option<&str>) -> String {
    match err_ctx {
        Some(c) if !c.is_empty() => format!("{c} "),
        _ => String::new(),
    }
}

/// Where a type error arose, with `err_ctx` when there is one: `"in NAME"` or `"in NAME, ctx"`.
pub(crate) fn in_ctx(name: &str, err_ctx: Option<&str>) -> String {
    match err_ctx {
        Some(c) if !c.is_empty() => format!("in {name}, {c}"),
        _ => format!("in {name}"),
    }
}

/// The arguments of a call whose operands are `fixed` (`None` for registers), with null for
/// the registers before `from`; `None` when an operand from `from` on is a register. What a
/// specializer parses once, with the same functions as a general call parses it every time.
pub(crate) fn fixed_from(fixed: &[Option<&Value>], from: usize) -> Option<Vec<Value>> {
    fixed.iter().enumerate().map(|(i, v)| v.cloned().or_else(|| (i < from).then_some(Value::Null))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_builtin_expected_and_found() {
        let args = [Value::str("x")];
        let e = int("vm.t", &args, 0, "size").unwrap_err().to_string();
        assert!(e.contains("vm.t") && e.contains("expected int") && e.contains("found str"), "{e}");
        let e = tensor("vm.t", &args, 1, "x").unwrap_err().to_string();
        assert!(e.contains("vm.t") && e.contains("at least 2"), "{e}");
        let e = arity_range("vm.t", &args, 2, 3).unwrap_err().to_string();
        assert!(e.contains("vm.t") && e.contains("2 to 3") && e.contains("got 1"), "{e}");
        assert_eq!(
            format!("{:?}", arity_at_least("vm.t", &args, 2).expect_err("an error")),
            r#"Arity { func: "vm.t", expected: "at least 2", got: 1 }"#
        );
        assert_eq!(
            format!("{:?}", vm_state("vm.t", &args, 0).expect_err("an error")),
            r#"Type { expected: "vm_state (%vm) or null as argument 0 (the VM state) of vm.t", found: "str" }"#
        );
        assert!(vm_state("vm.t", &[Value::VmState], 0).is_ok());
    }

    #[test]
    fn optional_dtype_and_string() {
        let args = [Value::Null, Value::str("void"), Value::str("float32"), Value::str("nope"), Value::Int(1)];
        assert_eq!(opt_dtype("f", &args, 0, "d").unwrap(), None);
        assert_eq!(opt_dtype("f", &args, 1, "d").unwrap(), None);
        assert_eq!(opt_dtype("f", &args, 2, "d").unwrap(), Some(DataType::F32));
        let e = opt_dtype("f", &args, 3, "d").unwrap_err().to_string();
        assert!(e.starts_with("f: ") && e.contains("nope"), "{e}");
        assert_eq!(
            format!("{:?}", opt_dtype("f", &args, 4, "d").expect_err("an error")),
            r#"Type { expected: "dtype, dtype name or null as argument 4 (d) of f", found: "int 1" }"#
        );
        assert_eq!(opt_str("f", &args, 9, "s").unwrap(), None);
        assert_eq!(
            format!("{:?}", opt_str("f", &args, 4, "s").expect_err("an error")),
            r#"Type { expected: "str or null as argument 4 (s) of f", found: "int 1" }"#
        );
        assert_eq!(ctx_lead(Some("x")), "x ");
        assert_eq!(ctx_lead(Some("")), "");
        assert_eq!(in_ctx("f", Some("x")), "in f, x");
        assert_eq!(in_ctx("f", None), "in f");
    }

    #[test]
    fn views_name_the_builtin() {
        let storage = relaxvm::Storage::alloc(16, Default::default()).unwrap();
        let misaligned = Tensor::from_parts(storage, 2, [2].into(), None, DataType::F32).unwrap();
        let e = view::<f32>("vm.x", &misaligned).unwrap_err().to_string();
        assert!(e.contains("vm.x") && e.contains("aligned"), "{e}");
        assert_eq!(
            format!("{:?}", view::<i32>("vm.x", &misaligned).expect_err("an error")),
            r#"Type { expected: "tensor of int32 (in vm.x)", found: "tensor of float32" }"#
        );
        assert_eq!(view::<f32>("vm.x", &Tensor::scalar(1.5f32)).unwrap()[[]], 1.5);
    }

    #[test]
    fn in_builtin_names_the_builtin_for_every_kind() {
        for e in [Error::alloc(8, "too big"), Error::index("heap", 3, 2), Error::arithmetic("x"), Error::value("v")] {
            let s = in_builtin("vm.b", e).to_string();
            assert!(s.contains("vm.b"), "{s}");
        }
    }
}
