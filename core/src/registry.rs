//! Registries of packed functions by name: a value type, and the process-wide default.

use crate::error::{Error, ErrorKind, Result};
use crate::packed::{CallCtx, PackedFunc, TypedFn};
use crate::value::Value;
use indexmap::IndexMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A table of packed functions by name, in registration order.
#[derive(Clone, Default)]
pub struct Registry {
    funcs: IndexMap<String, PackedFunc>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers `f` under its name; an existing name is an error unless `allow_override`.
    pub fn register(&mut self, f: PackedFunc, allow_override: bool) -> Result<()> {
        if !allow_override && self.funcs.contains_key(f.name()) {
            return Err(ErrorKind::AlreadyRegistered(f.name().to_string()).into());
        }
        self.funcs.insert(f.name().to_string(), f);
        Ok(())
    }

    /// Registers a closure that does not need the VM.
    pub fn register_fn(
        &mut self,
        name: &str,
        f: impl Fn(&[Value]) -> Result<Value> + Send + Sync + 'static,
    ) -> Result<()> {
        self.register(PackedFunc::from_fn(name, f), false)
    }

    /// Registers a closure that may reach the VM.
    pub fn register_ctx(
        &mut self,
        name: &str,
        f: impl Fn(&mut CallCtx<'_>, &[Value]) -> Result<Value> + Send + Sync + 'static,
    ) -> Result<()> {
        self.register(PackedFunc::new(name, f), false)
    }

    /// Registers a typed closure, e.g. `register_typed("my.add", |a: i64, b: i64| a + b)`.
    pub fn register_typed<Args, F: TypedFn<Args>>(&mut self, name: &str, f: F) -> Result<()> {
        self.register(PackedFunc::typed(name, f), false)
    }

    /// The function registered under `name`.
    pub fn get(&self, name: &str) -> Option<&PackedFunc> {
        self.funcs.get(name)
    }

    /// True when `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.funcs.contains_key(name)
    }

    /// Removes `name`, returning its function.
    pub fn remove(&mut self, name: &str) -> Option<PackedFunc> {
        self.funcs.shift_remove(name)
    }

    /// Every registered name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.funcs.keys().map(String::as_str)
    }

    /// How many functions are registered.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }
}

fn global_lock() -> &'static RwLock<Registry> {
    static GLOBAL: OnceLock<RwLock<Registry>> = OnceLock::new();
    GLOBAL.get_or_init(Default::default)
}

/// Reads the process-wide registry (what `register_func` in Python writes).
pub fn global() -> RwLockReadGuard<'static, Registry> {
    global_lock().read().unwrap_or_else(|p| p.into_inner())
}

/// Counts the times the process-wide registry was opened for writing (see [`generation`]).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Writes the process-wide registry.
pub fn global_mut() -> RwLockWriteGuard<'static, Registry> {
    let guard = global_lock().write().unwrap_or_else(|p| p.into_inner());
    // Counted while the lock is held, before any change: whoever reads a generation and then
    // looks a name up sees the registry of that generation or a later one.
    GENERATION.fetch_add(1, Ordering::AcqRel);
    guard
}

/// The process-wide registry's generation, which changes whenever it may have changed: a
/// lookup cached with the generation read before it is still right while this returns the same.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Registers `f` in the process-wide registry. A function it replaces is dropped after the
/// registry's lock is released: dropping it may run a destructor of foreign code (a Python
/// object's `__del__`, a C function's `free_user_data`) that calls back into the registry.
pub fn register_global(f: PackedFunc, allow_override: bool) -> Result<()> {
    let mut registry = global_mut();
    if !allow_override && registry.contains(f.name()) {
        return Err(ErrorKind::AlreadyRegistered(f.name().to_string()).into());
    }
    let replaced = registry.remove(f.name());
    let registered = registry.register(f, true);
    drop(registry);
    drop(replaced);
    registered
}

/// Removes `name` from the process-wide registry and returns it, after the lock is released
/// (so that the caller drops it outside the lock, as [`register_global`] does).
pub fn remove_global(name: &str) -> Option<PackedFunc> {
    // The guard is a temporary of this expression: released before the caller gets the value.
    global_mut().remove(name)
}

/// The process-wide function registered under `name`.
pub fn get_global(name: &str) -> Result<PackedFunc> {
    global().get(name).cloned().ok_or_else(|| Error::from(ErrorKind::UnknownFunction(name.to_string())))
}

/// Where [`get_global_located`] found a function: its position in the process-wide registry,
/// valid while the registry's [`generation`] is the one recorded with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    generation: u64,
    index: usize,
}

/// [`get_global`], with where the function is, for [`get_global_at`]: a caller that calls one
/// name again and again finds it there without hashing the name while the registry is unchanged
/// (and keeps no reference to the function between calls).
pub fn get_global_located(name: &str) -> Result<(PackedFunc, Location)> {
    let registry = global();
    // Read under the read lock: writers count while they hold the write lock, so the
    // generation is the one of the registry this lookup reads.
    let generation = generation();
    match registry.funcs.get_full(name) {
        Some((index, _, f)) => Ok((f.clone(), Location { generation, index })),
        None => Err(Error::from(ErrorKind::UnknownFunction(name.to_string()))),
    }
}

/// The function registered under `name` at `at`, when the registry is still the one
/// [`get_global_located`] found it in (`None` once it may have changed: look it up again).
pub fn get_global_at(at: Location, name: &str) -> Option<PackedFunc> {
    let registry = global();
    if generation() != at.generation {
        return None;
    }
    registry.funcs.get_index(at.index).filter(|(n, _)| n.as_str() == name).map(|(_, f)| f.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_located_function_is_found_again_until_the_registry_changes() {
        register_global(PackedFunc::typed("t.located.a", |a: i64| a), true).unwrap();
        // Another test's write between the two lookups makes the location stale (then the
        // lookup must say so, never give another function): retry until the found-again path
        // has run, so it is tested whatever the other tests do.
        let at = loop {
            let (f, at) = get_global_located("t.located.a").unwrap();
            match get_global_at(at, "t.located.a") {
                Some(again) => {
                    assert!(again.ptr_eq(&f));
                    break at;
                }
                None => assert_ne!(generation(), at.generation),
            }
        };
        assert!(get_global_at(at, "t.located.other").is_none(), "the name is checked");
        register_global(PackedFunc::typed("t.located.a", |a: i64| a + 1), true).unwrap();
        assert!(get_global_at(at, "t.located.a").is_none(), "a write makes it stale");
        let e = get_global_located("t.located.missing").map(drop).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::UnknownFunction(n) if n == "t.located.missing"), "{e:?}");
    }

    /// Registers another function when dropped, as a Python `__del__` or a C `free_user_data`
    /// may (capi/01).
    struct RegistersOnDrop;
    impl Drop for RegistersOnDrop {
        fn drop(&mut self) {
            register_global(PackedFunc::typed("t.reentry.other", |a: i64| a), true).unwrap();
        }
    }

    #[test]
    fn every_change_of_the_registry_changes_its_generation() {
        // Other tests may change the registry meanwhile: the generation only grows.
        let g0 = generation();
        register_global(PackedFunc::typed("t.generation", |a: i64| a), true).unwrap();
        let g1 = generation();
        assert!(g1 > g0, "a registration");
        drop(remove_global("t.generation"));
        assert!(generation() > g1, "a removal");
    }

    #[test]
    fn a_replaced_or_removed_function_is_dropped_outside_the_lock() {
        for remove in [false, true] {
            let owned = RegistersOnDrop;
            register_global(
                PackedFunc::from_fn("t.reentry", move |_| {
                    let _ = &owned;
                    Ok(Value::Null)
                }),
                true,
            )
            .unwrap();
            if remove {
                drop(remove_global("t.reentry"));
            } else {
                register_global(PackedFunc::typed("t.reentry", |a: i64| a), true).unwrap();
            }
            assert!(global().contains("t.reentry.other"));
            drop(remove_global("t.reentry.other"));
        }
    }

    #[test]
    fn the_registry_keeps_a_functions_origin_until_it_is_replaced_or_removed() {
        // A binding finds the object a registered function was made from through the registry
        // alone (Python's `register_func` does, for pickling and its GIL policy).
        struct Origin(&'static str);
        let with_origin = |tag| PackedFunc::typed("t.origin", |a: i64| a).with_origin(std::sync::Arc::new(Origin(tag)));
        let origin_of =
            |name| global().get(name).and_then(|f| f.origin()).and_then(|o| o.downcast_ref::<Origin>()).map(|o| o.0);
        register_global(with_origin("first"), true).unwrap();
        assert_eq!(origin_of("t.origin"), Some("first"));
        register_global(with_origin("second"), false).expect_err("no override without permission");
        assert_eq!(origin_of("t.origin"), Some("first"), "a refused registration changes nothing");
        register_global(PackedFunc::typed("t.origin", |a: i64| a), true).unwrap();
        assert_eq!(origin_of("t.origin"), None, "the replacing function has none");
        register_global(with_origin("third"), true).unwrap();
        assert_eq!(origin_of("t.origin"), Some("third"));
        drop(remove_global("t.origin"));
        assert_eq!(origin_of("t.origin"), None);
    }

    #[test]
    fn register_get_and_override() {
        let mut r = Registry::new();
        r.register_typed("t.add", |a: i64, b: i64| a + b).unwrap();
        assert!(r.contains("t.add"));
        let e = r.register_typed("t.add", |a: i64| a).unwrap_err().to_string();
        assert!(e.contains("already registered"), "{e}");
        r.register(PackedFunc::typed("t.add", |a: i64| a), true).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r.names().collect::<Vec<_>>(), vec!["t.add"]);
        assert!(r.remove("t.add").is_some());
        assert!(r.is_empty() && r.get("t.add").is_none());
    }

    #[test]
    fn global_registry() {
        register_global(PackedFunc::typed("test.registry.global", || 7i64), true).unwrap();
        let f = get_global("test.registry.global").unwrap();
        assert_eq!(f.call(&mut CallCtx::detached(), &[]).unwrap().as_int().unwrap(), 7);
        assert_eq!(
            format!("{:?}", get_global("test.registry.nothing").expect_err("an error")),
            r#"UnknownFunction("test.registry.nothing")"#
        );
    }
}
