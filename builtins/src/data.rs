//! Tuples, conditions, printing and closures.
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.make_tuple` | `(x...)` | the tuple `(x...)` |
//! | `vm.builtin.tuple_getitem` | `(tuple, i)` | item `i` (0 <= i < len, as TVM) |
//! | `vm.builtin.read_if_cond` | `(cond)` | a bool from a bool, an int or a one-element integer/bool tensor |
//! | `vm.builtin.print` | `(x...)` | null; prints the values to stdout, space-separated |
//! | `vm.builtin.make_closure` | `(func, captured...)` | a function that appends `captured` to its call arguments |
//! | `vm.builtin.invoke_closure` | `(%vm, func, args...)` | `func(args..., captured...)` |

use crate::args::{self, in_builtin, type_err, value_err};
use crate::table::{builtin, Builtin};
use relaxvm::{CallCtx, Closure, Error, Result, Selected, Value};
use std::sync::Arc;

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.make_tuple", make_tuple).constant_time(),
    builtin!("vm.builtin.tuple_getitem", select tuple_getitem).constant_time(),
    builtin!("vm.builtin.read_if_cond", read_if_cond).constant_time(),
    builtin!("vm.builtin.print", print),
    builtin!("vm.builtin.make_closure", make_closure).constant_time(),
    builtin!("vm.builtin.invoke_closure", ctx invoke_closure),
];

/// `make_tuple(x...)`.
fn make_tuple(_name: &'static str, args: &[Value]) -> Result<Value> {
    Ok(Value::tuple(args))
}

/// `tuple_getitem(tuple, i)`.
fn tuple_getitem<'a>(name: &str, args: &'a [Value]) -> Result<Selected<'a>> {
    args::arity(name, args, 2)?;
    let items = match &args[0] {
        Value::Tuple(t) => t,
        other => return Err(type_err(name, 0, "tuple", "tuple", other)),
    };
    let i = args::int(name, args, 1, "index")?;
    usize::try_from(i)
        .ok()
        .and_then(|i| items.get(i))
        .map(Selected::Value)
        .ok_or_else(|| Error::index(format!("tuple (in {name})"), i, items.len()))
}

/// `read_if_cond(cond)`: the truth of a condition value.
fn read_if_cond(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    match &args[0] {
        Value::Bool(b) => Ok(Value::Bool(*b)),
        Value::Int(i) => Ok(Value::Bool(*i != 0)),
        Value::Tensor(t) => {
            if t.dtype().is_float() {
                return Err(value_err(name, format!("expected an integer or bool tensor, found dtype {}", t.dtype())));
            }
            // Exact for every integer type: only zero converts to 0.0.
            match t.scalar_f64() {
                Some(x) => Ok(Value::Bool(x != 0.0)),
                None if t.numel() != 1 => {
                    Err(value_err(name, format!("expected a one-element tensor, found shape {}", t.shape())))
                }
                // A one-element tensor whose element does not read: a bool byte other than 0 or 1.
                None => {
                    let why = relaxvm::dispatch_dtype!(t.dtype(), T => t.view::<T>().err())
                        .map_or_else(String::new, |e| format!(": {e}"));
                    Err(value_err(name, format!("cannot read the {} element of the tensor{why}", t.dtype())))
                }
            }
        }
        other => Err(type_err(name, 0, "condition", "bool, int or one-element integer tensor", other)),
    }
}

/// `print(x...)`: prints the values, separated by spaces, where prints go ([`crate::output`]).
fn print(name: &'static str, args: &[Value]) -> Result<Value> {
    let line = args.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
    crate::output::write_line(&line).map_err(|e| in_builtin(name, Error::from(e)))?;
    Ok(Value::Null)
}

/// `make_closure(func, captured...)`: binds the last arguments of `func`. A closure's own
/// captures stay last: `make_closure(make_closure(f, a), b)(x)` calls `f(x, b, a)`.
fn make_closure(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 1)?;
    let f = match &args[0] {
        Value::Func(f) => f,
        other => return Err(type_err(name, 0, "function", "function", other)),
    };
    let captured = args[1..].iter().chain(&f.captured).cloned().collect();
    Ok(Value::Func(Arc::new(Closure { callable: f.callable.clone(), captured })))
}

/// `invoke_closure(%vm, func, args...)`: calls the function (re-entering the VM for bytecode).
fn invoke_closure(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 2)?;
    args::vm_state(name, args, 0)?;
    if !matches!(args[1], Value::Func(_)) {
        return Err(type_err(name, 1, "closure", "function", &args[1]));
    }
    ctx.call(&args[1], &args[2..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{PackedFunc, Tensor};

    fn call(name: &str, args: &[Value]) -> Result<Value> {
        crate::table::call(BUILTINS, name, args)
    }

    #[test]
    fn tuples() {
        let t = call("vm.builtin.make_tuple", &[Value::Int(1), Value::str("a")]).unwrap();
        assert_eq!(t.to_string(), "(1, a)");
        assert_eq!(call("vm.builtin.make_tuple", &[]).unwrap().as_tuple().unwrap().len(), 0);
        assert_eq!(call("vm.builtin.tuple_getitem", &[t.clone(), 1.into()]).unwrap().as_str().unwrap(), "a");
        for i in [2, -1, i64::MIN, i64::MAX] {
            let e = call("vm.builtin.tuple_getitem", &[t.clone(), i.into()]).unwrap_err().to_string();
            assert!(e.contains("out of range for tuple (in vm.builtin.tuple_getitem) of length 2"), "{e}");
        }
        assert_eq!(
            format!("{:?}", call("vm.builtin.tuple_getitem", &[Value::Int(1), 0.into()]).expect_err("an error")),
            r#"Type { expected: "tuple as argument 0 (tuple) of vm.builtin.tuple_getitem", found: "int 1" }"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.tuple_getitem", &[t, Value::Float(0.0)]).expect_err("an error")),
            r#"Type { expected: "int as argument 1 (index) of vm.builtin.tuple_getitem", found: "float 0.0" }"#
        );
    }

    #[test]
    fn conditions() {
        let c = |v: Value| call("vm.builtin.read_if_cond", &[v]);
        assert!(matches!(c(Value::Bool(true)).unwrap(), Value::Bool(true)));
        assert!(matches!(c(Value::Int(0)).unwrap(), Value::Bool(false)));
        assert!(matches!(c(Value::Tensor(Tensor::scalar(3i8))).unwrap(), Value::Bool(true)));
        assert!(matches!(c(Value::Tensor(Tensor::from_vec([1], vec![0u64]).unwrap())).unwrap(), Value::Bool(false)));
        assert!(matches!(c(Value::Tensor(Tensor::scalar(true))).unwrap(), Value::Bool(true)));
        assert_eq!(
            format!("{:?}", c(Value::Tensor(Tensor::scalar(1.0f32))).expect_err("an error")),
            r#"Value("vm.builtin.read_if_cond: expected an integer or bool tensor, found dtype float32")"#
        );
        assert_eq!(
            format!("{:?}", c(Value::Tensor(Tensor::from_vec([0], Vec::<i32>::new()).unwrap())).expect_err("an error")),
            r#"Value("vm.builtin.read_if_cond: expected a one-element tensor, found shape (0,)")"#
        );
        assert_eq!(
            format!("{:?}", c(Value::Tensor(Tensor::from_vec([2], vec![1i32, 1]).unwrap())).expect_err("an error")),
            r#"Value("vm.builtin.read_if_cond: expected a one-element tensor, found shape (2,)")"#
        );
        assert_eq!(
            format!("{:?}", c(Value::str("x")).expect_err("an error")),
            r#"Type { expected: "bool, int or one-element integer tensor as argument 0 (condition) of vm.builtin.read_if_cond", found: "str" }"#
        );
        assert_eq!(
            format!("{:?}", c(Value::Float(f64::NAN)).expect_err("an error")),
            r#"Type { expected: "bool, int or one-element integer tensor as argument 0 (condition) of vm.builtin.read_if_cond", found: "float NaN" }"#
        );
    }

    #[test]
    fn print_returns_null() {
        assert!(matches!(
            call("vm.builtin.print", &[Value::Int(1), Value::Tensor(Tensor::scalar(2.5f32))]).unwrap(),
            Value::Null
        ));
    }

    #[test]
    fn closures_capture_last_arguments() {
        let f = Value::packed(PackedFunc::from_fn("cat", |a| Ok(Value::tuple(a))));
        let c1 = call("vm.builtin.make_closure", &[f, Value::Int(2)]).unwrap();
        let c2 = call("vm.builtin.make_closure", &[c1, Value::Int(1)]).unwrap();
        let out = call("vm.builtin.invoke_closure", &[Value::VmState, c2.clone(), Value::Int(0)]).unwrap();
        assert_eq!(out.to_string(), "(0, 1, 2)");
        let out = call("vm.builtin.invoke_closure", &[Value::Null, c2]).unwrap();
        assert_eq!(out.to_string(), "(1, 2)");
        assert_eq!(
            format!("{:?}", call("vm.builtin.make_closure", &[Value::Int(1)]).expect_err("an error")),
            r#"Type { expected: "function as argument 0 (function) of vm.builtin.make_closure", found: "int 1" }"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.make_closure", &[]).expect_err("an error")),
            r#"Arity { func: "vm.builtin.make_closure", expected: "at least 1", got: 0 }"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.invoke_closure", &[Value::VmState, Value::Int(1)]).expect_err("an error")),
            r#"Type { expected: "function as argument 1 (closure) of vm.builtin.invoke_closure", found: "int 1" }"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.invoke_closure", &[Value::Int(0), Value::Int(1)]).expect_err("an error")),
            r#"Type { expected: "vm_state (%vm) or null as argument 0 (the VM state) of vm.builtin.invoke_closure", found: "int 0" }"#
        );
    }
}
