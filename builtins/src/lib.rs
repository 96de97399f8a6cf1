//! # relaxvm-builtins
//!
//! The `vm.builtin.*` and `vm.op.*` packed-function library of relaxvm, with Apache TVM's
//! Relax VM names and argument conventions:
//!
//! | module | builtins |
//! |---|---|
//! | [`shape_heap`] | `alloc_shape_heap`, `shape_of`, `store_shape`, `load_shape`, `match_shape`, `make_shape`, `match_prim_value`, `make_prim_value`, `tensor_to_shape` |
//! | [`checks`] | `check_tensor_info`, `check_shape_info`, `check_tuple_info`, `check_prim_value_info`, `check_func_info` |
//! | [`memory`] | `alloc_storage`, `alloc_tensor`, `reshape`, `copy`, `move`, `null_value`, `ensure_zero_offset`, `to_device` |
//! | [`data`] | `make_tuple`, `tuple_getitem`, `read_if_cond`, `print`, `make_closure`, `invoke_closure` |
//! | [`scalar`] | `vm.builtin.int.*`, `vm.builtin.float.*` |
//! | [`tensor_ops`] | `vm.op.{add,sub,mul,div,maximum,minimum,neg,exp,sqrt,relu,sum,matmul}` |
//! | [`tvm_compat`] | `tuple_reset_item`, `call_tir_dyn`, `memory_manager.clear`, `check_string_info`, `invoke_debug_func` |
//! | [`relax_run`] | `relax.run.{nonzero,unique,shape_to_tensor,print,assert_op}` |
//! | [`paged_kv_cache`] | `paged_attention_kv_cache_create`, `kv_state_{add_sequence,remove_sequence,fork_sequence,popn,clear,begin_forward,end_forward}`, `attention_kv_cache_*` (attention, queries, token trees, checkpoints, `debug_get_kv`) |
//! | [`attention_kv_cache`] | `attention_kv_cache_{create,append,update,view,window_override,window_override_with_sinks,array_popn,array_clear}` (TVM's legacy KV cache) |
//! | [`lm_support`] | `sample_top_p_from_logits`, `sample_top_p_from_prob`, `multinomial_from_uniform`, `apply_repetition_penalty`, `apply_presence_and_frequency_penalty`, `apply_softmax_with_temperature` |
//! | [`py_funcs`] | `register_py_func`, `get_py_func`, `clear_py_func_registry`, `call_py_func` (TVM's `R.call_py_func`; Rust functions register with [`py_funcs::register_py_func`]) |
//! | [`tensor_cache`] | `tensor_cache.{load,get,update,remove,clear}`, `param_array_from_cache{,_by_name,_by_name_unpacked}` |
//!
//! Install them once per process, then build VMs as usual:
//!
//! ```
//! use relaxvm::{registry, CallCtx, Value};
//! relaxvm_builtins::ensure_registered();
//! let add = registry::get_global("vm.builtin.int.add").unwrap();
//! let sum = add.call(&mut CallCtx::detached(), &[Value::Int(2), Value::Int(3)]).unwrap();
//! assert_eq!(sum.as_int().unwrap(), 5);
//! ```
//!
//! Or fill a registry value of your own with [`register_all`].
//!
//! The default feature `json` (serde_json) is what `vm.builtin.tensor_cache.load` (the
//! `tensor-cache.json` index) and `vm.builtin.attention_kv_cache_prepare_import` (a checkpoint's
//! JSON metadata) need. A build without it compiles no serde; those two builtins stay registered
//! and fail with an error naming the feature.
#![deny(missing_docs)]
// `deny`, not `forbid`: `tensor_ops::float_gemm` alone allows it, to call the `gemm` crate.
#![deny(unsafe_code)]

mod args;
pub mod attention_kv_cache;
pub mod checks;
pub mod contrib_sort;
pub mod data;
#[cfg(not(feature = "json"))]
mod json_absent;
pub mod lm_support;
pub mod memory;
pub mod output;
pub mod paged_kv_cache;
pub mod py_funcs;
pub mod relax_run;
pub mod scalar;
pub mod shape_heap;
mod site_alloc;
mod table;
pub mod tensor_cache;
pub mod tensor_ops;
pub mod tvm_compat;

use relaxvm::{Registry, Result};
use std::sync::Once;
use table::Builtin;

/// Every builtin of every module, in registration order.
fn all() -> impl Iterator<Item = &'static Builtin> {
    [
        shape_heap::BUILTINS,
        checks::BUILTINS,
        memory::BUILTINS,
        data::BUILTINS,
        scalar::BUILTINS,
        tensor_ops::BUILTINS,
        tvm_compat::BUILTINS,
        relax_run::BUILTINS,
        tensor_cache::BUILTINS,
        contrib_sort::BUILTINS,
        paged_kv_cache::BUILTINS,
        attention_kv_cache::BUILTINS,
        lm_support::BUILTINS,
        py_funcs::BUILTINS,
    ]
    .into_iter()
    .flatten()
}

/// Registers every builtin in `reg`. A name that `reg` already holds is an error
/// (`AlreadyRegistered`); builtins before it stay registered.
pub fn register_all(reg: &mut Registry) -> Result<()> {
    for b in all() {
        reg.register(b.packed(), false)?;
    }
    Ok(())
}

/// Installs every builtin into the process-wide registry, once; later calls do nothing.
///
/// A name already registered there (e.g. a user's override registered earlier) is kept.
/// Call this before `VirtualMachine::new` so that executables find the builtins.
pub fn ensure_registered() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut reg = relaxvm::registry::global_mut();
        for b in all() {
            if !reg.contains(b.name) {
                // Cannot fail: the name is not registered (checked above, under the lock).
                let _ = reg.register(b.packed(), false);
            }
        }
    });
}

/// The name of every builtin this crate provides, in registration order.
pub fn builtin_names() -> Vec<&'static str> {
    all().map(|b| b.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_registered() {
        let names = builtin_names();
        let unique: HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "duplicate builtin names");
        let mut reg = Registry::new();
        register_all(&mut reg).unwrap();
        assert_eq!(reg.names().collect::<Vec<_>>(), names);
        for n in &names {
            // TVM's names, and relaxvm's own (`relaxvm.`: no TVM runtime registers them).
            let prefixes = ["vm.builtin.", "vm.op.", "relax.run.", "tvm.contrib.sort.", "relaxvm."];
            assert!(prefixes.iter().any(|p| n.starts_with(p)), "{n}");
        }
    }

    #[test]
    fn cost_classes_reach_the_registered_functions() {
        let mut reg = Registry::new();
        register_all(&mut reg).unwrap();
        let constant: Vec<&str> =
            reg.names().filter(|n| reg.get(n).unwrap().cost() == relaxvm::Cost::Constant).collect();
        // Moving values, tuples, closures, the shape heap, the check_*_info family and scalar
        // arithmetic are constant-time; nothing that loops over tensor data or calls back is.
        for n in ["vm.builtin.move", "vm.builtin.shape_of", "vm.builtin.match_shape", "vm.builtin.check_tensor_info"] {
            assert!(constant.contains(&n), "{n} should be constant-time");
        }
        assert!(constant.iter().filter(|n| n.starts_with("vm.builtin.int.")).count() >= 13);
        for n in [
            "vm.op.matmul",
            "vm.op.add",
            "vm.builtin.alloc_storage",
            "vm.builtin.invoke_closure",
            "vm.builtin.call_tir_dyn",
        ] {
            assert_eq!(reg.get(n).unwrap().cost(), relaxvm::Cost::Unbounded, "{n}");
        }
        assert_eq!(constant.len(), 43, "{constant:?}");
    }

    #[test]
    fn register_all_twice_is_an_error() {
        let mut reg = Registry::new();
        register_all(&mut reg).unwrap();
        let e = register_all(&mut reg).unwrap_err().to_string();
        assert!(e.contains("already registered"), "{e}");
    }

    #[test]
    fn ensure_registered_is_idempotent() {
        ensure_registered();
        ensure_registered();
        let reg = relaxvm::registry::global();
        for n in builtin_names() {
            assert!(reg.contains(n), "{n}");
        }
    }
}
