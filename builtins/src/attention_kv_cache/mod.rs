//! TVM's legacy attention KV cache (`src/runtime/vm/lm_support.cc`, TVM 0.27): the cache that
//! `tvm.relax.frontend.nn.KVCache` and hand-written Relax programs drive, one object per
//! layer's keys or values.
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.attention_kv_cache_create` | `(init_data, reserve_shape, init_fill_count)` | a new cache holding `init_data`; a fill count `>= 0` replaces the appended count |
//! | `vm.builtin.attention_kv_cache_append` | `(cache, value)` | the cache, `value`'s rows appended (the reserve doubles as needed) |
//! | `vm.builtin.attention_kv_cache_update` | `(cache, value)` | the cache, its filled rows overwritten by `value` |
//! | `vm.builtin.attention_kv_cache_view` | `(cache[, shape])` | the filled rows as a tensor sharing the cache's memory |
//! | `vm.builtin.attention_kv_cache_window_override` | `(cache, value, max_cache_size)` | the cache, `value` written at the window position, wrapping to row 0 |
//! | `vm.builtin.attention_kv_cache_window_override_with_sinks` | `(cache, value, max_cache_size, num_attention_sinks)` | the same, wrapping to row `num_attention_sinks` |
//! | `vm.builtin.attention_kv_cache_array_popn` | `(caches, n)` | null; each cache forgets its last `n` entries |
//! | `vm.builtin.attention_kv_cache_array_clear` | `(caches)` | null; each cache is emptied |
//!
//! Where TVM reads or writes outside the cache (a fill count past the reserve, a window larger
//! than the reserve, a shape of another rank, a negative count) relaxvm refuses the call, and
//! every refusal leaves the caches as they were: the array builtins check every cache before
//! changing any (see `cache` for the rest).

use crate::args::{self, type_err};
use crate::table::{builtin, Builtin};
use relaxvm::{Error, Result, Value};
use std::collections::HashMap;
use std::sync::Arc;

mod cache;

pub use cache::LegacyKvCache;

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.attention_kv_cache_create", create),
    builtin!("vm.builtin.attention_kv_cache_append", append),
    builtin!("vm.builtin.attention_kv_cache_update", update),
    builtin!("vm.builtin.attention_kv_cache_view", view),
    builtin!("vm.builtin.attention_kv_cache_window_override", window_override),
    builtin!("vm.builtin.attention_kv_cache_window_override_with_sinks", window_override_with_sinks),
    builtin!("vm.builtin.attention_kv_cache_array_popn", array_popn),
    builtin!("vm.builtin.attention_kv_cache_array_clear", array_clear),
];

/// A cache as a VM value: a named object, which prints (and `repr`s) as its state.
pub fn cache_value(cache: LegacyKvCache) -> Value {
    Value::named(Arc::new(cache))
}

/// The cache a value holds, or `None` for any other value.
pub fn as_cache(v: &Value) -> Option<&LegacyKvCache> {
    v.as_named()?.as_any().downcast_ref::<LegacyKvCache>()
}

/// Argument `i` as a cache.
fn cache_arg<'a>(name: &str, args: &'a [Value], i: usize) -> Result<&'a LegacyKvCache> {
    match args.get(i) {
        Some(v) => as_cache(v).ok_or_else(|| type_err(name, i, "cache", "attention_kv_cache (legacy)", v)),
        None => Err(args::missing(name, i, args.len())),
    }
}

/// Argument `i` as a list of caches.
fn caches_arg<'a>(name: &str, args: &'a [Value], i: usize) -> Result<Vec<&'a LegacyKvCache>> {
    let items = match args.get(i) {
        Some(Value::Tuple(items)) => items,
        Some(other) => return Err(type_err(name, i, "caches", "tuple of attention_kv_cache (legacy)", other)),
        None => return Err(args::missing(name, i, args.len())),
    };
    items
        .iter()
        .enumerate()
        .map(|(k, v)| {
            as_cache(v).ok_or_else(|| {
                Error::type_mismatch(
                    format!("attention_kv_cache (legacy) as item {k} of argument {i} (caches) of {name}"),
                    v.describe(),
                )
            })
        })
        .collect()
}

/// `create(init_data, reserve_shape, init_fill_count)`.
fn create(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let init = args::tensor(name, args, 0, "init_data")?;
    let reserve = args::shape(name, args, 1, "reserve_shape")?;
    let fill = args::int(name, args, 2, "init_fill_count")?;
    // TVM takes an `int`: a count outside int32 is not one it could be given.
    let fill = i32::try_from(fill)
        .map_err(|_| args::value_err(name, format!("init_fill_count must fit in int32, found {fill}")))?;
    let cache = LegacyKvCache::create(init, reserve, i64::from(fill)).map_err(|e| args::in_builtin(name, e))?;
    Ok(cache_value(cache))
}

/// `append(cache, value)`: returns the cache.
fn append(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let cache = cache_arg(name, args, 0)?;
    let value = args::tensor(name, args, 1, "value")?;
    cache.append(value).map_err(|e| args::in_builtin(name, e))?;
    Ok(args[0].clone())
}

/// `update(cache, value)`: returns the cache.
fn update(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let cache = cache_arg(name, args, 0)?;
    let value = args::tensor(name, args, 1, "value")?;
    cache.update(value).map_err(|e| args::in_builtin(name, e))?;
    Ok(args[0].clone())
}

/// `view(cache[, shape])`.
fn view(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 1, 2)?;
    let cache = cache_arg(name, args, 0)?;
    let shape = if args.len() == 2 { Some(args::shape(name, args, 1, "shape")?) } else { None };
    Ok(Value::Tensor(cache.view(shape).map_err(|e| args::in_builtin(name, e))?))
}

/// `window_override(cache, value, max_cache_size)`.
fn window_override(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    windowed(name, args, 0)
}

/// `window_override_with_sinks(cache, value, max_cache_size, num_attention_sinks)`.
fn window_override_with_sinks(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 4)?;
    let sinks = args::int(name, args, 3, "num_attention_sinks")?;
    windowed(name, args, sinks)
}

fn windowed(name: &'static str, args: &[Value], sinks: i64) -> Result<Value> {
    let cache = cache_arg(name, args, 0)?;
    let value = args::tensor(name, args, 1, "value")?;
    let max = args::int(name, args, 2, "max_cache_size")?;
    cache.window_override(value, max, sinks).map_err(|e| args::in_builtin(name, e))?;
    Ok(args[0].clone())
}

/// `array_popn(caches, n)`: every cache is checked before any changes.
fn array_popn(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let caches = caches_arg(name, args, 0)?;
    let n = args::int(name, args, 1, "n")?;
    // A cache listed twice loses `n` entries twice (as in TVM): check the total per cache,
    // counting each cache's occurrences once (linear in the list: attack finding sampling/02).
    let mut times: HashMap<*const LegacyKvCache, (usize, i64)> = HashMap::with_capacity(caches.len());
    for (k, c) in caches.iter().enumerate() {
        times.entry(*c as *const LegacyKvCache).or_insert((k, 0)).1 += 1;
    }
    let mut firsts: Vec<(usize, i64)> = times.into_values().collect();
    firsts.sort_unstable();
    for (k, count) in firsts {
        caches[k]
            .check_popn(n.saturating_mul(count))
            .map_err(|e| args::in_builtin(name, e.context(&format!("cache {k}"))))?;
    }
    for c in caches {
        c.popn(n)?;
    }
    Ok(Value::Null)
}

/// `array_clear(caches)`.
fn array_clear(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    for c in caches_arg(name, args, 0)? {
        c.clear();
    }
    Ok(Value::Null)
}

#[cfg(test)]
mod tests;
