//! TVM's process-wide tensor cache (`src/runtime/vm/tensor_cache_support.cc`): named tensors,
//! typically a model's weights loaded from a directory written by
//! `tvm.contrib.tvmjs.dump_tensor_cache`, shared by every VM of the process.
//!
//! | builtin | arguments | result |
//! |---|---|---|
//! | `vm.builtin.tensor_cache.load` | `(cache_path, device_type, device_id)` | null; adds every tensor of `cache_path/tensor-cache.json`, replacing same-named ones |
//! | `vm.builtin.tensor_cache.get` | `(name)` | the tensor, or null |
//! | `vm.builtin.tensor_cache.update` | `(name, tensor, [override])` | null; without `override` an existing name is an error |
//! | `vm.builtin.tensor_cache.remove` | `(name)` | null (a missing name is fine) |
//! | `vm.builtin.tensor_cache.clear` | `()` | null |
//! | `vm.builtin.param_array_from_cache` | `(prefix, num_params)` | the tuple `prefix_0 ... prefix_{n-1}`; -1 takes names until one is missing |
//! | `vm.builtin.param_array_from_cache_by_name` | `(names)` | the tuple of the named tensors (`names` a tuple of strings) |
//! | `vm.builtin.param_array_from_cache_by_name_unpacked` | `(name...)` | the same, names as arguments |
//!
//! As in TVM, `load` inserts shard by shard: when a later shard fails to load, the tensors of
//! the earlier ones stay in the cache. The format and what loading checks (among them, what bounds
//! a load's memory by its files' sizes) are described in [`format`] and `layout.rs`. TVM's `param_module_from_cache*` (which return a runtime
//! `Module`) are not provided.

#[cfg(feature = "json")]
mod format;
#[cfg(feature = "json")]
mod layout;
#[cfg(feature = "json")]
mod record;

use crate::args::{self, type_err, value_err};
use crate::table::{builtin, Builtin};
#[cfg(feature = "json")]
use relaxvm::DeviceType;
use relaxvm::{Error, Result, Tensor, Value};
use std::collections::HashMap;
#[cfg(feature = "json")]
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.tensor_cache.load", load),
    builtin!("vm.builtin.tensor_cache.get", get),
    builtin!("vm.builtin.tensor_cache.update", update),
    builtin!("vm.builtin.tensor_cache.remove", remove),
    builtin!("vm.builtin.tensor_cache.clear", clear),
    builtin!("vm.builtin.param_array_from_cache", param_array_from_cache),
    builtin!("vm.builtin.param_array_from_cache_by_name", param_array_from_cache_by_name),
    builtin!("vm.builtin.param_array_from_cache_by_name_unpacked", param_array_from_cache_by_name_unpacked),
];

/// The process-wide cache.
static CACHE: Mutex<Option<HashMap<String, Tensor>>> = Mutex::new(None);

/// The cache, locked. A panic while it was held cannot leave the map half-updated (every
/// update is one map operation), so a poisoned lock is simply taken over.
fn cache() -> MutexGuard<'static, Option<HashMap<String, Tensor>>> {
    CACHE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `f` on the cache's map.
fn with_cache<R>(f: impl FnOnce(&mut HashMap<String, Tensor>) -> R) -> R {
    f(cache().get_or_insert_with(HashMap::new))
}

/// Argument `i` as a string.
fn string<'a>(name: &str, args: &'a [Value], i: usize, what: &str) -> Result<&'a str> {
    match args.get(i) {
        Some(Value::Str(s)) => Ok(s),
        Some(other) => Err(type_err(name, i, what, "str", other)),
        None => Err(Error::arity(name, format!("at least {}", i + 1), args.len())),
    }
}

/// Without the `json` feature, `load` fails naming it (it reads `tensor-cache.json`).
#[cfg(not(feature = "json"))]
use crate::json_absent::tensor_cache_load as load;

/// `load(cache_path, device_type, device_id)`.
#[cfg(feature = "json")]
fn load(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 3)?;
    let dir = Path::new(string(name, args, 0, "cache path")?);
    let device_type = args::int(name, args, 1, "device type")?;
    let device_id = args::int(name, args, 2, "device id")?;
    i32::try_from(device_type)
        .map_err(|_| value_err(name, format!("unsupported device type code {device_type}: only cpu (1) is available")))
        .and_then(|code| DeviceType::from_code(code).map_err(|e| value_err(name, e)))?;
    if i32::try_from(device_id).is_err() || device_id < 0 {
        return Err(value_err(name, format!("invalid device id {device_id}")));
    }
    let meta = format::read_metadata(dir).map_err(|e| value_err(name, e))?;
    let mut seen = format::SeenShards::default();
    for shard in &meta.records {
        let tensors = format::load_shard(dir, shard, &mut seen)
            .map_err(|e| value_err(name, format!("Error when loading parameters from {}: {e}", shard.data_path)))?;
        with_cache(|c| c.extend(tensors));
    }
    Ok(Value::Null)
}

/// `get(name)`: the tensor, or null.
fn get(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    let key = string(name, args, 0, "name")?;
    Ok(with_cache(|c| c.get(key).cloned()).map_or(Value::Null, Value::Tensor))
}

/// `update(name, tensor, [override])`.
fn update(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_range(name, args, 2, 3)?;
    let key = string(name, args, 0, "name")?;
    let t = args::tensor(name, args, 1, "tensor")?;
    let allow_override = args.len() == 3 && args::int(name, args, 2, "override")? != 0;
    with_cache(|c| {
        if !allow_override && c.contains_key(key) {
            return Err(value_err(name, format!("Name {key} already exists in the cache")));
        }
        c.insert(key.to_string(), t.clone());
        Ok(Value::Null)
    })
}

/// `remove(name)`.
fn remove(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    let key = string(name, args, 0, "name")?;
    with_cache(|c| c.remove(key));
    Ok(Value::Null)
}

/// `clear()`.
fn clear(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 0)?;
    with_cache(HashMap::clear);
    Ok(Value::Null)
}

/// `param_array_from_cache(prefix, num_params)`: TVM's loop — `prefix_i` for `i < num_params`,
/// each required; with -1, until the first missing one; any other negative count gives `()`.
fn param_array_from_cache(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let prefix = string(name, args, 0, "prefix")?;
    let n = args::int(name, args, 1, "num_params")?;
    with_cache(|c| {
        let mut out = Vec::new();
        let mut i = 0i64;
        while i < n || n == -1 {
            let key = format!("{prefix}_{i}");
            match c.get(&key) {
                Some(t) => out.push(Value::Tensor(t.clone())),
                None if n == -1 => break,
                None => return Err(value_err(name, format!("Cannot find {key} in cache"))),
            }
            i += 1;
        }
        Ok(Value::tuple(out))
    })
}

/// The named tensors, as a tuple; a missing one is an error.
fn by_names<'a>(name: &str, names: impl Iterator<Item = &'a str>) -> Result<Value> {
    with_cache(|c| {
        names
            .map(|n| {
                c.get(n)
                    .map(|t| Value::Tensor(t.clone()))
                    .ok_or_else(|| value_err(name, format!("Cannot find parameter in cache: {n}")))
            })
            .collect::<Result<Vec<_>>>()
            .map(Value::tuple)
    })
}

/// `param_array_from_cache_by_name(names)`.
fn param_array_from_cache_by_name(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    let items = match &args[0] {
        Value::Tuple(t) => t,
        other => return Err(type_err(name, 0, "names", "tuple of str", other)),
    };
    let names = items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Str(s) => Ok(&**s),
            other => Err(value_err(name, format!("names[{i}]: expected str, found {}", other.describe()))),
        })
        .collect::<Result<Vec<&str>>>()?;
    by_names(name, names.into_iter())
}

/// `param_array_from_cache_by_name_unpacked(name...)`.
fn param_array_from_cache_by_name_unpacked(name: &'static str, args: &[Value]) -> Result<Value> {
    let names = (0..args.len()).map(|i| string(name, args, i, "parameter name")).collect::<Result<Vec<_>>>()?;
    by_names(name, names.into_iter())
}
