//! The rows of the paged KV cache (`paged_kv_cache`): a cache made with Rust functions standing
//! in for the TIR kernels, driven through a step, a fork, a commit and a checkpoint round trip;
//! each row runs after the ones before it (see the parent module). The kernels' bytes are
//! tested against TVM in tests/test_tvm_paged_kv_cache.py.

use super::{f, func, i, s, Kind, Want};
use crate::common::{call, shape, tensor};
use relaxvm::Value;
use Want::{Err as E, Ok as K};

/// The create call's arguments: 2 layers, 4 query heads, 2 KV heads, head dim 8, float32.
fn create_args(config: &[i64], merges: usize) -> Vec<Value> {
    let tirx = || Value::tuple(vec![s("tirx"), func()]);
    let mut args = vec![shape(config), shape(&[0, 2]), i(4), i(2), i(8), i(8), shape(&[0, 0]), Value::Bool(false)];
    args.extend([i(1), f(1.0), f(10000.0), Value::Null, tensor(&[], vec![0f32]), func(), Value::Null]);
    args.extend((0..7).map(|_| tirx()));
    args.push(Value::tuple(vec![]));
    args.push(Value::tuple((0..merges).map(|_| func()).collect::<Vec<_>>()));
    args.extend((0..4).map(|_| func()));
    args
}

fn zeros(dims: &[i64]) -> Value {
    tensor(dims, vec![0f32; dims.iter().product::<i64>() as usize])
}

pub(super) fn cases() -> Vec<(&'static str, Vec<Value>, Want)> {
    let create = "vm.builtin.paged_attention_kv_cache_create";
    let c = call(create, &create_args(&[4, 64, 16, 16, 0], 2)).unwrap();
    let sw = call(create, &create_args(&[4, 64, 16, 16, 1], 1)).unwrap();
    call("vm.builtin.kv_state_add_sequence", &[sw.clone(), i(0)]).unwrap();
    let n = || Value::Null;
    let cc = || c.clone();
    let q = || zeros(&[3, 4, 8]);
    let kv = || zeros(&[3, 2, 8]);
    let lse = || zeros(&[3, 4]);
    vec![
        // ---- paged_kv_cache ----
        (
            create,
            create_args(&[4, 64, 16, 16, 0], 1),
            K("<relax.vm.PagedAttentionKVCache PagedAttentionKVCache(pages in use 0/5 of 16 tokens, 2 layers, sequences {})>"),
        ),
        (create, create_args(&[4, 64, 16, 0, 0], 1), E(Kind::Value, &["page_size must be between 1"])),
        ("vm.builtin.kv_state_add_sequence", vec![cc(), i(0)], K("None")),
        ("vm.builtin.kv_state_add_sequence", vec![cc(), i(0)], E(Kind::Value, &["sequence 0 is already in the KV cache"])),
        ("vm.builtin.kv_state_add_sequence", vec![i(1), i(0)], E(Kind::Type, &["paged KV cache", "found int 1"])),
        ("vm.builtin.kv_state_begin_forward", vec![cc(), shape(&[0]), shape(&[3]), n()], K("None")),
        ("vm.builtin.kv_state_begin_forward", vec![cc(), shape(&[9]), shape(&[1])], E(Kind::Value, &["sequence 9"])),
        ("vm.builtin.attention_kv_cache_get_query_positions", vec![cc()], K("int32 (3,) [0, 1, 2]")),
        ("vm.builtin.attention_kv_cache_get_query_positions", vec![i(0)], E(Kind::Type, &["paged KV cache"])),
        ("vm.builtin.attention_kv_cache_attention_with_fused_qkv", vec![cc(), i(0), f(0.5), zeros(&[3, 8, 8]), q()], K("None")),
        (
            "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
            vec![cc(), i(0), f(0.5), tensor(&[3, 8, 8], vec![0f64; 192]), q()],
            E(Kind::Value, &["expected dtype float32, found float64"]),
        ),
        ("relaxvm.kv_cache.attention_with_fused_qkv_by_row", vec![cc(), i(0), f(0.5), zeros(&[3, 8, 8]), q()], K("None")),
        (
            "relaxvm.kv_cache.attention_with_fused_qkv_by_row",
            vec![cc(), i(7), f(0.5), zeros(&[3, 8, 8]), q()],
            E(Kind::Value, &["layer 7 is not in this cache's layers 0..2"]),
        ),
        ("vm.builtin.attention_kv_cache_self_attention", vec![cc(), i(0), f(0.5), q(), kv(), kv(), q(), lse()], K("None")),
        (
            "vm.builtin.attention_kv_cache_self_attention",
            vec![cc(), i(0), f(0.5), q(), kv(), kv(), q(), zeros(&[3, 5])],
            E(Kind::Value, &["lse: expected shape (3, 4)"]),
        ),
        ("vm.builtin.attention_kv_cache_cross_attention", vec![cc(), i(1), f(0.5), q(), q(), lse()], K("None")),
        ("vm.builtin.attention_kv_cache_cross_attention", vec![cc(), i(5), f(0.5), q(), q(), lse()], E(Kind::Value, &["layer 5"])),
        ("vm.builtin.attention_kv_cache_attention_with_shared_kv", vec![cc(), i(0), f(0.5), q(), kv(), kv(), q()], K("None")),
        (
            "vm.builtin.attention_kv_cache_attention_with_shared_kv",
            vec![cc(), i(0), f(0.5), q(), kv(), kv(), zeros(&[2, 4, 8])],
            E(Kind::Value, &["output: expected shape (3, 4, 8)"]),
        ),
        (
            "vm.builtin.attention_kv_cache_merge_attn_output_inplace",
            vec![cc(), tensor(&[1], vec![1f32]), tensor(&[1], vec![2f32]), zeros(&[1]), zeros(&[1])],
            K("(float32 (1,) [1], float32 (1,) [2])"),
        ),
        (
            "vm.builtin.attention_kv_cache_merge_attn_output_inplace",
            vec![sw.clone(), zeros(&[1]), zeros(&[1]), zeros(&[1]), zeros(&[1])],
            E(Kind::Value, &["the general attention merge function is not defined"]),
        ),
        ("vm.builtin.attention_kv_cache_debug_get_kv", vec![cc(), i(0), i(0), i(3), zeros(&[2, 3, 2, 8]), zeros(&[2, 3, 2, 8])], K("None")),
        (
            "vm.builtin.attention_kv_cache_debug_get_kv",
            vec![cc(), i(0), i(0), i(4), zeros(&[2, 4, 2, 8]), zeros(&[2, 4, 2, 8])],
            E(Kind::Value, &["start < end <= 3"]),
        ),
        ("vm.builtin.kv_state_popn", vec![cc(), i(0), i(1)], E(Kind::Value, &["sequence 0 is in the running forward step"])),
        ("vm.builtin.kv_state_end_forward", vec![cc()], K("None")),
        ("vm.builtin.kv_state_end_forward", vec![cc(), i(1)], E(Kind::Arity, &["1"])),
        ("vm.builtin.attention_kv_cache_get_sequence_length", vec![cc(), i(0)], K("3")),
        ("vm.builtin.attention_kv_cache_get_sequence_length", vec![cc(), i(9)], E(Kind::Value, &["sequence 9"])),
        ("vm.builtin.attention_kv_cache_get_layout_hash", vec![cc()], K("58ca8b8f48bb6883")),
        ("vm.builtin.attention_kv_cache_get_layout_hash", vec![sw.clone()], E(Kind::Value, &["sliding-window"])),
        ("vm.builtin.attention_kv_cache_get_checkpoint_metadata", vec![cc(), i(1)], E(Kind::Value, &["sequence id 0 only"])),
        ("vm.builtin.attention_kv_cache_export_page_group", vec![cc(), i(0), i(1), zeros(&[1, 1, 2, 2, 16, 8])], K("None")),
        (
            "vm.builtin.attention_kv_cache_export_page_group",
            vec![cc(), i(0), i(2), zeros(&[1, 1, 2, 2, 16, 8])],
            E(Kind::Value, &["group 2 is out of range"]),
        ),
        ("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes", vec![cc(), shape(&[0]), shape(&[-1])], K("None")),
        (
            "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes",
            vec![cc(), shape(&[0]), shape(&[5])],
            E(Kind::Value, &["sequence 0 are already committed"]),
        ),
        ("vm.builtin.attention_kv_cache_empty", vec![cc()], K("False")),
        ("vm.builtin.attention_kv_cache_empty", vec![], E(Kind::Arity, &["1"])),
        ("vm.builtin.attention_kv_cache_get_num_available_pages", vec![cc()], K("5")),
        ("vm.builtin.attention_kv_cache_get_num_available_pages", vec![s("c")], E(Kind::Type, &["found str"])),
        ("vm.builtin.attention_kv_cache_get_total_sequence_length", vec![cc()], K("0")),
        ("vm.builtin.attention_kv_cache_get_total_sequence_length", vec![n()], E(Kind::Type, &["paged KV cache"])),
        ("vm.builtin.kv_state_fork_sequence", vec![cc(), i(0), i(2), i(-1)], K("None")),
        ("vm.builtin.kv_state_fork_sequence", vec![cc(), i(7), i(3), i(-1)], E(Kind::Value, &["cannot fork from sequence 7"])),
        ("vm.builtin.kv_state_popn", vec![cc(), i(0), i(0)], K("None")),
        ("vm.builtin.kv_state_remove_sequence", vec![cc(), i(2)], K("None")),
        ("vm.builtin.kv_state_remove_sequence", vec![cc(), i(2)], E(Kind::Value, &["sequence 2 is not in the KV cache"])),
        ("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq", vec![sw.clone(), i(0), i(8), i(2)], K("None")),
        (
            "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq",
            vec![cc(), i(0), i(8), i(2)],
            E(Kind::Value, &["without sliding-window support"]),
        ),
        ("vm.builtin.attention_kv_cache_get_checkpoint_metadata", vec![sw.clone(), i(0)], E(Kind::Value, &["sliding-window"])),
        ("vm.builtin.attention_kv_cache_prepare_import", vec![cc(), i(0), s("{}")], E(Kind::Value, &["no field"])),
        ("vm.builtin.attention_kv_cache_import_page_group", vec![cc(), i(0), i(0), zeros(&[1, 0, 2, 2, 16, 8])], E(Kind::Value, &["prepare_import first"])),
        ("vm.builtin.attention_kv_cache_finish_import", vec![cc(), i(0)], E(Kind::Value, &["prepare_import first"])),
        ("vm.builtin.kv_state_clear", vec![cc()], K("None")),
        ("vm.builtin.kv_state_clear", vec![cc(), i(0)], E(Kind::Arity, &["1"])),
        // A checkpoint of an empty sequence 0: the metadata, an import of it, zero groups.
        ("vm.builtin.kv_state_add_sequence", vec![cc(), i(0)], K("None")),
        ("vm.builtin.attention_kv_cache_get_checkpoint_metadata", vec![cc(), i(0)], K(METADATA)),
        ("vm.builtin.attention_kv_cache_prepare_import", vec![cc(), i(0), s(METADATA)], K("None")),
        ("vm.builtin.attention_kv_cache_import_page_group", vec![cc(), i(0), i(0), zeros(&[1, 0, 2, 2, 16, 8])], K("None")),
        ("vm.builtin.attention_kv_cache_import_page_group", vec![cc(), i(0), i(1), zeros(&[1, 0, 2, 2, 16, 8])], K("None")),
        ("vm.builtin.attention_kv_cache_finish_import", vec![cc(), i(0)], K("None")),
    ]
}

/// The checkpoint metadata of an empty sequence 0 of the cache above (TVM's keys and order).
const METADATA: &str = concat!(
    r#"{"format_version":1,"cache_type":"relax.vm.PagedAttentionKVCache","page_size":16,"num_laye"#,
    r#"rs":2,"layer_begin":0,"layer_end":2,"num_qo_heads":4,"num_kv_heads":2,"qk_head_dim":8,"v_h"#,
    r#"ead_dim":8,"reserved_num_seqs":4,"num_total_pages":5,"prefill_chunk_size":16,"dtype":"floa"#,
    r#"t32","attn_kinds":["mha","mha"],"rope_mode":"normal","rotary_scale":1.0,"rotary_theta":100"#,
    r#"00.0,"has_rope_ext_factors":false,"support_sliding_window":false,"support_layer_sliding_wi"#,
    r#"ndow":false,"page_group_layout":"1,num_logical_pages,2,num_kv_heads,page_size,qk_head_dim""#,
    r#","layout_hash":"58ca8b8f48bb6883","seq_id":0,"seq_length":0,"logical_pages":[],"groups":[{"#,
    r#""group_index":0,"layer_begin":0,"layer_end":1,"num_logical_pages":0,"dtype":"float32","sha"#,
    r#"pe":[1,0,2,2,16,8],"nbytes":0},{"group_index":1,"layer_begin":1,"layer_end":2,"num_logical"#,
    r#"_pages":0,"dtype":"float32","shape":[1,0,2,2,16,8],"nbytes":0}]}"#,
);
