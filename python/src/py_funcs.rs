//! TVM's registry of Python functions for `R.call_py_func`: `vm.builtin.register_py_func(name,
//! f)` keeps `f` under `name` (process-wide, as TVM's), and the program's
//! `vm.builtin.call_py_func((name, args))` calls it with the items of `args`. Also
//! `vm.builtin.get_py_func(name)` and `vm.builtin.clear_py_func_registry()`.

use relaxvm::{registry, CallCtx, Error, PackedFunc, Result, Value};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

fn table() -> &'static Mutex<HashMap<String, Value>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Value>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<String, Value>> {
    table().lock().unwrap_or_else(|p| p.into_inner())
}

fn get(name: &str) -> Result<Value> {
    lock().get(name).cloned().ok_or_else(|| {
        Error::value(format!(
            "Python function {name:?} not found in the call_py_func registry (register it with vm.builtin.register_py_func)"
        ))
    })
}

fn register_py_func(args: &[Value]) -> Result<Value> {
    let [name, f] = args else { return Err(Error::arity("vm.builtin.register_py_func", "2", args.len())) };
    let name = name.as_str().map_err(|e| e.context("vm.builtin.register_py_func argument 0 (the name)"))?;
    f.as_func().map_err(|e| e.context("vm.builtin.register_py_func argument 1 (the function)"))?;
    lock().insert(name.to_string(), f.clone());
    Ok(Value::Null)
}

fn get_py_func(args: &[Value]) -> Result<Value> {
    let [name] = args else { return Err(Error::arity("vm.builtin.get_py_func", "1", args.len())) };
    get(name.as_str().map_err(|e| e.context("vm.builtin.get_py_func argument 0 (the name)"))?)
}

fn clear(args: &[Value]) -> Result<Value> {
    if !args.is_empty() {
        return Err(Error::arity("vm.builtin.clear_py_func_registry", "0", args.len()));
    }
    lock().clear();
    Ok(Value::Null)
}

/// `call_py_func((name, args))`: what TVM's lowering of `R.call_py_func(name, args)` emits.
fn call_py_func(ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    const NAME: &str = "vm.builtin.call_py_func";
    let [packed] = args else {
        return Err(Error::arity(NAME, "1 (a tuple of the name and the arguments)", args.len()));
    };
    let items = packed.as_tuple().map_err(|e| e.context(&format!("{NAME} argument 0")))?;
    let [name, call_args] = items else {
        return Err(Error::value(format!("{NAME}: expected a tuple (name, arguments), got {} items", items.len())));
    };
    let name = name.as_str().map_err(|e| e.context(&format!("{NAME}: the function name")))?;
    let call_args = call_args.as_tuple().map_err(|e| e.context(&format!("{NAME}: the arguments of {name:?}")))?;
    // Taken out of the table first: the function may register or clear functions itself.
    let f = get(name)?;
    ctx.call(&f, call_args)
}

/// Registers the four builtins in the process-wide registry (once, at import).
pub fn register() -> Result<()> {
    for f in [
        PackedFunc::from_fn("vm.builtin.register_py_func", register_py_func),
        PackedFunc::from_fn("vm.builtin.get_py_func", get_py_func),
        PackedFunc::from_fn("vm.builtin.clear_py_func_registry", clear),
        PackedFunc::new("vm.builtin.call_py_func", call_py_func),
    ] {
        registry::register_global(f, true)?;
    }
    Ok(())
}
