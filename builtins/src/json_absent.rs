//! The builtins that read JSON, in a build without the `json` feature (an embedder's lean
//! build, which compiles no serde_json): they stay registered under their names, so a program
//! that calls one still loads, and the call fails saying which feature provides it rather than
//! that the function does not exist.

use crate::paged_kv_cache::PagedKvCache;
use relaxvm::{Error, Result, Value};

/// The error of builtin `name`, which reads `what` (JSON).
fn needs_json(name: &str, what: &str) -> Error {
    Error::value(format!(
        "{name} reads {what}, which needs the `json` feature of relaxvm-builtins (a default feature this build \
         turned off): depend on relaxvm-builtins with features = [\"json\"]"
    ))
}

/// `vm.builtin.tensor_cache.load` without the `json` feature.
pub(crate) fn tensor_cache_load(name: &'static str, _args: &[Value]) -> Result<Value> {
    Err(needs_json(name, "the tensor cache's index (tensor-cache.json)"))
}

impl PagedKvCache {
    /// The checkpoint metadata check of `vm.builtin.attention_kv_cache_prepare_import` without
    /// the `json` feature (paged_kv_cache/checkpoint.rs has the one with it).
    pub(crate) fn check_import_metadata(&self, _id: i64, _text: &str) -> Result<i32> {
        Err(needs_json("vm.builtin.attention_kv_cache_prepare_import", "a checkpoint's metadata (JSON)"))
    }
}

#[cfg(test)]
mod tests {
    use relaxvm::{registry, CallCtx, ErrorKind, Value};

    /// Runs only in a build without the `json` feature (scripts/test.sh, lean-runtime section).
    #[test]
    fn the_builtins_that_read_json_are_registered_and_name_the_feature() {
        crate::ensure_registered();
        let load = registry::get_global("vm.builtin.tensor_cache.load").unwrap();
        let args = [Value::Str("weights".into()), Value::Int(1), Value::Int(0)];
        let e = load.call(&mut CallCtx::detached(), &args).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Value(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "vm.builtin.tensor_cache.load reads the tensor cache's index (tensor-cache.json), which needs the `json` \
             feature of relaxvm-builtins (a default feature this build turned off): depend on relaxvm-builtins with \
             features = [\"json\"]"
        );
        // The other tensor cache builtins need no JSON and work.
        let get = registry::get_global("vm.builtin.tensor_cache.get").unwrap();
        assert!(matches!(get.call(&mut CallCtx::detached(), &[Value::Str("w".into())]).unwrap(), Value::Null));
        assert!(registry::get_global("vm.builtin.attention_kv_cache_prepare_import").is_ok());
    }
}
