//! TVM's paged KV cache (`vm.builtin.paged_attention_kv_cache_create` and the `kv_state_*`,
//! `attention_kv_cache_*` builtins it answers), for the CPU's TIR kernels: the page table and
//! the step arrays computed in Rust as TVM computes them, the attention kernels called from the
//! model's library with TVM's arguments in TVM's order, so that outputs are bit-identical to
//! TVM's. See `docs/kv-cache.md` for the names, what each does, and what is not supported.
//!
//! Files: `create.rs` (the create call's arguments), `pool.rs` (pages, blocks, sequences),
//! `forward.rs` (a step's arrays), `tree.rs` (token trees), `cache.rs` (the object and its lock),
//! `attention.rs` (kernel calls), `sliding_rows.rs` (rows TVM's sliding kernel left NaN), `checkpoint.rs` (export and import of a sequence).

mod attention;
mod cache;
mod checkpoint;
mod checks;
mod create;
mod forward;
mod kernel;
mod packed;
mod pool;
mod sliding_mask;
mod sliding_rows;
mod stale_max;
mod tree;

pub use cache::PagedKvCache;

use crate::args::{arity, arity_range, int, shape, tensor, type_err, value_err};
use crate::table::{builtin, Builtin};
use cache::Step;
use relaxvm::{CallCtx, Result, Value};
use std::sync::Arc;

/// The builtins of this module.
pub(crate) static BUILTINS: &[Builtin] = &[
    builtin!("vm.builtin.paged_attention_kv_cache_create", create_cache),
    builtin!("vm.builtin.kv_state_clear", clear),
    builtin!("vm.builtin.kv_state_add_sequence", add_sequence),
    builtin!("vm.builtin.kv_state_remove_sequence", remove_sequence),
    builtin!("vm.builtin.kv_state_fork_sequence", ctx fork_sequence),
    builtin!("vm.builtin.kv_state_popn", ctx popn),
    builtin!("vm.builtin.kv_state_begin_forward", begin_forward),
    builtin!("vm.builtin.kv_state_end_forward", end_forward),
    builtin!("vm.builtin.attention_kv_cache_enable_sliding_window_for_seq", enable_sliding_window),
    builtin!("vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes", ctx commit_accepted),
    builtin!("vm.builtin.attention_kv_cache_empty", empty),
    builtin!("vm.builtin.attention_kv_cache_get_num_available_pages", num_available_pages),
    builtin!("vm.builtin.attention_kv_cache_get_total_sequence_length", total_sequence_length),
    builtin!("vm.builtin.attention_kv_cache_get_sequence_length", sequence_length),
    builtin!("vm.builtin.attention_kv_cache_get_query_positions", query_positions),
    builtin!("vm.builtin.attention_kv_cache_debug_get_kv", ctx debug_get_kv),
    builtin!("vm.builtin.attention_kv_cache_attention_with_fused_qkv", ctx attention_with_fused_qkv),
    builtin!("relaxvm.kv_cache.attention_with_fused_qkv_by_row", ctx attention_with_fused_qkv_by_row),
    builtin!("vm.builtin.attention_kv_cache_self_attention", ctx self_attention),
    builtin!("vm.builtin.attention_kv_cache_cross_attention", ctx cross_attention),
    builtin!("vm.builtin.attention_kv_cache_attention_with_shared_kv", ctx attention_with_shared_kv),
    builtin!("vm.builtin.attention_kv_cache_merge_attn_output_inplace", ctx merge_attn_output_inplace),
    builtin!("vm.builtin.attention_kv_cache_get_checkpoint_metadata", checkpoint_metadata),
    builtin!("vm.builtin.attention_kv_cache_get_layout_hash", layout_hash),
    builtin!("vm.builtin.attention_kv_cache_export_page_group", export_page_group),
    builtin!("vm.builtin.attention_kv_cache_prepare_import", prepare_import),
    builtin!("vm.builtin.attention_kv_cache_import_page_group", import_page_group),
    builtin!("vm.builtin.attention_kv_cache_finish_import", finish_import),
];

/// Argument 0 as a paged KV cache.
fn the_cache<'a>(name: &str, args: &'a [Value]) -> Result<&'a PagedKvCache> {
    let v = args.first().ok_or_else(|| crate::args::missing(name, 0, 0))?;
    v.as_named().and_then(|n| n.as_any().downcast_ref::<PagedKvCache>()).ok_or_else(|| {
        type_err(name, 0, "cache", "a paged KV cache (from vm.builtin.paged_attention_kv_cache_create)", v)
    })
}

fn in_name(name: &str) -> impl Fn(relaxvm::Error) -> relaxvm::Error + '_ {
    move |e| e.context(name)
}

fn create_cache(name: &'static str, args: &[Value]) -> Result<Value> {
    let (cfg, kernels) = create::parse(name, args)?;
    let cache = PagedKvCache::new(cfg, kernels).map_err(in_name(name))?;
    Ok(Value::named(Arc::new(cache)))
}

fn clear(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 1)?;
    let c = the_cache(name, args)?;
    let mut st = c.lock(name)?;
    st.pool.clear();
    st.step = None;
    st.import = None;
    Ok(Value::Null)
}

fn add_sequence(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 2)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let mut st = c.lock(name)?;
    st.pool.add(id).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn remove_sequence(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 2)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let mut st = c.lock(name)?;
    st.guard_step(id, name)?;
    st.pool.remove(id).map_err(in_name(name))?;
    st.touched(id);
    Ok(Value::Null)
}

fn fork_sequence(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 4)?;
    let c = the_cache(name, args)?;
    let parent = int(name, args, 1, "parent seq_id")?;
    let child = int(name, args, 2, "child seq_id")?;
    let pos = int(name, args, 3, "fork position")?;
    let mut st = c.lock(name)?;
    st.guard_step(parent, name)?;
    c.transact(&mut st, |st| {
        let copy = st.pool.fork(parent, child, pos)?;
        c.run_copy(ctx, copy)
    })
    .map_err(in_name(name))?;
    st.touched(parent);
    Ok(Value::Null)
}

fn popn(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 3)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let n = int(name, args, 2, "n")?;
    let mut st = c.lock(name)?;
    st.guard_step(id, name)?;
    if st.pool.pop_is_unshared(id, n) {
        // The common pop (an engine's rollback of its last tokens): nothing to undo. Should
        // `pop_is_unshared` ever disagree with `popn`, the copy still runs (review R-kv-2):
        // only the undo on a failure is lost, never the copy.
        let copy = st.pool.popn(id, n).map_err(in_name(name))?;
        c.run_copy(ctx, copy).map_err(in_name(name))?;
    } else {
        c.transact(&mut st, |st| {
            let copy = st.pool.popn(id, n)?;
            c.run_copy(ctx, copy)
        })
        .map_err(in_name(name))?;
    }
    st.touched(id);
    Ok(Value::Null)
}

fn begin_forward(name: &'static str, args: &[Value]) -> Result<Value> {
    arity_range(name, args, 3, 4)?;
    let c = the_cache(name, args)?;
    let ids: &[i64] = shape(name, args, 1, "seq_ids")?;
    let lens: &[i64] = shape(name, args, 2, "append_lengths")?;
    let token_tree: Option<Vec<i64>> = match args.get(3) {
        None | Some(Value::Null) => None,
        Some(Value::Shape(s)) => Some(s.to_vec()),
        Some(other) => return Err(type_err(name, 3, "token_tree_parent_ptr", "shape or None", other)),
    };
    let limits = c.limits();
    let mut st = c.lock(name)?;
    if st.import.is_some() {
        return Err(value_err(name, "a checkpoint import is in progress: finish it before a forward step"));
    }
    forward::check(&st.pool, ids, lens, &limits).map_err(in_name(name))?;
    // The last step's arrays are refilled when the new ones have their layout, and the plan
    // before it lends its buffers (a refused step leaves the last one in place: a commit may
    // still read it).
    // The new step is written into the state where it lives, once nothing can fail: a step
    // (the plan and its arrays, several hundred bytes) is not moved out through the
    // transaction's result (perf: that move was a `memmove` per step).
    c.transact(&mut st, |st| {
        let spare = st.spare_plan.take();
        let plan = forward::begin(&mut st.pool, ids, lens, token_tree.as_deref(), &limits, spare)?;
        if let Some(last) = st.step.as_mut() {
            if c.refill_aux(&plan, &mut last.aux)? {
                let old = std::mem::replace(&mut last.plan, plan);
                (last.ended, last.stale) = (false, false);
                st.spare_plan = Some(old);
                return Ok(());
            }
        }
        let aux = c.aux_tensors(&plan)?;
        if let Some(old) = st.step.replace(Step { plan, aux, ended: false, stale: false }) {
            st.spare_plan = Some(old.plan);
        }
        Ok(())
    })
    .map_err(in_name(name))?;
    Ok(Value::Null)
}

fn end_forward(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 1)?;
    let c = the_cache(name, args)?;
    let mut st = c.lock(name)?;
    if let Some(s) = st.step.as_mut() {
        s.ended = true;
    }
    Ok(Value::Null)
}

fn enable_sliding_window(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 4)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let window = int(name, args, 2, "sliding_window_size")?;
    let sink = int(name, args, 3, "attn_sink_size")?;
    let mut st = c.lock(name)?;
    st.guard_step(id, name)?;
    st.pool.enable_sliding_window(id, window, sink).map_err(in_name(name))?;
    st.touched(id);
    Ok(Value::Null)
}

/// Keeps the accepted path of each sequence's token tree (`-1`: none) and pops the rest of
/// the last step's tokens; without trees (leaf -1) this pops what the last step appended (TVM's
/// behaviour). The pops apply to the last step's sequences in its order, as in TVM.
fn commit_accepted(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 3)?;
    let c = the_cache(name, args)?;
    let ids = shape(name, args, 1, "seq_ids")?.to_vec();
    let leaves = shape(name, args, 2, "leaf_indices")?.to_vec();
    let mut st = c.lock(name)?;
    let Some(step) = st.step.as_ref() else {
        return Err(value_err(name, "no forward step to commit"));
    };
    if step.stale {
        return Err(value_err(
            name,
            "the last step's sequences changed since it ended (popn, fork, remove): its token positions are stale",
        ));
    }
    let p = &step.plan;
    let commit = tree::plan_commit(
        &st.pool,
        &ids,
        &leaves,
        &p.seq_ids,
        &p.append_lengths,
        &p.append_position_map,
        &p.cur_append_length_indptr,
    )
    .map_err(in_name(name))?;
    let batch = p.seq_ids.len() as i64;
    c.transact(&mut st, |st| {
        if let Some((indptr, src, dst)) = &commit.copies {
            if indptr.last().is_some_and(|&n| n > 0) {
                let src_dst = relaxvm::Tensor::from_vec(
                    relaxvm::Shape::from(vec![2, src.len() as i64]),
                    src.iter().chain(dst).copied().collect::<Vec<i32>>(),
                )?;
                let indptr = cache::int_tensor(indptr)?;
                for page in &c.pages {
                    let args = [page.clone(), indptr.clone(), Value::Tensor(src_dst.clone()), Value::Int(batch)];
                    kernel::call_kernel(ctx, &c.kernels.compact_copy, "compact_copy", &args)?;
                }
            }
        }
        for &(id, n) in &commit.pops {
            let copy = st.pool.popn(id, n)?;
            c.run_copy(ctx, copy)?;
        }
        for id in &ids {
            if let Some(s) = st.pool.seqs.get_mut(id) {
                s.tree = Default::default();
            }
        }
        Ok(())
    })
    .map_err(in_name(name))?;
    Ok(Value::Null)
}

fn empty(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 1)?;
    let c = the_cache(name, args)?;
    Ok(Value::Bool(c.lock(name)?.pool.is_empty()))
}

fn num_available_pages(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 1)?;
    let c = the_cache(name, args)?;
    Ok(Value::Int(c.lock(name)?.pool.free_pages.len() as i64))
}

fn total_sequence_length(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 1)?;
    let c = the_cache(name, args)?;
    Ok(Value::Int(c.lock(name)?.pool.total_len()))
}

fn sequence_length(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 2)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let st = c.lock(name)?;
    if st.import.is_some() {
        return Err(value_err(name, "sequence lengths are unavailable until the checkpoint import is finished"));
    }
    Ok(Value::Int(st.pool.seq(id).map_err(in_name(name))?.seq_length.into()))
}

fn query_positions(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 1)?;
    let c = the_cache(name, args)?;
    let st = c.lock(name)?;
    match &st.step {
        // A copy: the step's own array is refilled in place by the next step with its layout
        // (attack finding kvcache/01 of the second round), and a result must never change.
        Some(s) => cache::int_tensor(&s.plan.q_rope_position_map),
        None => Err(value_err(name, "no forward step: call vm.builtin.kv_state_begin_forward first")),
    }
}

fn debug_get_kv(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 6)?;
    let c = the_cache(name, args)?;
    let seq = int(name, args, 1, "seq_id")?;
    let start = int(name, args, 2, "start_pos")?;
    let end = int(name, args, 3, "end_pos")?;
    let k = tensor(name, args, 4, "k_data")?;
    let v = tensor(name, args, 5, "v_data")?;
    let st = c.lock(name)?;
    c.debug_get_kv(ctx, &st, seq, start, end, k, v).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn sm_scale(name: &str, args: &[Value], i: usize) -> Result<f64> {
    match args.get(i) {
        Some(Value::Float(x)) => Ok(*x),
        Some(Value::Int(x)) => Ok(*x as f64),
        Some(other) => Err(type_err(name, i, "sm_scale", "float", other)),
        None => Err(crate::args::missing(name, i, args.len())),
    }
}

/// The lock held for a step's attention: refuses a step already ended.
fn active<'a>(name: &str, c: &'a PagedKvCache) -> Result<cache::Held<'a>> {
    let st = c.lock(name)?;
    if st.step.as_ref().is_some_and(|s| s.ended) {
        return Err(value_err(name, "the forward step has ended: call vm.builtin.kv_state_begin_forward first"));
    }
    Ok(st)
}

fn attention_with_fused_qkv(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    fused_qkv(name, ctx, args, false)
}

/// relaxvm's own: `attention_with_fused_qkv`, with every row of a sliding layer's multi-token
/// step computed one kernel row per call (no running maximum carried from row to row), which
/// the tests compare TVM's way with where TVM's bytes are undefined (docs/kv-cache.md).
fn attention_with_fused_qkv_by_row(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    fused_qkv(name, ctx, args, true)
}

fn fused_qkv(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value], by_row: bool) -> Result<Value> {
    arity(name, args, 5)?;
    let c = the_cache(name, args)?;
    let layer = int(name, args, 1, "layer_id")?;
    let scale = sm_scale(name, args, 2)?;
    let qkv = tensor(name, args, 3, "qkv_data")?;
    let o = tensor(name, args, 4, "o_data")?;
    let st = active(name, c)?;
    c.attention_with_fused_qkv(ctx, &st, layer, scale, qkv, o, by_row).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn self_attention(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 8)?;
    let c = the_cache(name, args)?;
    let layer = int(name, args, 1, "layer_id")?;
    let scale = sm_scale(name, args, 2)?;
    let t: Vec<&relaxvm::Tensor> = (3..8)
        .map(|i| tensor(name, args, i, ["q_data", "k_data", "v_data", "o_data", "lse_data"][i - 3]))
        .collect::<Result<_>>()?;
    let st = active(name, c)?;
    c.self_attention(ctx, &st, layer, scale, t[0], t[1], t[2], t[3], t[4]).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn cross_attention(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 6)?;
    let c = the_cache(name, args)?;
    let layer = int(name, args, 1, "layer_id")?;
    let scale = sm_scale(name, args, 2)?;
    let q = tensor(name, args, 3, "q_data")?;
    let o = tensor(name, args, 4, "o_data")?;
    let lse = tensor(name, args, 5, "lse_data")?;
    let st = active(name, c)?;
    c.cross_attention(ctx, &st, layer, scale, q, o, lse).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn attention_with_shared_kv(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 7)?;
    let c = the_cache(name, args)?;
    let layer = int(name, args, 1, "source_layer_id")?;
    let scale = sm_scale(name, args, 2)?;
    let t: Vec<&relaxvm::Tensor> = (3..7)
        .map(|i| tensor(name, args, i, ["q_data", "current_k_data", "current_v_data", "o_data"][i - 3]))
        .collect::<Result<_>>()?;
    let st = active(name, c)?;
    c.attention_with_shared_kv(ctx, &st, layer, scale, t[0], t[1], t[2], t[3]).map_err(in_name(name))?;
    Ok(Value::Null)
}

/// TVM's MergeAttnOutputInplace: the cache's second merge function (the general one, which
/// GPU MLA caches pass; a CPU cache from `TIRPagedKVCache` has one) merges the cross-attention
/// output and log-sum-exp into the self-attention ones, returned as a pair.
fn merge_attn_output_inplace(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    arity(name, args, 5)?;
    let c = the_cache(name, args)?;
    let t: Vec<&relaxvm::Tensor> = (1..5)
        .map(|i| tensor(name, args, i, ["o_self_attn", "lse_self_attn", "o_cross_attn", "lse_cross_attn"][i - 1]))
        .collect::<Result<_>>()?;
    for (x, what) in [(t[0], "o_self_attn"), (t[1], "lse_self_attn")] {
        checks::check_writable(x, what).map_err(in_name(name))?;
    }
    let Some(merge) = c.kernels.merge_inplace.get(1) else {
        return Err(value_err(
            name,
            format!("the general attention merge function is not defined: the cache has {} merge function(s), this needs 2 (TVM passes 2 for GPU MLA caches only)", c.kernels.merge_inplace.len()),
        ));
    };
    let _st = c.lock(name)?;
    kernel::call_kernel(ctx, merge, &format!("{name}: merge"), &args[1..5])?;
    Ok(Value::tuple(vec![args[1].clone(), args[2].clone()]))
}

fn checkpoint_metadata(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 2)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let st = c.lock(name)?;
    Ok(Value::Str(c.checkpoint_metadata(&st, id).map_err(in_name(name))?.into()))
}

fn layout_hash(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 1)?;
    let c = the_cache(name, args)?;
    Ok(Value::Str(c.layout_hash().map_err(in_name(name))?.into()))
}

fn export_page_group(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 4)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let group = int(name, args, 2, "group_id")?;
    let dst = tensor(name, args, 3, "dst")?;
    let st = c.lock(name)?;
    c.export_page_group(&st, id, group, dst).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn prepare_import(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 3)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let text = match &args[2] {
        Value::Str(s) => s.to_string(),
        other => return Err(type_err(name, 2, "metadata_json", "str", other)),
    };
    let mut st = c.lock(name)?;
    // Checks come first; what follows (clear, one sequence, its pages) cannot fail.
    c.prepare_import(&mut st, id, &text).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn import_page_group(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 4)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let group = int(name, args, 2, "group_id")?;
    let src = tensor(name, args, 3, "src")?;
    let mut st = c.lock(name)?;
    c.import_page_group(&mut st, id, group, src).map_err(in_name(name))?;
    Ok(Value::Null)
}

fn finish_import(name: &'static str, args: &[Value]) -> Result<Value> {
    arity(name, args, 2)?;
    let c = the_cache(name, args)?;
    let id = int(name, args, 1, "seq_id")?;
    let mut st = c.lock(name)?;
    c.finish_import(&mut st, id).map_err(in_name(name))?;
    Ok(Value::Null)
}

#[cfg(test)]
mod tests;
