//! Table-driven robustness over every builtin: wrong argument counts, wrong types and extreme
//! values give errors — never panics (which `PackedFunc::call` would report as
//! `ErrorKind::Panic`, and which this test treats as failures).

use crate::common::{assert_clean_err, call, shape, show, tensor};
use relaxvm::{CallCtx, DataType, Device, ErrorKind, PackedFunc, Storage, Tensor, Value};
use relaxvm_builtins::builtin_names;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The process-wide tables (the tensor cache and `call_py_func`'s table) are shared by every
/// test of this binary. The tensor cache: the fuzz below
/// inserts (`update` with pool strings as names), removes and clears entries, while the error
/// table's rows read what their earlier rows stored, and `wrong_types_are_errors_naming_the_builtin`
/// expects `param_array_from_cache_by_name_unpacked("x")` to miss. Every test calling a cache
/// builtin holds this lock while it does, and the fuzz empties the tables before releasing it.
pub(crate) fn process_table_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// True for the builtins that read or change the process-wide tensor cache, or the
/// process-wide table of `call_py_func` (whose error-table rows likewise read what earlier rows
/// registered): both are guarded by [`process_table_lock`].
pub(crate) fn uses_process_wide_table(name: &str) -> bool {
    name.starts_with("vm.builtin.tensor_cache.")
        || name.starts_with("vm.builtin.param_array_from_cache")
        || name.ends_with("_py_func")
        || name == "vm.builtin.clear_py_func_registry"
}

/// Holds the process-table lock while `name` (a builtin using such a table) is exercised; on
/// drop, empties both tables of whatever the random arguments stored.
struct ProcessTableGuard(Option<MutexGuard<'static, ()>>);

impl ProcessTableGuard {
    fn for_builtin(name: &str) -> Self {
        ProcessTableGuard(uses_process_wide_table(name).then(process_table_lock))
    }
}

impl Drop for ProcessTableGuard {
    fn drop(&mut self) {
        if self.0.is_some() {
            // Not `expect`: a panic here, while a failed assertion unwinds, would abort.
            let _ = call("vm.builtin.tensor_cache.clear", &[]);
            let _ = call("vm.builtin.clear_py_func_registry", &[]);
        }
    }
}

/// How many arguments each builtin takes: `(min, max)`, `None` for no maximum; and whether it
/// accepts arguments of any type (so all-string arguments are not an error).
struct Spec {
    name: &'static str,
    min: usize,
    max: Option<usize>,
    any_type: bool,
}

impl Spec {
    /// True when `n` arguments are an allowed count.
    fn accepts(&self, n: usize) -> bool {
        n >= self.min
            && match self.max {
                Some(m) => n <= m,
                None => true,
            }
    }
}

const fn spec(name: &'static str, min: usize, max: Option<usize>) -> Spec {
    Spec { name, min, max, any_type: false }
}

const fn any(name: &'static str, min: usize, max: Option<usize>) -> Spec {
    Spec { name, min, max, any_type: true }
}

const SPECS: &[Spec] = &[
    spec("vm.builtin.alloc_shape_heap", 1, Some(2)),
    spec("vm.builtin.shape_of", 1, Some(1)),
    spec("vm.builtin.store_shape", 2, None),
    spec("vm.builtin.load_shape", 1, None),
    spec("vm.builtin.match_shape", 3, None),
    spec("vm.builtin.make_shape", 2, None),
    spec("vm.builtin.match_prim_value", 4, Some(5)),
    spec("vm.builtin.make_prim_value", 3, Some(3)),
    spec("vm.builtin.tensor_to_shape", 1, Some(1)),
    spec("vm.builtin.check_tensor_info", 3, Some(4)),
    spec("vm.builtin.check_shape_info", 3, Some(3)),
    spec("vm.builtin.check_tuple_info", 3, Some(3)),
    spec("vm.builtin.check_prim_value_info", 3, Some(3)),
    spec("vm.builtin.check_func_info", 2, Some(2)),
    spec("vm.builtin.alloc_storage", 4, Some(5)),
    spec("vm.builtin.alloc_tensor", 4, Some(5)),
    spec("vm.builtin.reshape", 2, Some(2)),
    any("vm.builtin.copy", 1, Some(1)),
    any("vm.builtin.move", 1, Some(1)),
    any("vm.builtin.null_value", 0, Some(0)),
    spec("vm.builtin.ensure_zero_offset", 1, Some(1)),
    spec("vm.builtin.to_device", 3, Some(4)),
    any("vm.builtin.make_tuple", 0, None),
    spec("vm.builtin.tuple_getitem", 2, Some(2)),
    spec("vm.builtin.read_if_cond", 1, Some(1)),
    any("vm.builtin.print", 0, None),
    spec("vm.builtin.make_closure", 1, None),
    spec("vm.builtin.invoke_closure", 2, None),
    spec("vm.builtin.int.add", 2, Some(2)),
    spec("vm.builtin.int.sub", 2, Some(2)),
    spec("vm.builtin.int.mul", 2, Some(2)),
    spec("vm.builtin.int.floordiv", 2, Some(2)),
    spec("vm.builtin.int.floormod", 2, Some(2)),
    spec("vm.builtin.int.min", 2, Some(2)),
    spec("vm.builtin.int.max", 2, Some(2)),
    spec("vm.builtin.int.lt", 2, Some(2)),
    spec("vm.builtin.int.le", 2, Some(2)),
    spec("vm.builtin.int.gt", 2, Some(2)),
    spec("vm.builtin.int.ge", 2, Some(2)),
    spec("vm.builtin.int.eq", 2, Some(2)),
    spec("vm.builtin.int.ne", 2, Some(2)),
    spec("vm.builtin.float.add", 2, Some(2)),
    spec("vm.builtin.float.sub", 2, Some(2)),
    spec("vm.builtin.float.mul", 2, Some(2)),
    spec("vm.builtin.float.div", 2, Some(2)),
    spec("vm.builtin.float.min", 2, Some(2)),
    spec("vm.builtin.float.max", 2, Some(2)),
    spec("vm.builtin.float.lt", 2, Some(2)),
    spec("vm.builtin.float.le", 2, Some(2)),
    spec("vm.builtin.float.gt", 2, Some(2)),
    spec("vm.builtin.float.ge", 2, Some(2)),
    spec("vm.builtin.float.eq", 2, Some(2)),
    spec("vm.builtin.float.ne", 2, Some(2)),
    spec("vm.op.add", 2, Some(2)),
    spec("vm.op.sub", 2, Some(2)),
    spec("vm.op.mul", 2, Some(2)),
    spec("vm.op.div", 2, Some(2)),
    spec("vm.op.maximum", 2, Some(2)),
    spec("vm.op.minimum", 2, Some(2)),
    spec("vm.op.neg", 1, Some(1)),
    spec("vm.op.exp", 1, Some(1)),
    spec("vm.op.sqrt", 1, Some(1)),
    spec("vm.op.relu", 1, Some(1)),
    spec("vm.op.sum", 1, Some(3)),
    spec("vm.op.matmul", 2, Some(2)),
    spec("vm.builtin.tuple_reset_item", 2, Some(2)),
    spec("vm.builtin.call_tir_dyn", 2, None),
    spec("vm.builtin.memory_manager.clear", 0, Some(0)),
    any("vm.builtin.check_string_info", 2, Some(2)),
    spec("vm.builtin.invoke_debug_func", 3, None),
    spec("relax.run.nonzero", 1, Some(1)),
    spec("relax.run.unique", 5, Some(6)),
    spec("relax.run.shape_to_tensor", 1, Some(1)),
    any("relax.run.print", 1, None),
    spec("relax.run.assert_op", 2, None),
    spec("vm.builtin.tensor_cache.load", 3, Some(3)),
    any("vm.builtin.tensor_cache.get", 1, Some(1)),
    spec("vm.builtin.tensor_cache.update", 2, Some(3)),
    any("vm.builtin.tensor_cache.remove", 1, Some(1)),
    spec("vm.builtin.tensor_cache.clear", 0, Some(0)),
    spec("vm.builtin.param_array_from_cache", 2, Some(2)),
    // `any`: its argument is a tuple of names, and the empty tuple (one of the "wrong" values
    // of `wrong_types_are_errors_naming_the_builtin`) is a valid, empty list of names.
    any("vm.builtin.param_array_from_cache_by_name", 1, Some(1)),
    spec("vm.builtin.param_array_from_cache_by_name_unpacked", 0, None),
    spec("vm.builtin.register_py_func", 2, Some(2)),
    spec("vm.builtin.get_py_func", 1, Some(1)),
    spec("vm.builtin.clear_py_func_registry", 0, Some(0)),
    spec("vm.builtin.call_py_func", 1, Some(1)),
    spec("tvm.contrib.sort.sort", 4, Some(4)),
    spec("tvm.contrib.sort.argsort", 4, Some(4)),
    spec("tvm.contrib.sort.topk", 6, Some(7)),
    // ---- paged_kv_cache ----
    spec("vm.builtin.paged_attention_kv_cache_create", 28, Some(29)),
    spec("vm.builtin.kv_state_clear", 1, Some(1)),
    spec("vm.builtin.kv_state_add_sequence", 2, Some(2)),
    spec("vm.builtin.kv_state_remove_sequence", 2, Some(2)),
    spec("vm.builtin.kv_state_fork_sequence", 4, Some(4)),
    spec("vm.builtin.kv_state_popn", 3, Some(3)),
    spec("vm.builtin.kv_state_begin_forward", 3, Some(4)),
    spec("vm.builtin.kv_state_end_forward", 1, Some(1)),
    spec("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq", 4, Some(4)),
    spec("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes", 3, Some(3)),
    spec("vm.builtin.attention_kv_cache_empty", 1, Some(1)),
    spec("vm.builtin.attention_kv_cache_get_num_available_pages", 1, Some(1)),
    spec("vm.builtin.attention_kv_cache_get_total_sequence_length", 1, Some(1)),
    spec("vm.builtin.attention_kv_cache_get_sequence_length", 2, Some(2)),
    spec("vm.builtin.attention_kv_cache_get_query_positions", 1, Some(1)),
    spec("vm.builtin.attention_kv_cache_debug_get_kv", 6, Some(6)),
    spec("vm.builtin.attention_kv_cache_attention_with_fused_qkv", 5, Some(5)),
    spec("relaxvm.kv_cache.attention_with_fused_qkv_by_row", 5, Some(5)),
    spec("vm.builtin.attention_kv_cache_self_attention", 8, Some(8)),
    spec("vm.builtin.attention_kv_cache_cross_attention", 6, Some(6)),
    spec("vm.builtin.attention_kv_cache_attention_with_shared_kv", 7, Some(7)),
    spec("vm.builtin.attention_kv_cache_merge_attn_output_inplace", 5, Some(5)),
    spec("vm.builtin.attention_kv_cache_get_checkpoint_metadata", 2, Some(2)),
    spec("vm.builtin.attention_kv_cache_get_layout_hash", 1, Some(1)),
    spec("vm.builtin.attention_kv_cache_export_page_group", 4, Some(4)),
    spec("vm.builtin.attention_kv_cache_prepare_import", 3, Some(3)),
    spec("vm.builtin.attention_kv_cache_import_page_group", 4, Some(4)),
    spec("vm.builtin.attention_kv_cache_finish_import", 2, Some(2)),
    spec("vm.builtin.attention_kv_cache_create", 3, Some(3)),
    spec("vm.builtin.attention_kv_cache_append", 2, Some(2)),
    spec("vm.builtin.attention_kv_cache_update", 2, Some(2)),
    spec("vm.builtin.attention_kv_cache_view", 1, Some(2)),
    spec("vm.builtin.attention_kv_cache_window_override", 3, Some(3)),
    spec("vm.builtin.attention_kv_cache_window_override_with_sinks", 4, Some(4)),
    spec("vm.builtin.attention_kv_cache_array_popn", 2, Some(2)),
    // `any`: the empty tuple is a valid, empty list of caches.
    any("vm.builtin.attention_kv_cache_array_clear", 1, Some(1)),
    spec("vm.builtin.sample_top_p_from_logits", 4, Some(4)),
    spec("vm.builtin.sample_top_p_from_prob", 3, Some(3)),
    spec("vm.builtin.multinomial_from_uniform", 2, Some(2)),
    spec("vm.builtin.apply_repetition_penalty", 3, Some(3)),
    spec("vm.builtin.apply_presence_and_frequency_penalty", 5, Some(5)),
    spec("vm.builtin.apply_softmax_with_temperature", 2, Some(2)),
];

const MAX_ARGS: usize = 9;

fn spec_of(name: &str) -> &'static Spec {
    SPECS.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name} has no entry in SPECS"))
}

#[test]
fn the_table_covers_every_builtin() {
    let names = builtin_names();
    for n in &names {
        spec_of(n);
    }
    for s in SPECS {
        assert!(names.contains(&s.name), "{} is in SPECS but not a builtin", s.name);
    }
}

/// Every count outside a builtin's range is an arity error naming the builtin.
#[test]
fn wrong_argument_counts_are_arity_errors() {
    for name in builtin_names() {
        let s = spec_of(name);
        let _cache = ProcessTableGuard::for_builtin(name);
        for n in 0..=MAX_ARGS {
            if s.accepts(n) {
                continue;
            }
            for filler in [Value::Null, Value::Int(0), Value::VmState] {
                let args = vec![filler.clone(); n];
                let e = call(name, &args).expect_err("a wrong argument count must fail");
                let msg = e.to_string();
                assert!(matches!(e.kind(), ErrorKind::Arity { .. }), "{name} with {n} args: {msg}");
                assert!(msg.contains(name), "{name}: the error does not name the builtin: {msg}");
            }
        }
    }
}

/// All-string arguments (at every allowed count) are errors that name the builtin, except for
/// the builtins that take any value.
#[test]
fn wrong_types_are_errors_naming_the_builtin() {
    for name in builtin_names() {
        let s = spec_of(name);
        if s.any_type {
            continue;
        }
        let _cache = ProcessTableGuard::for_builtin(name);
        let max = s.max.unwrap_or(MAX_ARGS).min(MAX_ARGS);
        for n in s.min.max(1)..=max {
            for bad in [Value::str("x"), Value::Device(Device::cpu(0)), Value::tuple(vec![])] {
                let args = vec![bad.clone(); n];
                let msg = assert_clean_err(name, &args, call(name, &args));
                assert!(msg.contains(name), "{name}({}): the error does not name the builtin: {msg}", show(&args));
            }
        }
    }
}

/// A pool of ordinary and extreme values the fuzz draws arguments from.
fn pool() -> Vec<Value> {
    let strided = {
        let base = Tensor::from_vec([2, 3], (0..6).map(|x| x as f32).collect::<Vec<_>>()).unwrap();
        Tensor::from_parts(base.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::F32).unwrap()
    };
    let offset = {
        let s = Storage::alloc(64, Device::cpu(0)).unwrap();
        Tensor::from_parts(s, 8, [2, 2].into(), None, DataType::I32).unwrap()
    };
    // Tensors the vm allows but ndarray cannot view: a misaligned offset (also strided).
    let misaligned = Storage::alloc(64, Device::cpu(0)).unwrap();
    let misaligned_flat = Tensor::from_parts(misaligned.clone(), 2, [3].into(), None, DataType::F32).unwrap();
    let misaligned_strided = Tensor::from_parts(misaligned, 2, [2, 2].into(), Some(vec![1, 4]), DataType::F32).unwrap();
    let echo = PackedFunc::from_fn("test.echo", |a| Ok(Value::tuple(a.to_vec())));
    vec![
        Value::Null,
        Value::VmState,
        Value::Int(0),
        Value::Int(1),
        Value::Int(2),
        Value::Int(3),
        Value::Int(-1),
        Value::Int(i64::MIN),
        Value::Int(i64::MAX),
        Value::Int(1 << 40),
        Value::Float(f64::NAN),
        Value::Float(f64::INFINITY),
        Value::Float(-0.0),
        Value::Float(2.5),
        Value::Bool(true),
        Value::str("x"),
        Value::str(""),
        Value::str("float32"),
        Value::str("uint8"),
        Value::str("global"),
        Value::DType(DataType::F16),
        Value::DType(DataType::Bool),
        Value::Device(Device::cpu(0)),
        shape(&[]),
        shape(&[0]),
        shape(&[2, 3]),
        shape(&[6]),
        shape(&[-1]),
        shape(&[1 << 40]),
        shape(&[i64::MAX, 2]),
        shape(&[i64::MIN]),
        tensor(&[2, 3], vec![1.0f32, -2.0, f32::NAN, 4.0, f32::INFINITY, 0.0]),
        tensor(&[3], vec![1.0f32, 2.0, 3.0]),
        tensor(&[], vec![2.0f64]),
        tensor(&[0, 3], Vec::<i32>::new()),
        tensor(&[4], vec![0i64, 1, 2, i64::MAX]),
        tensor(&[2], vec![true, false]),
        tensor(&[1], vec![u64::MAX]),
        tensor(&[2, 1], vec![i8::MIN, i8::MAX]),
        tensor(&[2], vec![half::f16::MAX, half::f16::NAN]),
        tensor(&[3, 2], vec![half::bf16::ONE; 6]),
        Value::Tensor(strided),
        Value::Tensor(misaligned_flat.clone()),
        Value::Tensor(misaligned_strided),
        Value::tuple(vec![Value::Tensor(misaligned_flat.clone())]),
        Value::Tensor(offset),
        Value::tuple(vec![Value::Int(1), Value::Null]),
        Value::tuple(vec![]),
        Value::packed(echo),
        Value::Storage(Storage::alloc(64, Device::cpu(0)).unwrap()),
    ]
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Random argument lists from the pool, every count up to `MAX_ARGS`, for every builtin: any
/// result is fine except a panic.
#[test]
fn random_arguments_never_panic() {
    let pool = pool();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut calls = 0usize;
    for name in builtin_names() {
        let f = crate::common::registry().get(name).unwrap();
        let _cache = ProcessTableGuard::for_builtin(name);
        for n in 0..=MAX_ARGS {
            for _ in 0..150 {
                let args: Vec<Value> = (0..n).map(|_| pool[rng.below(pool.len())].clone()).collect();
                let r = relaxvm_builtins::output::capture(|| f.call(&mut CallCtx::detached(), &args)).0;
                if let Err(e) = &r {
                    assert!(!matches!(e.root().kind(), ErrorKind::Panic(_)), "{name}({}) panicked: {e}", show(&args));
                }
                calls += 1;
            }
        }
    }
    assert!(calls > 50_000, "{calls}");
}

/// Every pair drawn from the pool, for every two-argument builtin (exhaustive, not random).
#[test]
fn every_pair_of_pool_values_is_handled() {
    let pool = pool();
    for name in builtin_names().into_iter().filter(|n| spec_of(n).accepts(2)) {
        let _cache = ProcessTableGuard::for_builtin(name);
        for a in &pool {
            for b in &pool {
                let args = [a.clone(), b.clone()];
                if let Err(e) = call(name, &args) {
                    assert!(!matches!(e.root().kind(), ErrorKind::Panic(_)), "{name}({}) panicked: {e}", show(&args));
                }
            }
        }
    }
}
