//! Turns fuzz input into a program that passes the verifier, runs it with random arguments,
//! and checks that nothing goes wrong that an error should have reported.
//!
//! Shared by the `interp` fuzz target (`fuzz/fuzz_targets/interp.rs`) and its corpus replay
//! (`builtins/tests/reliability_interp_replay.rs`), which both include this file with
//! `#[path]`, so that a corpus file means the same program in both.
//!
//! A program is one to four bytecode functions calling each other and up to eight builtins,
//! with register, immediate, constant, function, `%void` and `%vm` arguments. Indices and jump
//! targets are drawn inside their ranges, so nearly every input passes the verifier; the few
//! that do not (e.g. a duplicate name) are skipped. Each function is then invoked on one VM
//! (sometimes with an instrument hook that skips or fails calls) with random values: ints,
//! floats, bools, strings, dtypes, devices, shapes, small tensors (some strided or misaligned),
//! storages, tuples, functions and null.
//!
//! Any result and any error is fine. A Rust panic, an abort, a hang (every loop and call is
//! bounded by the step budget and the call-depth limit) or an [`ErrorKind::Panic`] error (a
//! builtin panicked and `PackedFunc::call` caught it) is a failure.

use arbitrary::{Arbitrary, Result, Unstructured};
use relaxvm::{
    registry, Arg, Callable, Closure, DataType, Device, Error, ErrorKind, Executable, ExecutableParts, FuncInfo,
    FuncKind, Instruction, InstrumentAction, Limits, Shape, Storage, Tensor, Value, VirtualMachine,
};
use std::sync::Arc;

/// Bytecode calls and backward jumps one invocation may make.
pub const STEP_BUDGET: u64 = 10_000;
/// The deepest chain of bytecode frames.
pub const MAX_CALL_DEPTH: usize = 256;

/// Builtins the generator does not call: `print` would flood the fuzzer's output.
const SKIPPED: &[&str] = &["vm.builtin.print"];

/// Builtins whose first argument is usually `%vm`.
const TAKES_VM: &[&str] = &["vm.builtin.alloc_storage", "vm.builtin.alloc_shape_heap", "vm.builtin.invoke_closure"];

/// Strings worth passing: dtype names, memory scopes, and a few others.
const STRINGS: &[&str] =
    &["float32", "int64", "int32", "uint8", "bool", "float16", "bfloat16", "float64", "global", "", "shared", "x"];

/// A generated program and the invocations to make.
pub struct Program {
    /// The executable's parts (they may still fail the verifier).
    pub parts: ExecutableParts,
    /// Function names and the arguments to invoke each with, in order.
    pub calls: Vec<(String, Vec<Value>)>,
    /// How an instrument hook treats calls, if one is installed: bit 0 skips every third call,
    /// bit 1 fails every seventh.
    pub instrument: Option<u8>,
}

/// The builtins the generator draws from, by index: a saved input names a builtin by its place
/// in this list, so the list is pinned (not read from `builtin_names()`, whose order moves when a
/// builtin is added) and only ever grows at its end. The replay test
/// `pinned_builtins_match_the_registry` fails when a builtin is registered that the list lacks
/// (append it) or the list names one that is not registered (a removal changes the meaning of
/// saved inputs: regenerate the corpus).
pub const PINNED_BUILTINS: &[&str] = &[
    "vm.builtin.alloc_shape_heap",
    "vm.builtin.shape_of",
    "vm.builtin.store_shape",
    "vm.builtin.load_shape",
    "vm.builtin.match_shape",
    "vm.builtin.make_shape",
    "vm.builtin.match_prim_value",
    "vm.builtin.make_prim_value",
    "vm.builtin.tensor_to_shape",
    "vm.builtin.check_tensor_info",
    "vm.builtin.check_shape_info",
    "vm.builtin.check_tuple_info",
    "vm.builtin.check_prim_value_info",
    "vm.builtin.check_func_info",
    "vm.builtin.alloc_storage",
    "vm.builtin.alloc_tensor",
    "vm.builtin.reshape",
    "vm.builtin.copy",
    "vm.builtin.move",
    "vm.builtin.null_value",
    "vm.builtin.ensure_zero_offset",
    "vm.builtin.to_device",
    "vm.builtin.make_tuple",
    "vm.builtin.tuple_getitem",
    "vm.builtin.read_if_cond",
    "vm.builtin.make_closure",
    "vm.builtin.invoke_closure",
    "vm.builtin.int.add",
    "vm.builtin.int.sub",
    "vm.builtin.int.mul",
    "vm.builtin.int.floordiv",
    "vm.builtin.int.floormod",
    "vm.builtin.int.min",
    "vm.builtin.int.max",
    "vm.builtin.int.lt",
    "vm.builtin.int.le",
    "vm.builtin.int.gt",
    "vm.builtin.int.ge",
    "vm.builtin.int.eq",
    "vm.builtin.int.ne",
    "vm.builtin.float.add",
    "vm.builtin.float.sub",
    "vm.builtin.float.mul",
    "vm.builtin.float.div",
    "vm.builtin.float.min",
    "vm.builtin.float.max",
    "vm.builtin.float.lt",
    "vm.builtin.float.le",
    "vm.builtin.float.gt",
    "vm.builtin.float.ge",
    "vm.builtin.float.eq",
    "vm.builtin.float.ne",
    "vm.op.add",
    "vm.op.sub",
    "vm.op.mul",
    "vm.op.div",
    "vm.op.maximum",
    "vm.op.minimum",
    "vm.op.neg",
    "vm.op.exp",
    "vm.op.sqrt",
    "vm.op.relu",
    "vm.op.sum",
    "vm.op.matmul",
    "vm.builtin.tuple_reset_item",
    "vm.builtin.call_tir_dyn",
    "vm.builtin.memory_manager.clear",
    "vm.builtin.check_string_info",
    "vm.builtin.invoke_debug_func",
    "relax.run.nonzero",
    "relax.run.unique",
    "relax.run.shape_to_tensor",
    "relax.run.print",
    "relax.run.assert_op",
    "vm.builtin.tensor_cache.load",
    "vm.builtin.tensor_cache.get",
    "vm.builtin.tensor_cache.update",
    "vm.builtin.tensor_cache.remove",
    "vm.builtin.tensor_cache.clear",
    "vm.builtin.param_array_from_cache",
    "vm.builtin.param_array_from_cache_by_name",
    "vm.builtin.param_array_from_cache_by_name_unpacked",
    "tvm.contrib.sort.sort",
    "tvm.contrib.sort.argsort",
    "tvm.contrib.sort.topk",
    "vm.builtin.paged_attention_kv_cache_create",
    "vm.builtin.kv_state_clear",
    "vm.builtin.kv_state_add_sequence",
    "vm.builtin.kv_state_remove_sequence",
    "vm.builtin.kv_state_fork_sequence",
    "vm.builtin.kv_state_popn",
    "vm.builtin.kv_state_begin_forward",
    "vm.builtin.kv_state_end_forward",
    "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq",
    "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes",
    "vm.builtin.attention_kv_cache_empty",
    "vm.builtin.attention_kv_cache_get_num_available_pages",
    "vm.builtin.attention_kv_cache_get_total_sequence_length",
    "vm.builtin.attention_kv_cache_get_sequence_length",
    "vm.builtin.attention_kv_cache_get_query_positions",
    "vm.builtin.attention_kv_cache_debug_get_kv",
    "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
    "vm.builtin.attention_kv_cache_self_attention",
    "vm.builtin.attention_kv_cache_cross_attention",
    "vm.builtin.attention_kv_cache_attention_with_shared_kv",
    "vm.builtin.attention_kv_cache_merge_attn_output_inplace",
    "vm.builtin.attention_kv_cache_get_checkpoint_metadata",
    "vm.builtin.attention_kv_cache_get_layout_hash",
    "vm.builtin.attention_kv_cache_export_page_group",
    "vm.builtin.attention_kv_cache_prepare_import",
    "vm.builtin.attention_kv_cache_import_page_group",
    "vm.builtin.attention_kv_cache_finish_import",
    "vm.builtin.attention_kv_cache_create",
    "vm.builtin.attention_kv_cache_append",
    "vm.builtin.attention_kv_cache_update",
    "vm.builtin.attention_kv_cache_view",
    "vm.builtin.attention_kv_cache_window_override",
    "vm.builtin.attention_kv_cache_window_override_with_sinks",
    "vm.builtin.attention_kv_cache_array_popn",
    "vm.builtin.attention_kv_cache_array_clear",
    "vm.builtin.sample_top_p_from_logits",
    "vm.builtin.sample_top_p_from_prob",
    "vm.builtin.multinomial_from_uniform",
    "vm.builtin.apply_repetition_penalty",
    "vm.builtin.apply_presence_and_frequency_penalty",
    "vm.builtin.apply_softmax_with_temperature",
    "relaxvm.kv_cache.attention_with_fused_qkv_by_row",
    "vm.builtin.register_py_func",
    "vm.builtin.get_py_func",
    "vm.builtin.clear_py_func_registry",
    "vm.builtin.call_py_func",
];

/// Builtins the generator does not call, and why (see [`PINNED_BUILTINS`]).
pub const UNPINNED_BUILTINS: &[&str] = SKIPPED;

/// The builtins the generator draws from: [`PINNED_BUILTINS`].
fn builtins() -> Vec<&'static str> {
    PINNED_BUILTINS.to_vec()
}

/// Decodes `data` into a program and runs it; panics on a failure (see the module docs).
pub fn run(data: &[u8]) {
    run_with(data, |_| {});
}

/// [`run`], showing the VM to `prepare` before the first call (the fuzz target takes its
/// interrupt handle, to stop programs that take too much memory).
pub fn run_with(data: &[u8], prepare: impl FnOnce(&VirtualMachine)) {
    relaxvm_builtins::ensure_registered();
    let Ok(program) = generate(&mut Unstructured::new(data)) else { return };
    let Ok(exe) = Executable::from_parts(program.parts) else { return };
    let mut vm = VirtualMachine::new(Arc::new(exe)).expect("every builtin is registered");
    prepare(&vm);
    *vm.limits_mut() = Limits { step_budget: Some(STEP_BUDGET), max_call_depth: MAX_CALL_DEPTH, ..Limits::default() };
    if let Some(mode) = program.instrument {
        let mut n = 0u64;
        vm.set_instrument(Some(Box::new(move |call| {
            n += 1;
            let _ = (call.name, call.args.len(), call.ret.map(Value::type_name));
            if mode & 2 != 0 && n.is_multiple_of(7) {
                return Err(Error::value("the instrument stops the run"));
            }
            Ok(if mode & 1 != 0 && call.before && n.is_multiple_of(3) {
                InstrumentAction::Skip
            } else {
                InstrumentAction::Continue
            })
        })));
    }
    for (name, args) in &program.calls {
        match vm.invoke(name, args) {
            Ok(v) => {
                // Printing a result must not panic either.
                let _ = (v.to_string(), v.describe());
            }
            Err(e) => {
                let text = e.to_string();
                assert!(
                    !matches!(e.root().kind(), ErrorKind::Panic(_)) && !text.contains("packed function panicked"),
                    "a builtin panicked: {text}"
                );
            }
        }
    }
}

/// Builds a program from `u`.
pub fn generate(u: &mut Unstructured<'_>) -> Result<Program> {
    let names = builtins();
    let n_bytecode = u.int_in_range(1..=4usize)?;
    let mut funcs = Vec::new();
    let mut lens = Vec::new();
    for i in 0..n_bytecode {
        let num_args = u.int_in_range(0..=4u32)?;
        let regs = num_args + u.int_in_range(1..=8u32)?;
        let len = u.int_in_range(1..=24u32)?;
        let param_names = if u.ratio(1, 4)? { (0..num_args).map(|p| format!("p{p}")).collect() } else { Vec::new() };
        funcs.push(FuncInfo {
            name: format!("f{i}"),
            kind: FuncKind::Bytecode,
            num_args,
            register_file_size: regs,
            param_names,
            ..FuncInfo::packed("")
        });
        lens.push(len);
    }
    for _ in 0..u.int_in_range(1..=8usize)? {
        let name = *u.choose(&names)?;
        if !funcs.iter().any(|f| f.name == name) {
            funcs.push(FuncInfo::packed(name));
        }
    }
    let mut constants = Vec::new();
    for _ in 0..u.int_in_range(0..=6usize)? {
        constants.push(value(u, &funcs, 2)?);
    }
    let mut instrs = Vec::new();
    for i in 0..n_bytecode {
        let start = instrs.len() as u32;
        funcs[i].start_instr = start;
        funcs[i].end_instr = start + lens[i];
        for pc in 0..lens[i] {
            let instr = instruction(u, &funcs, &funcs[i], pc, lens[i], constants.len())?;
            instrs.push(instr);
        }
    }
    let mut calls = Vec::new();
    for _ in 0..u.int_in_range(1..=4usize)? {
        let f = &funcs[u.choose_index(n_bytecode)?];
        let mut n = f.num_args as usize;
        if u.ratio(1, 16)? {
            n = u.int_in_range(0..=5)?;
        }
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            args.push(value(u, &funcs, 2)?);
        }
        calls.push((f.name.clone(), args));
    }
    // Drawn last, so that inputs from before it existed still decode to the same program.
    let instrument = if u.ratio(1, 4)? { Some(u.int_in_range(0..=3)?) } else { None };
    Ok(Program { parts: ExecutableParts { funcs, constants, instrs, ..ExecutableParts::default() }, calls, instrument })
}

/// Instruction `pc` of the `len` instructions of bytecode function `f`: registers, constants and
/// functions in range, jumps inside the function, and a last instruction that is `ret` or `goto`.
fn instruction(
    u: &mut Unstructured<'_>,
    funcs: &[FuncInfo],
    f: &FuncInfo,
    pc: u32,
    len: u32,
    n_consts: usize,
) -> Result<Instruction> {
    let regs = f.register_file_size as usize;
    let reg = |u: &mut Unstructured<'_>| Ok(u.choose_index(regs)? as u32);
    let target = |u: &mut Unstructured<'_>| Ok(u.choose_index(len as usize)? as i64 - i64::from(pc));
    let last = pc + 1 == len;
    let kind = if last { u.int_in_range(0..=4u8)? } else { u.int_in_range(0..=11u8)? };
    Ok(match kind {
        0..=3 if last => Instruction::Ret { result: reg(u)? },
        4 if last => Instruction::Goto { offset: target(u)? },
        0 => Instruction::Ret { result: reg(u)? },
        1 => Instruction::Goto { offset: target(u)? },
        2 | 3 => Instruction::If { cond: reg(u)?, false_offset: target(u)? },
        _ => {
            let func = u.choose_index(funcs.len())? as u32;
            let callee = &funcs[func as usize];
            let nargs = match callee.kind {
                FuncKind::Bytecode => callee.num_args as usize,
                FuncKind::Packed => u.int_in_range(0..=5)?,
            };
            let vm_first = callee.kind == FuncKind::Packed
                && nargs > 0
                && u.ratio(if TAKES_VM.contains(&callee.name.as_str()) { 7 } else { 1 }, 8)?;
            let mut args = Vec::with_capacity(nargs);
            for k in 0..nargs {
                args.push(if k == 0 && vm_first { Arg::VmState } else { arg(u, regs, n_consts, funcs.len())? });
            }
            let dst = if u.ratio(7, 8)? { Some(reg(u)?) } else { None };
            Instruction::Call { func, args, dst }
        }
    })
}

/// One argument: mostly registers, else immediates, constants, functions, `%void`, `%vm`.
fn arg(u: &mut Unstructured<'_>, regs: usize, n_consts: usize, n_funcs: usize) -> Result<Arg> {
    Ok(match u.int_in_range(0..=15u8)? {
        0..=7 => Arg::Reg(u.choose_index(regs)? as u32),
        8..=10 => Arg::Imm(int(u)?),
        11 | 12 if n_consts > 0 => Arg::Const(u.choose_index(n_consts)? as u32),
        13 => Arg::Func(u.choose_index(n_funcs)? as u32),
        14 => Arg::Void,
        15 => Arg::VmState,
        _ => Arg::Imm(int(u)?),
    })
}

/// An integer: mostly small, sometimes at the edges of the range.
///
/// Never between 2^16 and 2^40 in magnitude: as a size such a number is an allocation that
/// succeeds and takes gigabytes (a failure of the machine, not of the program), while larger
/// ones fail at once.
fn int(u: &mut Unstructured<'_>) -> Result<i64> {
    Ok(match u.int_in_range(0..=9u8)? {
        0..=6 => u.int_in_range(-2..=16)?,
        7 => u.int_in_range(-300..=300)?,
        8 => *u.choose(&[i64::MIN, i64::MAX, i64::MIN + 1, -1, 255, 256, 1 << 16, 1 << 40, 1 << 62, -(1 << 40)])?,
        _ => {
            let x: i64 = u.arbitrary()?;
            if (1 << 16..1 << 40).contains(&x.unsigned_abs()) {
                x.saturating_mul(1 << 24)
            } else {
                x
            }
        }
    })
}

/// A float: small, special or arbitrary.
fn float(u: &mut Unstructured<'_>) -> Result<f64> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 | 1 => f64::from(u.int_in_range(-8..=8i32)?) / 2.0,
        2 => *u.choose(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, f64::MIN_POSITIVE, f64::MAX, 1e-300])?,
        _ => u.arbitrary()?,
    })
}

/// A random value; `depth` bounds tuple nesting.
pub fn value(u: &mut Unstructured<'_>, funcs: &[FuncInfo], depth: u32) -> Result<Value> {
    Ok(match u.int_in_range(0..=13u8)? {
        0 => Value::Null,
        1 | 2 => Value::Int(int(u)?),
        3 => Value::Float(float(u)?),
        4 => Value::Bool(u.arbitrary()?),
        5 if u.ratio(3, 4)? => Value::str(u.choose(STRINGS)?),
        5 => Value::str(<&str>::arbitrary(u)?),
        6 => Value::DType(*u.choose(&DataType::ALL)?),
        7 => Value::Device(Device::cpu(u.int_in_range(0..=1)?)),
        8 => Value::Shape(shape(u)?),
        9 | 10 => Value::Tensor(tensor(u)?),
        11 if depth > 0 => {
            let n = u.int_in_range(0..=3)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value(u, funcs, depth - 1)?);
            }
            Value::tuple(items)
        }
        12 => Value::Storage(Storage::alloc(u.int_in_range(0..=64)?, Device::cpu(0)).expect("a small allocation")),
        13 if !funcs.is_empty() => function(u, funcs)?,
        _ => Value::Int(int(u)?),
    })
}

/// A function value: a builtin or a bytecode function of the program, maybe with captures.
fn function(u: &mut Unstructured<'_>, funcs: &[FuncInfo]) -> Result<Value> {
    let index = u.choose_index(funcs.len())?;
    let f = &funcs[index];
    let callable = match f.kind {
        FuncKind::Bytecode => Callable::Bytecode { index: index as u32, name: f.name.as_str().into(), program: None },
        FuncKind::Packed => match registry::get_global(&f.name).ok() {
            Some(p) => Callable::Packed(p),
            None => return Ok(Value::Null),
        },
    };
    let mut captured = Vec::new();
    for _ in 0..u.int_in_range(0..=2)? {
        captured.push(Value::Int(int(u)?));
    }
    Ok(Value::Func(Arc::new(Closure { callable, captured })))
}

/// A shape of up to four small dimensions (sometimes negative or huge).
fn shape(u: &mut Unstructured<'_>) -> Result<Shape> {
    let n = u.int_in_range(0..=4)?;
    let mut dims = Vec::with_capacity(n);
    for _ in 0..n {
        dims.push(if u.ratio(1, 16)? { int(u)? } else { u.int_in_range(0..=5)? });
    }
    Ok(Shape::from(dims))
}

/// A small tensor of any dtype: contiguous, or a strided, offset or misaligned view.
fn tensor(u: &mut Unstructured<'_>) -> Result<Tensor> {
    let dtype = *u.choose(&DataType::ALL)?;
    let ndim = u.int_in_range(0..=3)?;
    let mut dims = Vec::with_capacity(ndim);
    for _ in 0..ndim {
        dims.push(u.int_in_range(0..=4i64)?);
    }
    let numel: usize = dims.iter().map(|d| *d as usize).product();
    let size = dtype.itemsize();
    let view = u.int_in_range(0..=7u8)?;
    // Views get spare room: an offset of up to 8 bytes and strides of up to twice the extent.
    let nbytes = numel * size * 2 + 8;
    let mut bytes = vec![0u8; nbytes];
    let fill = u.bytes(nbytes.min(u.len()))?;
    bytes[..fill.len()].copy_from_slice(fill);
    if dtype == DataType::Bool {
        bytes.iter_mut().for_each(|b| *b &= 1);
    }
    let storage = Storage::alloc(nbytes, Device::cpu(0)).expect("a small allocation");
    storage.write(0, &bytes).expect("inside the storage");
    let contiguous = |dims: Vec<i64>| Tensor::from_parts(storage.clone(), 0, dims.into(), None, dtype);
    let t = match view {
        // A strided view: each stride up to twice the contiguous one.
        0 if ndim > 0 => {
            let mut strides = relaxvm::tensor::contiguous_strides(&dims);
            for s in &mut strides {
                *s *= u.int_in_range(1..=2)?;
            }
            Tensor::from_parts(storage.clone(), 0, dims.clone().into(), Some(strides), dtype)
        }
        // An offset view, misaligned when the offset is not a multiple of the item size.
        1 => Tensor::from_parts(storage.clone(), u.int_in_range(1..=8)?, dims.clone().into(), None, dtype),
        _ => contiguous(dims.clone()),
    };
    Ok(t.or_else(|_| contiguous(dims)).expect("the storage holds the contiguous tensor"))
}

/// Deterministic pseudo-random bytes (xorshift): inputs for the generator that need no corpus
/// and no crate.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
