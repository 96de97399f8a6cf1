//! The paged KV cache's refusals, each with its whole message: create arguments, forward
//! steps, token trees and their commits, forks, pops and sliding windows, attention arguments,
//! and checkpoints (export and import). The cache runs with Rust stand-ins for the TIR kernels
//! (as in `error_table/kv_rows.rs`); each scenario drives one cache through calls and checks
//! every refusal on the way.

use crate::common::{call, shape, tensor};
use relaxvm::{DataType, ErrorKind, PackedFunc, Result, Storage, Tensor, Value};
use std::sync::{Arc, Mutex};

pub(super) const CREATE: &str = "vm.builtin.paged_attention_kv_cache_create";

pub(super) fn i(v: i64) -> Value {
    Value::Int(v)
}

pub(super) fn s(v: &str) -> Value {
    Value::str(v)
}

/// A kernel stand-in that does nothing.
pub(super) fn func() -> Value {
    Value::packed(PackedFunc::from_fn("test.kernel", |_| Ok(Value::Null)))
}

fn tirx() -> Value {
    Value::tuple(vec![s("tirx"), func()])
}

/// The create call's arguments: 2 layers, 4 query heads, 2 KV heads, head dim 8, float32,
/// normal RoPE; `config` is (reserved_num_seqs, capacity, prefill chunk, page size, sliding).
pub(super) fn create_args(config: &[i64]) -> Vec<Value> {
    let mut args = vec![shape(config), shape(&[0, 2]), i(4), i(2), i(8), i(8), shape(&[0, 0]), Value::Bool(false)];
    args.extend([i(1), Value::Float(1.0), Value::Float(10000.0), Value::Null, tensor(&[], vec![0f32]), func()]);
    args.push(Value::Null);
    args.extend((0..7).map(|_| tirx()));
    args.push(Value::tuple(vec![]));
    args.push(Value::tuple(vec![func()]));
    args.extend((0..4).map(|_| func()));
    args
}

/// `create_args(&[4, 64, 16, 16, 0])` with `changes` applied.
pub(super) fn with(changes: &[(usize, Value)]) -> Vec<Value> {
    let mut args = create_args(&[4, 64, 16, 16, 0]);
    for (k, v) in changes {
        args[*k] = v.clone();
    }
    args
}

pub(super) fn create(args: &[Value]) -> Value {
    call(CREATE, args).unwrap()
}

pub(super) fn zeros(dims: &[i64]) -> Value {
    tensor(dims, vec![0f32; dims.iter().product::<i64>() as usize])
}

pub(super) fn ok(name: &str, args: &[Value]) {
    if let Err(e) = call(name, args) {
        panic!("{name}: {e}");
    }
}

/// Runs a forward step of `lens` tokens for `ids` (and a token tree) and ends it.
fn step(c: &Value, ids: &[i64], lens: &[i64], tree: Option<&[i64]>) {
    let mut args = vec![c.clone(), shape(ids), shape(lens)];
    args.extend(tree.map(shape));
    ok("vm.builtin.kv_state_begin_forward", &args);
    ok("vm.builtin.kv_state_end_forward", std::slice::from_ref(c));
}

/// Collects the mismatches of a scenario: each refusal must be a value error (or `kind`) with
/// exactly this message.
#[derive(Default)]
pub(super) struct Check(Vec<String>);

impl Check {
    pub(super) fn err(&mut self, name: &str, args: &[Value], want: &str) {
        self.result(name, call(name, args), want, |k| matches!(k, ErrorKind::Value(_)));
    }

    fn type_err(&mut self, name: &str, args: &[Value], want: &str) {
        self.result(name, call(name, args), want, |k| matches!(k, ErrorKind::Type { .. }));
    }

    fn result(&mut self, name: &str, r: Result<Value>, want: &str, kind: impl Fn(&ErrorKind) -> bool) {
        match r {
            Ok(v) => self.0.push(format!("{name}: returned {v:?}, expected: {want}")),
            Err(e) if e.to_string() != want || !kind(e.root().kind()) => {
                self.0.push(format!("{name}\n  expected {want}\n  found    {e} ({:?})", e.root().kind()))
            }
            Err(_) => {}
        }
    }

    pub(super) fn done(self) {
        assert!(self.0.is_empty(), "{}", self.0.join("\n"));
    }
}

#[test]
fn create_arguments() {
    let n = |m: &str| format!("{CREATE}: {m}");
    let mut check = Check::default();
    let sliding = {
        let mut a = create_args(&[4, 64, 16, 16, 1]);
        a[18] = Value::tuple(vec![]);
        a
    };
    let cases: Vec<(Vec<Value>, String)> = vec![
        (with(&[(0, shape(&[0, 64, 16, 16, 0]))]), n("reserved_num_seqs must be between 1 and 2147483647, found 0")),
        (with(&[(1, shape(&[2, 1]))]), n("the layer indptr must be (begin, end) with 0 <= begin < end, found (2, 1)")),
        (with(&[(5, i(16))]), n("qk_head_dim (8) and v_head_dim (16) must be equal for MHA caches")),
        (with(&[(6, shape(&[0]))]), n("1 attention kinds for layers up to 2")),
        (with(&[(6, shape(&[0, 5]))]), n("unknown attention kind 5 (expected 0 mha or 3 mha_sliding)")),
        (with(&[(7, i(1))]), n("KV transfer between devices (NVSHMEM) is not supported")),
        (with(&[(8, i(7))]), n("unknown rope mode 7 (expected 0 none, 1 normal, 2 inline)")),
        (with(&[(8, i(0)), (11, zeros(&[4]))]), n("RoPE extension factors need the normal RoPE mode")),
        (with(&[(13, Value::Null)]), n("argument 13 (transpose_append) is required for MHA layers")),
        (with(&[(15, Value::tuple(vec![]))]), n("argument 15 (ragged prefill) is required, found ()")),
        (
            with(&[(15, Value::tuple(vec![i(1), i(2)]))]),
            n("argument 15 (ragged prefill): expected (\"tirx\", function) or (), found (1, 2)"),
        ),
        (with(&[(22, tirx())]), n("MLA prefill (argument 22) is not supported")),
        (sliding, n("sliding windows need the sliding-window prefill and decode kernels (arguments 18, 19)")),
    ];
    for (args, want) in cases {
        check.err(CREATE, &args, &want);
    }
    let t = |expected: &str, i: usize, what: &str, found: &str| {
        format!("type mismatch: expected {expected} as argument {i} ({what}) of {CREATE}, found {found}")
    };
    check.type_err(CREATE, &with(&[(15, i(3))]), &t("(\"tirx\", function) or ()", 15, "ragged prefill", "int 3"));
    check.type_err(
        CREATE,
        &with(&[(23, Value::tuple(vec![]))]),
        &t("a non-empty tuple of functions", 23, "merge functions", "tuple"),
    );
    check.type_err(CREATE, &with(&[(26, i(1))]), &t("function or null", 26, "debug_get_kv", "int 1"));
    check.done();
}

#[test]
fn forward_steps_and_commits() {
    let c = create(&create_args(&[4, 64, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(1)]);
    let begin = "vm.builtin.kv_state_begin_forward";
    let commit = "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes";
    let n = |name: &str, m: &str| format!("{name}: {m}");
    let mut check = Check::default();
    check.err(commit, &[c.clone(), shape(&[0]), shape(&[-1])], &n(commit, "no forward step to commit"));
    let bad: Vec<(Vec<Value>, &str)> = vec![
        (
            vec![shape(&[0, 1]), shape(&[3])],
            "expected as many append lengths as sequence ids, found 2 ids and 1 lengths",
        ),
        (vec![shape(&[]), shape(&[])], "expected at least one sequence in the batch, found none"),
        (
            vec![shape(&[0, 1, 2, 3, 4]), shape(&[1, 1, 1, 1, 1])],
            "the batch has 5 sequences, more than the 4 the KV cache was created for",
        ),
        (vec![shape(&[0, 0]), shape(&[1, 1])], "sequence 0 appears twice in the batch"),
        (vec![shape(&[0]), shape(&[0])], "expected a positive append length for sequence 0, found 0"),
        (
            vec![shape(&[0]), shape(&[17])],
            "the batch appends 17 tokens, more than the prefill chunk size 16 the KV cache was created with",
        ),
        (
            vec![shape(&[0]), shape(&[3]), shape(&[-1, 0, 0, 1])],
            "the token tree has 4 parent pointers, expected one per appended token (3)",
        ),
        (
            vec![shape(&[0]), shape(&[3]), shape(&[-1, 5, 0])],
            "invalid token tree of sequence 0: the parent of node 1 is 5, expected -1 or a node before it",
        ),
    ];
    for (mut args, want) in bad {
        args.insert(0, c.clone());
        check.err(begin, &args, &n(begin, want));
    }
    check.type_err(
        begin,
        &[c.clone(), shape(&[0]), shape(&[1]), i(3)],
        &format!("type mismatch: expected shape or None as argument 3 (token_tree_parent_ptr) of {begin}, found int 3"),
    );

    // A step of two sequences with token trees (branching: not chains), then commits.
    step(&c, &[0, 1], &[3, 2], Some(&[-1, 0, 0, -1, 0]));
    let commits: Vec<(Vec<Value>, &str)> = vec![
        (vec![shape(&[0]), shape(&[1, 2])], "expected as many leaf indices as sequence ids, found 2 and 1"),
        (vec![shape(&[0, 1, 2]), shape(&[-1, -1, -1])], "3 sequences to commit, but the last step had 2"),
        (
            vec![shape(&[1, 0]), shape(&[-1, -1])],
            "the sequences to commit must be the last step's, in its order: position 0 is 1, the step had 0",
        ),
        (
            vec![shape(&[0, 1]), shape(&[5, 0])],
            "invalid tree index 5 for sequence 0: expected -1 to 2 (its token tree's size minus one)",
        ),
        (vec![shape(&[0]), shape(&[2])], "committing token trees needs every sequence of the last step (2), found 1"),
    ];
    for (mut args, want) in commits {
        args.insert(0, c.clone());
        check.err(commit, &args, &n(commit, want));
    }
    // A checkpoint of a sequence whose tree is not committed.
    let meta = "vm.builtin.attention_kv_cache_get_checkpoint_metadata";
    check.err(meta, &[c.clone(), i(0)], &n(meta, "checkpoints need the sequence's token tree committed"));
    ok(commit, &[c.clone(), shape(&[0, 1]), shape(&[2, 1])]);
    check.err(
        commit,
        &[c.clone(), shape(&[0, 1]), shape(&[1, 0])],
        &n(commit, "the accepted nodes of sequence 0 are already committed"),
    );
    // A step, then a pop: the step's positions are stale.
    step(&c, &[0], &[2], None);
    ok("vm.builtin.kv_state_popn", &[c.clone(), i(0), i(1)]);
    check.err(
        commit,
        &[c.clone(), shape(&[0]), shape(&[-1])],
        &n(
            commit,
            "the last step's sequences changed since it ended (popn, fork, remove): its token positions are stale",
        ),
    );
    check.done();
}

#[test]
fn token_trees_need_normal_rope_and_no_sliding_window() {
    let begin = "vm.builtin.kv_state_begin_forward";
    let mut check = Check::default();
    let inline = create(&with(&[(8, i(2))]));
    let sliding = create(&create_args(&[4, 64, 16, 16, 1]));
    for (c, message) in [
        (inline, "token trees are not supported with inline RoPE"),
        (sliding, "token trees are not supported with sliding windows"),
    ] {
        ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
        let args = [c.clone(), shape(&[0]), shape(&[2]), shape(&[-1, 0])];
        check.err(begin, &args, &format!("{begin}: {message}"));
    }
    check.done();
}

#[test]
fn forks_pops_and_sliding_windows() {
    let mut check = Check::default();
    let fork = "vm.builtin.kv_state_fork_sequence";
    let popn = "vm.builtin.kv_state_popn";
    let window = "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq";
    let n = |name: &str, m: &str| format!("{name}: {m}");
    let c = create(&create_args(&[4, 64, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
    step(&c, &[0], &[16], None);
    step(&c, &[0], &[3], None);
    check.err(
        fork,
        &[c.clone(), i(0), i(5), i(99)],
        &n(fork, "fork position 99 is out of range: expected -1 (the end) or 0 to 19 (the length of sequence 0)"),
    );
    // Sequence 1 shares sequence 0's first page (a fork at a page boundary copies nothing);
    // popping 5 tokens reaches 2 of them, which takes temporary id -1, already a sequence.
    ok(fork, &[c.clone(), i(0), i(1), i(16)]);
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(-1)]);
    check.err(
        popn,
        &[c.clone(), i(0), i(5)],
        &n(popn, "cannot pop 2 shared tokens from sequence 0: its temporary id -1 is in use"),
    );

    // A full cache (5 pages of 16 tokens): a fork inside a page needs one more.
    let full = create(&create_args(&[4, 64, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[full.clone(), i(0)]);
    for len in [16, 16, 16, 16, 3] {
        step(&full, &[0], &[len], None);
    }
    check.err(
        fork,
        &[full.clone(), i(0), i(1), i(3)],
        &n(fork, "the KV cache is full: forking sequence 0 at 3 (inside a page) needs a free page"),
    );

    let sw = create(&create_args(&[4, 64, 16, 16, 1]));
    ok("vm.builtin.kv_state_add_sequence", &[sw.clone(), i(0)]);
    check.err(
        window,
        &[sw.clone(), i(0), i(4), i(4)],
        &n(window, "expected 0 <= attention sink size < sliding window size, found sink 4 and window 4"),
    );
    ok(window, &[sw.clone(), i(0), i(8), i(2)]);
    check.err(window, &[sw.clone(), i(0), i(8), i(2)], &n(window, "sequence 0 already has a sliding window"));
    step(&sw, &[0], &[5], None);
    check.err(
        fork,
        &[sw.clone(), i(0), i(1), i(4)],
        &n(
            fork,
            "sequence 0 has a sliding window and can only be forked within its attention sink (2 tokens), not at 4",
        ),
    );
    check.done();
}

/// A float32 `dims` tensor whose storage is read-only (as a constant's is).
pub(super) fn frozen(dims: &[i64]) -> Value {
    let t = zeros(dims);
    t.as_tensor().unwrap().storage().freeze();
    t
}

#[test]
fn attention_arguments() {
    let mut check = Check::default();
    let fused = "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
    let cross = "vm.builtin.attention_kv_cache_cross_attention";
    let debug = "vm.builtin.attention_kv_cache_debug_get_kv";
    let merge = "vm.builtin.attention_kv_cache_merge_attn_output_inplace";
    let n = |name: &str, m: &str| format!("{name}: {m}");
    let c = create(&create_args(&[4, 64, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
    ok("vm.builtin.kv_state_begin_forward", &[c.clone(), shape(&[0]), shape(&[3])]);
    let h = i(0);
    let half = Value::Float(0.5);
    check.err(
        fused,
        &[c.clone(), h.clone(), half.clone(), zeros(&[2, 8, 8]), zeros(&[2, 4, 8])],
        &n(fused, "qkv: expected at least 3 rows (the tokens of this step), found 2"),
    );
    check.err(
        fused,
        &[c.clone(), h.clone(), half.clone(), tensor(&[3, 8, 8], vec![0f64; 192]), zeros(&[3, 4, 8])],
        &n(fused, "qkv: expected dtype float32, found float64"),
    );
    let strided = Tensor::from_parts(
        Storage::from_vec(vec![0f32; 192]),
        0,
        [3, 8, 8].into(),
        Some(vec![1, 3, 24]),
        DataType::F32,
    )
    .unwrap();
    check.err(
        fused,
        &[c.clone(), h.clone(), half.clone(), Value::Tensor(strided), zeros(&[3, 4, 8])],
        &n(fused, "qkv: expected a contiguous tensor, found strides [1, 3, 24]"),
    );
    check.err(
        fused,
        &[c.clone(), h.clone(), half.clone(), zeros(&[3, 8, 8]), frozen(&[3, 4, 8])],
        &n(fused, "output: expected a writable tensor, found read-only memory"),
    );
    check.err(
        cross,
        &[c.clone(), i(5), half.clone(), zeros(&[3, 4, 8]), zeros(&[3, 4, 8]), zeros(&[3, 4])],
        &n(cross, "layer 5 is not in this cache's layers 0..2"),
    );
    ok("vm.builtin.kv_state_end_forward", std::slice::from_ref(&c));
    check.err(
        debug,
        &[c.clone(), i(0), i(0), i(4), zeros(&[2, 4, 2, 8]), zeros(&[2, 4, 2, 8])],
        &n(debug, "expected 0 <= start < end <= 3 (the length of sequence 0), found start 0 and end 4"),
    );
    let one = || zeros(&[1]);
    check.err(
        merge,
        &[c.clone(), one(), one(), one(), one()],
        &n(
            merge,
            "the general attention merge function is not defined: the cache has 1 merge function(s), this needs 2 \
             (TVM passes 2 for GPU MLA caches only)",
        ),
    );

    // Layers with a sliding window (kind 3): no cross attention once pages are cached, no
    // debug_get_kv.
    let sl = create(&with(&[(6, shape(&[3, 3]))]));
    ok("vm.builtin.kv_state_add_sequence", &[sl.clone(), i(0)]);
    step(&sl, &[0], &[3], None);
    ok("vm.builtin.kv_state_begin_forward", &[sl.clone(), shape(&[0]), shape(&[1])]);
    check.err(
        cross,
        &[sl.clone(), i(0), half.clone(), zeros(&[1, 4, 8]), zeros(&[1, 4, 8]), zeros(&[1, 4])],
        &n(cross, "cross attention on layer 0 needs an MHA layer (TVM: the MLA prefill kernel is not defined)"),
    );
    ok("vm.builtin.kv_state_end_forward", std::slice::from_ref(&sl));
    check.err(
        debug,
        &[sl.clone(), i(0), i(0), i(3), zeros(&[2, 3, 2, 8]), zeros(&[2, 3, 2, 8])],
        &n(debug, "debug_get_kv supports MHA layers only"),
    );
    let meta = "vm.builtin.attention_kv_cache_get_checkpoint_metadata";
    check.err(meta, &[sl.clone(), i(0)], &n(meta, "checkpoints support full-context MHA/GQA layers only"));
    check.done();
}

#[test]
fn a_kernel_that_calls_back_into_its_cache() {
    // The kernel reaches its cache through this slot, emptied at the end: the cache holds the
    // kernel, so a kernel holding the cache would be a cycle nothing frees (LeakSanitizer).
    let cache: Arc<Mutex<Option<Value>>> = Arc::new(Mutex::new(None));
    let inner = cache.clone();
    let reentrant = Value::packed(PackedFunc::from_fn("test.reentrant_kernel", move |_| {
        let c = inner.lock().unwrap().clone().expect("the cache is set");
        call("vm.builtin.attention_kv_cache_get_num_available_pages", &[c])
    }));
    let c = create(&with(&[(13, reentrant)]));
    *cache.lock().unwrap() = Some(c.clone());
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
    ok("vm.builtin.kv_state_begin_forward", &[c.clone(), shape(&[0]), shape(&[3])]);
    let fused = "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
    let e = call(fused, &[c, i(0), Value::Float(0.5), zeros(&[3, 8, 8]), zeros(&[3, 4, 8])]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e:?}");
    assert!(
        e.to_string().ends_with(
            "vm.builtin.attention_kv_cache_get_num_available_pages: the paged KV cache is already in use by this call \
             chain (a kernel or callback called back into it)"
        ),
        "{e}"
    );
    cache.lock().unwrap().take();
}

#[test]
fn token_trees_past_their_limits() {
    let begin = "vm.builtin.kv_state_begin_forward";
    let n = |m: &str| format!("{begin}: {m}");
    let mut check = Check::default();
    // Room for 33 pages: 17 uncommitted tree steps of 16 roots reach 272 nodes.
    let c = create(&create_args(&[4, 512, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
    let roots = [-1i64; 16];
    for _ in 0..16 {
        step(&c, &[0], &[16], Some(&roots));
    }
    check.err(
        begin,
        &[c.clone(), shape(&[0]), shape(&[16]), shape(&roots)],
        &n("the token tree of sequence 0 has 272 nodes, more than the limit 256"),
    );
    // A tree of 3 nodes, then 2 of its tokens popped: the tree is longer than the block.
    let d = create(&create_args(&[4, 64, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[d.clone(), i(0)]);
    step(&d, &[0], &[3], Some(&[-1, 0, 0]));
    ok("vm.builtin.kv_state_popn", &[d.clone(), i(0), i(2)]);
    check.err(
        begin,
        &[d.clone(), shape(&[0]), shape(&[1]), shape(&[-1])],
        &n("the token tree of sequence 0 (3 nodes) is longer than its last block (1 tokens)"),
    );
    check.done();
}

/// Refusals of calls out of their order (a step's attention before or after the step, a step or
/// a fork while a token tree waits for its commit), and of checkpoint metadata whose values were
/// changed: each with its whole message.
#[test]
fn calls_out_of_order_and_changed_checkpoints() {
    let mut check = Check::default();
    let n = |name: &str, m: &str| format!("{name}: {m}");
    check.err(
        CREATE,
        &with(&[(6, shape(&[0, 2]))]),
        &n(CREATE, "linear-attention layers are not supported (TVM does not implement them)"),
    );
    let c = create(&create_args(&[4, 64, 16, 16, 0]));
    ok("vm.builtin.kv_state_add_sequence", &[c.clone(), i(0)]);
    let positions = "vm.builtin.attention_kv_cache_get_query_positions";
    let want = "no forward step: call vm.builtin.kv_state_begin_forward first";
    check.err(positions, std::slice::from_ref(&c), &n(positions, want));
    // The step's attention after the step ended.
    step(&c, &[0], &[3], None);
    let fused = "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
    let args = [c.clone(), i(0), Value::Float(0.5), zeros(&[3, 8, 8]), zeros(&[3, 4, 8])];
    check.err(fused, &args, &n(fused, "the forward step has ended: call vm.builtin.kv_state_begin_forward first"));

    // A token tree left uncommitted: no step without a tree, no fork.
    step(&c, &[0], &[2], Some(&[-1, 0]));
    let begin = "vm.builtin.kv_state_begin_forward";
    check.err(
        begin,
        &[c.clone(), shape(&[0]), shape(&[1])],
        &n(
            begin,
            "sequence 0 has an uncommitted token tree: call commit_accepted_token_tree_nodes before a step without a tree",
        ),
    );
    let fork = "vm.builtin.kv_state_fork_sequence";
    check.err(
        fork,
        &[c.clone(), i(0), i(1), i(-1)],
        &n(
            fork,
            "cannot fork from sequence 0: the token tree of its last step is not committed (call commit_accepted_token_tree_nodes)",
        ),
    );
    let commit = "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes";
    ok(commit, &[c.clone(), shape(&[0]), shape(&[1])]);

    // Checkpoint metadata of sequence 0 (5 tokens: 1 page of 16), changed one field at a time.
    let meta = call("vm.builtin.attention_kv_cache_get_checkpoint_metadata", &[c.clone(), i(0)]).unwrap();
    let Value::Str(meta) = &meta else { panic!("metadata: {meta:?}") };
    let meta = meta.to_string();
    assert!(meta.contains("\"seq_length\":5,"), "{meta}");
    let prepare = "vm.builtin.attention_kv_cache_prepare_import";
    for (from, to, want) in [
        ("\"seq_length\":5,", "\"seq_length\":-1,", "checkpoint seq_length -1 is out of range"),
        ("\"shape\":[1,1,2,2,16,8]", "\"shape\":[1,1,2,2,16,9]", "page group 0: expected shape [1,1,2,2,16,8]"),
    ] {
        assert!(meta.contains(from), "{from} not in {meta}");
        let changed = meta.replacen(from, to, 1);
        check.err(prepare, &[c.clone(), i(0), Value::str(&changed)], &n(prepare, want));
    }
    check.done();
}
