//! Builtins of TVM's Relax VM runtime (`src/runtime/vm/builtin.cc`, `memory_manager.cc`) that the
//! other modules do not cover: rarely emitted by TVM's compiler for CPU models, but part of the
//! runtime ABI.
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.tuple_reset_item` | `(tuple, index)` | null (see below) |
//! | `vm.builtin.call_tir_dyn` | `(func, args..., shape)` | `func(args..., shape[0], shape[1], ...)` |
//! | `vm.builtin.memory_manager.clear` | `()` | null |
//! | `vm.builtin.check_string_info` | `(value, err_ctx)` | null, or a type error unless `value` is a string |
//! | `vm.builtin.invoke_debug_func` | `(io_effect, func_name, line_info, args...)` | null, after calling the global `func_name(line_info, args...)` |
//!
//! `tuple_reset_item`: TVM sets the tuple's item to None in place, so that a tensor the
//! program no longer needs (e.g. a parameter consumed by `transform_params`) is freed before
//! the tuple is. relaxvm's tuples are immutable and shared (`Arc<Vec<Value>>`), so the item is
//! released when the tuple itself is, instead; the builtin checks its arguments as TVM does and
//! changes nothing. Compiled programs emit it after the item's last read, so no program result
//! differs — only the moment the memory is freed.
//!
//! `memory_manager.clear`: TVM frees the blocks its pooled allocators keep for reuse. Called
//! by a program, it drops what the calling VM's allocation sites keep (see
//! [`CallCtx::clear_pools`]); called from outside any VM it has nothing to free, since each
//! VM's pool is its own and goes with the VM.

use crate::args::{self, in_ctx, type_err, value_err};
use crate::table::{builtin, Builtin};
use relaxvm::{CallCtx, Error, Result, Value};

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.tuple_reset_item", tuple_reset_item),
    builtin!("vm.builtin.call_tir_dyn", ctx call_tir_dyn),
    builtin!("vm.builtin.memory_manager.clear", ctx memory_manager_clear),
    builtin!("vm.builtin.check_string_info", check_string_info),
    builtin!("vm.builtin.invoke_debug_func", ctx invoke_debug_func),
];

/// `tuple_reset_item(tuple, index)`: checks the tuple and the index (in range, as TVM's
/// `SetItem`); the item is released with the tuple (see the module docs).
fn tuple_reset_item(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let items = match &args[0] {
        Value::Tuple(t) => t,
        other => return Err(type_err(name, 0, "tuple", "tuple", other)),
    };
    let i = args::int(name, args, 1, "index")?;
    if usize::try_from(i).ok().is_none_or(|i| i >= items.len()) {
        return Err(Error::index(format!("tuple (in {name})"), i, items.len()));
    }
    Ok(Value::Null)
}

/// `call_tir_dyn(func, args..., shape)`: calls `func` with the arguments, then the shape's
/// dimensions as ints (how TVM passes symbolic shape variables to a TIR function).
fn call_tir_dyn(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 2)?;
    if !matches!(args[0], Value::Func(_)) {
        return Err(type_err(name, 0, "function", "function", &args[0]));
    }
    let last = args.len() - 1;
    let shape = args::shape(name, args, last, "shape to unpack")?;
    let mut call_args: Vec<Value> = Vec::with_capacity(last - 1 + shape.len());
    call_args.extend_from_slice(&args[1..last]);
    call_args.extend(shape.iter().map(|d| Value::Int(*d)));
    ctx.call(&args[0], &call_args)
}

/// `memory_manager.clear()`: drops the calling VM's pooled blocks (see the module docs).
fn memory_manager_clear(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 0)?;
    ctx.clear_pools();
    Ok(Value::Null)
}

/// `check_string_info(value, err_ctx)`: TVM's text, "<err_ctx> expect a string".
fn check_string_info(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let err_ctx = args::opt_str(name, args, 1, "err_ctx")?;
    match &args[0] {
        Value::Str(_) => Ok(Value::Null),
        other => Err(Error::type_mismatch(format!("a string ({})", in_ctx(name, err_ctx)), other.describe())),
    }
}

/// `invoke_debug_func(io_effect, func_name, line_info, args...)`: calls the globally registered
/// `func_name(line_info, args...)` and returns `io_effect`, which must be null (TVM lowers the
/// IO effect to None before codegen).
fn invoke_debug_func(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 3)?;
    if !matches!(args[0], Value::Null) {
        return Err(value_err(
            name,
            format!("IOEffect is expected to be lowered to None, found {}", args[0].describe()),
        ));
    }
    let func_name = match &args[1] {
        Value::Str(s) => s,
        other => return Err(type_err(name, 1, "debug function name", "str", other)),
    };
    let line_info = match &args[2] {
        Value::Str(_) => args[2].clone(),
        other => return Err(type_err(name, 2, "line info", "str", other)),
    };
    let f = relaxvm::registry::get_global(func_name).map_err(|_| {
        value_err(
            name,
            format!(
                "{func_name} is not found. Use the decorator `@tvm.register_global_func(\"{func_name}\")` to register it."
            ),
        )
    })?;
    let mut call_args = Vec::with_capacity(args.len() - 2);
    call_args.push(line_info);
    call_args.extend_from_slice(&args[3..]);
    f.call(ctx, &call_args)?;
    Ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::PackedFunc;

    fn call(name: &str, args: &[Value]) -> Result<Value> {
        crate::table::call(BUILTINS, name, args)
    }

    #[test]
    fn call_tir_dyn_appends_dimensions() {
        let f = Value::packed(PackedFunc::from_fn("cat", |a| Ok(Value::tuple(a.to_vec()))));
        let out = call("vm.builtin.call_tir_dyn", &[f.clone(), Value::str("a"), Value::Shape([3, 4].into())]).unwrap();
        assert_eq!(out.to_string(), "(a, 3, 4)");
        let out = call("vm.builtin.call_tir_dyn", &[f.clone(), Value::Shape([].into())]).unwrap();
        assert_eq!(out.to_string(), "()");
        let e = call("vm.builtin.call_tir_dyn", &[f, Value::Int(1)]).unwrap_err().to_string();
        assert!(e.contains("vm.builtin.call_tir_dyn") && e.contains("shape"), "{e}");
        assert_eq!(
            format!(
                "{:?}",
                call("vm.builtin.call_tir_dyn", &[Value::Int(1), Value::Shape([].into())]).expect_err("an error")
            ),
            r#"Type { expected: "function as argument 0 (function) of vm.builtin.call_tir_dyn", found: "int 1" }"#
        );
        assert_eq!(
            format!("{:?}", call("vm.builtin.call_tir_dyn", &[Value::Int(1)]).expect_err("an error")),
            r#"Arity { func: "vm.builtin.call_tir_dyn", expected: "at least 2", got: 1 }"#
        );
    }

    #[test]
    fn reset_item_checks_like_tvm() {
        let t = Value::tuple(vec![Value::Int(1), Value::Int(2)]);
        assert!(matches!(call("vm.builtin.tuple_reset_item", &[t.clone(), 1.into()]).unwrap(), Value::Null));
        for bad in [2, -1, i64::MAX] {
            let e = call("vm.builtin.tuple_reset_item", &[t.clone(), bad.into()]).unwrap_err().to_string();
            assert!(e.contains("out of range") && e.contains("tuple_reset_item"), "{e}");
        }
        assert_eq!(
            format!("{:?}", call("vm.builtin.tuple_reset_item", &[Value::Int(0), 0.into()]).expect_err("an error")),
            r#"Type { expected: "tuple as argument 0 (tuple) of vm.builtin.tuple_reset_item", found: "int 0" }"#
        );
    }

    #[test]
    fn string_info_and_clear() {
        call("vm.builtin.check_string_info", &[Value::str("s"), Value::Null]).unwrap();
        let e = call("vm.builtin.check_string_info", &[Value::Int(1), Value::str("arg s")]).unwrap_err().to_string();
        assert!(e.contains("expected a string (in vm.builtin.check_string_info, arg s), found int 1"), "{e}");
        assert!(matches!(call("vm.builtin.memory_manager.clear", &[]).unwrap(), Value::Null));
        assert_eq!(
            format!("{:?}", call("vm.builtin.memory_manager.clear", &[Value::Null]).expect_err("an error")),
            r#"Arity { func: "vm.builtin.memory_manager.clear", expected: "0", got: 1 }"#
        );
    }
}
