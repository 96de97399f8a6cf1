//! TVM's registry of host functions for `R.call_py_func` (in TVM, Python functions; here any
//! function value: a Python callable the binding converted, a C function, a Rust closure).
//! It is process-wide, as TVM's is: every VM of the process sees the same table.
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.register_py_func` | `(name, f)` | null; keeps `f` under `name`, replacing one of that name |
//! | `vm.builtin.get_py_func` | `(name)` | the function; an error when `name` is not registered |
//! | `vm.builtin.clear_py_func_registry` | `()` | null; forgets every function |
//! | `vm.builtin.call_py_func` | `((name, args))` | what `f(*args)` returns (what TVM's lowering of `R.call_py_func(name, args)` emits: one tuple) |
//!
//! A Rust embedder registers its functions with [`register_py_func`] (the same table the
//! builtins read), so that a program compiled with `R.call_py_func("name", ...)` calls them:
//!
//! ```
//! use relaxvm::{registry, CallCtx, PackedFunc, Value};
//! relaxvm_builtins::ensure_registered();
//! relaxvm_builtins::py_funcs::register_py_func(
//!     "doc.twice",
//!     PackedFunc::from_fn("doc.twice", |a| Ok(Value::Int(2 * a[0].as_int()?))),
//! );
//! let call = registry::get_global("vm.builtin.call_py_func").unwrap();
//! let packed = Value::tuple(vec![Value::str("doc.twice"), Value::tuple(vec![Value::Int(21)])]);
//! assert_eq!(call.call(&mut CallCtx::detached(), &[packed]).unwrap().as_int().unwrap(), 42);
//! ```

use crate::args;
use crate::table::{builtin, Builtin};
use relaxvm::{CallCtx, Error, PackedFunc, Result, Value};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.register_py_func", register),
    builtin!("vm.builtin.get_py_func", get),
    builtin!("vm.builtin.clear_py_func_registry", clear),
    builtin!("vm.builtin.call_py_func", ctx call_py_func),
];

/// The process-wide table: name to function value.
static TABLE: Mutex<Option<HashMap<String, Value>>> = Mutex::new(None);

/// The table, locked. A panic while it was held cannot leave the map half-updated (every
/// update is one map operation), so a poisoned lock is simply taken over.
fn table() -> MutexGuard<'static, Option<HashMap<String, Value>>> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Keeps `f` under `name` for `vm.builtin.call_py_func`, replacing a function registered under
/// that name before: what `vm.builtin.register_py_func(name, f)` does.
pub fn register_py_func(name: &str, f: PackedFunc) {
    insert(name, Value::packed(f));
}

fn insert(name: &str, f: Value) {
    let replaced = table().get_or_insert_with(HashMap::new).insert(name.to_string(), f);
    // Dropped after the lock is released (the guard above is a temporary of that statement):
    // dropping a function may run its owner's code (a Python `__del__`, a C `free_user_data`),
    // which may use the table again.
    drop(replaced);
}

/// The function registered under `name`; an error naming it when there is none.
pub fn get_py_func(name: &str) -> Result<Value> {
    table().as_ref().and_then(|t| t.get(name)).cloned().ok_or_else(|| {
        Error::value(format!(
            "Python function {name:?} not found in the call_py_func registry (register it with vm.builtin.register_py_func)"
        ))
    })
}

/// Forgets every registered function: what `vm.builtin.clear_py_func_registry()` does.
pub fn clear_py_func_registry() {
    // Taken out under the lock, dropped after it (see `insert`).
    let cleared = table().take();
    drop(cleared);
}

/// `register_py_func(name, f)`: `f` any function value.
fn register(name: &'static str, a: &[Value]) -> Result<Value> {
    args::arity(name, a, 2)?;
    let key = a[0].as_str().map_err(|e| e.context(&format!("{name} argument 0 (the name)")))?;
    a[1].as_func().map_err(|e| e.context(&format!("{name} argument 1 (the function)")))?;
    insert(key, a[1].clone());
    Ok(Value::Null)
}

/// `get_py_func(name)`.
fn get(name: &'static str, a: &[Value]) -> Result<Value> {
    args::arity(name, a, 1)?;
    get_py_func(a[0].as_str().map_err(|e| e.context(&format!("{name} argument 0 (the name)")))?)
        .map_err(|e| e.context(name))
}

/// `clear_py_func_registry()`.
fn clear(name: &'static str, a: &[Value]) -> Result<Value> {
    args::arity(name, a, 0)?;
    clear_py_func_registry();
    Ok(Value::Null)
}

/// `call_py_func((name, args))`: calls the function registered under `name` with the items of
/// `args`, through `ctx` (so that a function calling back into the VM runs on the caller's VM).
fn call_py_func(fname: &'static str, ctx: &mut CallCtx<'_>, a: &[Value]) -> Result<Value> {
    let [packed] = a else {
        return Err(Error::arity(fname, "1 (a tuple of the name and the arguments)", a.len()));
    };
    let items = packed.as_tuple().map_err(|e| e.context(&format!("{fname} argument 0")))?;
    let [name, call_args] = items else {
        return Err(Error::value(format!("{fname}: expected a tuple (name, arguments), got {} items", items.len())));
    };
    let name = name.as_str().map_err(|e| e.context(&format!("{fname}: the function name")))?;
    let call_args = call_args.as_tuple().map_err(|e| e.context(&format!("{fname}: the arguments of {name:?}")))?;
    // Cloned out of the table (its lock released) before the call: the function may register
    // or clear functions itself, and another thread may use the table meanwhile.
    let f = get_py_func(name).map_err(|e| e.context(fname))?;
    ctx.call(&f, call_args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::call;
    use relaxvm::ErrorKind;
    use std::sync::{Mutex as StdMutex, MutexGuard as StdGuard};

    /// The table is process-wide: the tests that clear it or count on its contents take turns.
    fn serial() -> StdGuard<'static, ()> {
        static LOCK: StdMutex<()> = StdMutex::new(());
        LOCK.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pair(name: &str, args: Vec<Value>) -> Value {
        Value::tuple(vec![Value::str(name), Value::tuple(args)])
    }

    #[test]
    fn a_rust_function_registered_by_name_is_what_call_py_func_calls() {
        let _s = serial();
        register_py_func(
            "t.sum",
            PackedFunc::from_fn("t.sum", |a| Ok(Value::Int(a.iter().map(|v| v.as_int().unwrap()).sum()))),
        );
        let out =
            call(BUILTINS, "vm.builtin.call_py_func", &[pair("t.sum", vec![Value::Int(2), Value::Int(40)])]).unwrap();
        assert_eq!(out.as_int().unwrap(), 42);
        // The builtin and the Rust function fill one table.
        let f = call(BUILTINS, "vm.builtin.get_py_func", &[Value::str("t.sum")]).unwrap();
        assert!(f.same_object(&get_py_func("t.sum").unwrap()));
        // Registering a name again replaces its function.
        let seven = Value::packed(PackedFunc::from_fn("t.seven", |_| Ok(Value::Int(7))));
        call(BUILTINS, "vm.builtin.register_py_func", &[Value::str("t.sum"), seven]).unwrap();
        let out = call(BUILTINS, "vm.builtin.call_py_func", &[pair("t.sum", vec![])]).unwrap();
        assert_eq!(out.as_int().unwrap(), 7);
    }

    #[test]
    fn clear_forgets_every_function() {
        let _s = serial();
        register_py_func("t.gone", PackedFunc::from_fn("t.gone", |_| Ok(Value::Null)));
        assert!(get_py_func("t.gone").is_ok());
        assert!(matches!(call(BUILTINS, "vm.builtin.clear_py_func_registry", &[]).unwrap(), Value::Null));
        let e = call(BUILTINS, "vm.builtin.call_py_func", &[pair("t.gone", vec![])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vm.builtin.call_py_func: Python function \"t.gone\" not found in the call_py_func registry (register it with vm.builtin.register_py_func)"
        );
        register_py_func("t.back", PackedFunc::from_fn("t.back", |_| Ok(Value::Null)));
        clear_py_func_registry();
        let e = get_py_func("t.back").unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Value(_)), "{e:?}");
        assert!(e.to_string().contains("Python function \"t.back\" not found in the call_py_func registry"), "{e}");
    }

    #[test]
    fn a_function_may_change_the_table_while_it_runs() {
        let _s = serial();
        // It re-registers itself and reads the table: the table is not locked during the call.
        let f = PackedFunc::from_fn("t.reenter", |_| {
            register_py_func("t.other", PackedFunc::from_fn("t.other", |_| Ok(Value::Int(3))));
            get_py_func("t.reenter")?;
            Ok(Value::Int(1))
        });
        register_py_func("t.reenter", f);
        assert_eq!(
            call(BUILTINS, "vm.builtin.call_py_func", &[pair("t.reenter", vec![])]).unwrap().as_int().unwrap(),
            1
        );
        assert_eq!(call(BUILTINS, "vm.builtin.call_py_func", &[pair("t.other", vec![])]).unwrap().as_int().unwrap(), 3);
    }

    /// Drops a function that uses the table when dropped, as a Python `__del__` or a C
    /// `free_user_data` may.
    struct UsesTableOnDrop;

    impl Drop for UsesTableOnDrop {
        fn drop(&mut self) {
            register_py_func("t.from_drop", PackedFunc::from_fn("t.from_drop", |_| Ok(Value::Null)));
        }
    }

    #[test]
    fn a_function_dropped_when_replaced_or_cleared_may_use_the_table() {
        let _s = serial();
        let owner = |name: &'static str| {
            let keep = UsesTableOnDrop;
            PackedFunc::from_fn(name, move |_| {
                let _ = &keep;
                Ok(Value::Null)
            })
        };
        // Would deadlock if the replaced function were dropped with the table's lock held.
        register_py_func("t.dropped", owner("t.dropped"));
        register_py_func("t.dropped", PackedFunc::from_fn("t.next", |_| Ok(Value::Null)));
        assert!(get_py_func("t.from_drop").is_ok());
        register_py_func("t.dropped", owner("t.dropped"));
        clear_py_func_registry();
        assert!(get_py_func("t.from_drop").is_ok(), "registered by the drop after the clear");
        clear_py_func_registry();
    }

    #[test]
    fn malformed_calls_are_errors_saying_what_was_expected() {
        let err = |name: &str, a: &[Value]| call(BUILTINS, name, a).unwrap_err().to_string();
        let f = Value::packed(PackedFunc::from_fn("t.f", |_| Ok(Value::Null)));
        let e = err("vm.builtin.call_py_func", &[Value::Int(1), Value::Int(2)]);
        assert!(e.contains("vm.builtin.call_py_func: expected 1 (a tuple of the name and the arguments)"), "{e}");
        let e = err("vm.builtin.call_py_func", &[Value::Int(1)]);
        assert_eq!(e, "type mismatch: expected tuple (in vm.builtin.call_py_func argument 0), found int 1");
        let e = err("vm.builtin.call_py_func", &[Value::tuple(vec![Value::str("a")])]);
        assert_eq!(e, "vm.builtin.call_py_func: expected a tuple (name, arguments), got 1 items");
        let e = err("vm.builtin.call_py_func", &[Value::tuple(vec![Value::Int(1), Value::tuple(vec![])])]);
        assert!(e.contains("(in vm.builtin.call_py_func: the function name)"), "{e}");
        let e = err("vm.builtin.call_py_func", &[Value::tuple(vec![Value::str("a"), Value::Int(1)])]);
        assert!(e.contains("(in vm.builtin.call_py_func: the arguments of \"a\")"), "{e}");
        let e = err("vm.builtin.register_py_func", &[Value::Int(1), f.clone()]);
        assert!(e.contains("(in vm.builtin.register_py_func argument 0 (the name))"), "{e}");
        let e = err("vm.builtin.register_py_func", &[Value::str("t.x"), Value::Int(1)]);
        assert!(e.contains("(in vm.builtin.register_py_func argument 1 (the function))"), "{e}");
        let e = err("vm.builtin.register_py_func", &[Value::str("t.x")]);
        assert!(e.contains("expected 2"), "{e}");
        let e = err("vm.builtin.get_py_func", &[Value::Int(1)]);
        assert!(e.contains("(in vm.builtin.get_py_func argument 0 (the name))"), "{e}");
        let e = err("vm.builtin.clear_py_func_registry", &[Value::Null]);
        assert!(e.contains("expected 0"), "{e}");
        // A function's own error comes back as it is.
        let _s = serial();
        register_py_func("t.fails", PackedFunc::from_fn("t.fails", |_| Err(Error::value("boom"))));
        let e = err("vm.builtin.call_py_func", &[pair("t.fails", vec![])]);
        assert!(e.contains("boom"), "{e}");
    }
}
