//! The attention entry points: the kernel calls of TVM's `AttentionWithFusedQKV`,
//! `SelfAttention`, `CrossAttention` and `AttentionWithSharedKV`, in TVM's order and with its
//! arguments, so that the same kernels give the same bytes.
//!
//! For one layer, with the step's arrays: split q/k/v and apply RoPE (`split_rotary`); append
//! k/v to the pages first when the step appends before attention (decode at the last depth);
//! attention of the new tokens to themselves (ragged prefill, causal) unless appended already;
//! then, per depth with pages, attention to the cached blocks (decode or paged prefill kernel),
//! each partial result merged into the output (`merge_inplace`, in depth order); append last
//! otherwise.

use super::cache::{PagedKvCache, State, Step};
use super::checks::{check_tensor, check_writable};
use super::create::{AttnKind, RopeMode};
use super::kernel::call_kernel as call;
use super::sliding_rows::nonfinite_rows;
use super::stale_max;
use relaxvm::{CallCtx, Error, Result, Shape, Tensor, Value};

fn err(msg: impl std::fmt::Display) -> Error {
    Error::value(msg.to_string())
}

/// A view of the first `rows` rows of contiguous `t` with the trailing `dims`.
fn rows_view(t: &Tensor, rows: i64, dims: &[i64]) -> Result<Value> {
    let mut shape = vec![rows];
    shape.extend_from_slice(dims);
    Ok(Value::Tensor(Tensor::from_parts(t.storage().clone(), t.byte_offset(), Shape::from(shape), None, t.dtype())?))
}

impl PagedKvCache {
    /// The local index of global layer `layer`, checked.
    pub(crate) fn local_layer(&self, layer: i64) -> Result<usize> {
        let local = layer - self.cfg.layer_begin;
        if local < 0 || local >= self.cfg.num_layers {
            return Err(err(format!(
                "layer {layer} is not in this cache's layers {}..{}",
                self.cfg.layer_begin,
                self.cfg.layer_begin + self.cfg.num_layers
            )));
        }
        Ok(local as usize)
    }

    fn step<'a>(&self, st: &'a State) -> Result<&'a Step> {
        st.step.as_ref().ok_or_else(|| err("no forward step: call vm.builtin.kv_state_begin_forward first"))
    }

    /// The checks of the entry points that take q (and k, v) and write o (and lse): the layer,
    /// the step, then each tensor's dtype and shape (the step's tokens as rows) and that the
    /// outputs are writable. Returns the local layer and the step.
    fn checked<'a>(
        &self,
        st: &'a State,
        layer: i64,
        q: &Tensor,
        kv: Option<(&Tensor, &Tensor)>,
        o: &Tensor,
        lse: Option<&Tensor>,
    ) -> Result<(usize, &'a Step)> {
        let local = self.local_layer(layer)?;
        let c = &self.cfg;
        let step = self.step(st)?;
        let total = Some(step.plan.total_len());
        let (qo, kvh) = (Some(c.num_qo_heads), Some(c.num_kv_heads));
        check_tensor(q, "q", &[total, qo, Some(c.qk_head_dim)], c.dtype)?;
        if let Some((k, v)) = kv {
            check_tensor(k, "k", &[total, kvh, Some(c.qk_head_dim)], c.dtype)?;
            check_tensor(v, "v", &[total, kvh, Some(c.v_head_dim)], c.dtype)?;
        }
        check_tensor(o, "output", &[total, qo, Some(c.v_head_dim)], c.dtype)?;
        check_writable(o, "output")?;
        if let Some(lse) = lse {
            check_tensor(lse, "lse", &[total, qo], relaxvm::DataType::F32)?;
            check_writable(lse, "lse")?;
        }
        Ok((local, step))
    }

    fn rotary_mode(&self) -> Value {
        Value::Int(i64::from(self.cfg.rope_mode == RopeMode::Inline))
    }

    /// `attention_kv_cache_attention_with_fused_qkv`; with `by_row`, a causal sliding-window
    /// layer's rows are all computed one kernel row per call (`sliding_rows`), not only those
    /// TVM's kernel leaves non-finite.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attention_with_fused_qkv(
        &self,
        ctx: &mut CallCtx<'_>,
        st: &State,
        layer: i64,
        sm_scale: f64,
        qkv: &Tensor,
        o: &Tensor,
        by_row: bool,
    ) -> Result<()> {
        let local = self.local_layer(layer)?;
        let c = &self.cfg;
        let step = self.step(st)?;
        let total = step.plan.total_len();
        let heads = c.num_qo_heads + 2 * c.num_kv_heads;
        check_tensor(qkv, "qkv", &[None, Some(heads), Some(c.qk_head_dim)], c.dtype)?;
        check_tensor(o, "output", &[Some(qkv.shape()[0]), Some(c.num_qo_heads), Some(c.qk_head_dim)], c.dtype)?;
        check_writable(o, "output")?;
        if qkv.shape()[0] < total {
            return Err(err(format!(
                "qkv: expected at least {total} rows (the tokens of this step), found {}",
                qkv.shape()[0]
            )));
        }
        let (q, k, v) = (&step.aux.views.q, &step.aux.views.k, &step.aux.views.v);
        let (qkv_v, o_v) = if total != qkv.shape()[0] {
            (rows_view(qkv, total, &[heads, c.qk_head_dim])?, rows_view(o, total, &[c.num_qo_heads, c.qk_head_dim])?)
        } else {
            (Value::Tensor(qkv.clone()), Value::Tensor(o.clone()))
        };
        let aux = &step.aux;
        let last = match &self.kernels.rope_ext_factors {
            Some(f) => f.clone(),
            None => Value::Int(i64::from(c.rope_mode == RopeMode::Normal)),
        };
        let split_args = [qkv_v, aux.q_rope_position_map.clone(), q.clone(), k.clone(), v.clone(), last];
        call(ctx, &self.kernels.split_rotary, "split_rotary", &split_args)?;
        let append_args = [self.pages[local].clone(), k.clone(), v.clone(), aux.append_position_map.clone()];
        if step.plan.append_before_attn {
            call(ctx, &self.kernels.transpose_append, "transpose_append", &append_args)?;
        }
        self.attention_internal(ctx, step, layer, local, q, k, v, &o_v, sm_scale, by_row)?;
        if !step.plan.append_before_attn {
            call(ctx, &self.kernels.transpose_append, "transpose_append", &append_args)?;
        }
        Ok(())
    }

    /// `attention_kv_cache_attention_with_shared_kv`: attention of `q` to layer `layer`'s
    /// cache and the step's own `k`/`v` (which are not appended).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attention_with_shared_kv(
        &self,
        ctx: &mut CallCtx<'_>,
        st: &State,
        layer: i64,
        sm_scale: f64,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        o: &Tensor,
    ) -> Result<()> {
        let (local, step) = self.checked(st, layer, q, Some((k, v)), o, None)?;
        let (q, k, v, o) =
            (Value::Tensor(q.clone()), Value::Tensor(k.clone()), Value::Tensor(v.clone()), Value::Tensor(o.clone()));
        self.attention_internal(ctx, step, layer, local, &q, &k, &v, &o, sm_scale, false)
    }

    /// `attention_kv_cache_self_attention`: the ragged kernel alone, on the step's tokens.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn self_attention(
        &self,
        ctx: &mut CallCtx<'_>,
        st: &State,
        layer: i64,
        sm_scale: f64,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        o: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        let (_, step) = self.checked(st, layer, q, Some((k, v)), o, Some(lse))?;
        let c = &self.cfg;
        let t = |x: &Tensor| Value::Tensor(x.clone());
        // TVM runs a layer that is not plain MHA through its MLA path, which calls the same
        // ragged kernel without RoPE.
        let rope = if c.attn_kinds[layer as usize] == AttnKind::Mha { self.rotary_mode() } else { Value::Int(0) };
        self.self_attn(ctx, step, &t(q), &t(k), &t(v), &t(o), &t(lse), sm_scale, rope)
    }

    /// `attention_kv_cache_cross_attention`: attention to the cached blocks only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cross_attention(
        &self,
        ctx: &mut CallCtx<'_>,
        st: &State,
        layer: i64,
        sm_scale: f64,
        q: &Tensor,
        o: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        let (local, step) = self.checked(st, layer, q, None, o, Some(lse))?;
        let c = &self.cfg;
        if c.attn_kinds[layer as usize] != AttnKind::Mha {
            // TVM sends it to the MLA path, whose kernel a CPU cache does not have: refused
            // once a depth has pages to attend to; with none, nothing runs (as in TVM).
            if step.aux.depths.iter().any(|d| d.page_indices_len > 0) {
                return Err(err(format!(
                    "cross attention on layer {layer} needs an MHA layer (TVM: the MLA prefill kernel is not defined)"
                )));
            }
            return Ok(());
        }
        let t = |x: &Tensor| Value::Tensor(x.clone());
        self.cross_attn(ctx, step, layer, local, &t(q), &t(o), &t(lse), sm_scale, true, false, None)?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn self_attn(
        &self,
        ctx: &mut CallCtx<'_>,
        step: &Step,
        q: &Value,
        k: &Value,
        v: &Value,
        o: &Value,
        lse: &Value,
        sm_scale: f64,
        rope: Value,
    ) -> Result<()> {
        let aux = &step.aux;
        if let Some((mn_indptr, mask)) = aux.depths.first().and_then(|d| d.tree.as_ref()) {
            // The batch's trees are not chains: the ragged kernel with the tree mask.
            let f = self
                .kernels
                .tree_ragged
                .as_ref()
                .ok_or_else(|| err("the tree-mask ragged prefill kernel is missing"))?;
            let args = [
                q.clone(),
                aux.cur_append_length_indptr.clone(),
                k.clone(),
                v.clone(),
                aux.cur_append_length_indptr.clone(),
                aux.q_rope_position_map.clone(),
                mn_indptr.clone(),
                mask.clone(),
                o.clone(),
                lse.clone(),
                rope,
                Value::Float(self.cfg.rotary_scale),
                Value::Float(self.cfg.rotary_theta),
                Value::Float(sm_scale),
            ];
            return call(ctx, f, "tree-mask ragged prefill", &args);
        }
        let args = [
            q.clone(),
            aux.cur_append_length_indptr.clone(),
            k.clone(),
            v.clone(),
            aux.cur_append_length_indptr.clone(),
            aux.q_rope_position_map.clone(),
            aux.k_ragged_rope_pos_offset.clone(),
            o.clone(),
            lse.clone(),
            Value::Int(1),
            rope,
            Value::Float(self.cfg.rotary_scale),
            Value::Float(self.cfg.rotary_theta),
            Value::Float(sm_scale),
        ];
        call(ctx, &self.kernels.prefill_ragged, "ragged prefill", &args)
    }

    /// TVM's AttentionInternal.
    #[allow(clippy::too_many_arguments)]
    fn attention_internal(
        &self,
        ctx: &mut CallCtx<'_>,
        step: &Step,
        layer: i64,
        local: usize,
        q: &Value,
        k: &Value,
        v: &Value,
        o: &Value,
        sm_scale: f64,
        by_row: bool,
    ) -> Result<()> {
        let kind = self.cfg.attn_kinds[layer as usize];
        let merged_lse = &step.aux.views.merged_lse;
        let mut first = true;
        if !step.plan.append_before_attn {
            first = false;
            self.self_attn(ctx, step, q, k, v, o, merged_lse, sm_scale, self.rotary_mode())?;
        }
        let self_done = !first;
        let causal = !step.plan.append_before_attn && kind == AttnKind::MhaSliding;
        // The rows TVM's kernel may have computed on a stale maximum (`stale_max`).
        let mut uncertain = if causal { vec![false; step.plan.total_len() as usize] } else { Vec::new() };
        let marks = causal.then_some(&mut uncertain[..]);
        let cross_done = self.cross_attn(ctx, step, layer, local, q, o, merged_lse, sm_scale, first, causal, marks)?;
        if !self_done && !cross_done {
            return Err(err("neither self-attention nor cross-attention ran (no tokens and no cached blocks)"));
        }
        if causal && cross_done {
            // Attack findings kvcache/01 and kvcache/02: see `stale_max` and `sliding_rows`.
            let rows: Vec<i64> = if by_row {
                (0..step.plan.total_len()).collect()
            } else if uncertain.contains(&true) {
                // A row whose query is not finite comes out non-finite whatever is recomputed
                // (review R-kv-6): such rows keep what the kernel gave.
                let bad_q = nonfinite_rows(q)?;
                (0..uncertain.len() as i64)
                    .filter(|&r| uncertain[r as usize] && bad_q.binary_search(&r).is_err())
                    .collect()
            } else {
                Vec::new()
            };
            self.redo_sliding_rows(ctx, &step.plan, local, q, k, v, o, sm_scale, &rows)?;
        }
        Ok(())
    }

    /// TVM's MHACrossAttnInternal: per depth with pages, the decode or prefill kernel, merged.
    #[allow(clippy::too_many_arguments)]
    fn cross_attn(
        &self,
        ctx: &mut CallCtx<'_>,
        step: &Step,
        layer: i64,
        local: usize,
        q: &Value,
        o: &Value,
        lse: &Value,
        sm_scale: f64,
        mut first: bool,
        causal: bool,
        mut uncertain: Option<&mut [bool]>,
    ) -> Result<bool> {
        let c = &self.cfg;
        let kind = c.attn_kinds[layer as usize];
        let windowed = c.support_sliding_window || kind == AttnKind::MhaSliding;
        let (prefill, decode) = if windowed {
            (self.kernels.prefill_sliding_window.as_ref(), self.kernels.decode_sliding_window.as_ref())
        } else {
            (Some(&self.kernels.prefill), Some(&self.kernels.decode))
        };
        let (tmp_out, tmp_lse) = (&step.aux.views.out, &step.aux.views.lse);
        let aux = &step.aux;
        let mut computed = false;
        for (d, dt) in aux.depths.iter().enumerate() {
            if dt.page_indices_len == 0 {
                continue;
            }
            let (out, out_lse) = if first { (o.clone(), lse.clone()) } else { (tmp_out.clone(), tmp_lse.clone()) };
            let (indptr, indices, info, k_rope, scale, theta) = if kind == AttnKind::MhaSliding {
                (
                    &dt.page_indptr_sliding,
                    &dt.page_indices_sliding,
                    &dt.length_info_sliding,
                    &dt.k_rope_pos_offset_sliding,
                    1.0,
                    10000.0,
                )
            } else {
                (
                    &dt.page_indptr,
                    &dt.page_indices,
                    &dt.length_info,
                    &dt.k_rope_pos_offset,
                    c.rotary_scale,
                    c.rotary_theta,
                )
            };
            let page = self.pages[local].clone();
            let tree = if step.plan.append_before_attn { dt.tree.as_ref() } else { None };
            if let Some((mn_indptr, mask)) = tree {
                let f = self
                    .kernels
                    .tree_paged
                    .as_ref()
                    .ok_or_else(|| err("the tree-mask paged prefill kernel is missing"))?;
                let args = [
                    q.clone(),
                    dt.qo_indptr.clone(),
                    page,
                    indptr.clone(),
                    indices.clone(),
                    info.clone(),
                    k_rope.clone(),
                    aux.q_rope_position_map.clone(),
                    out,
                    out_lse,
                    self.rotary_mode(),
                    Value::Float(scale),
                    Value::Float(theta),
                    Value::Float(sm_scale),
                    mn_indptr.clone(),
                    mask.clone(),
                ];
                call(ctx, f, "tree-mask paged prefill", &args)?;
            } else if step.plan.depths[d].use_decode_kernel {
                let f = decode.ok_or_else(|| err("the decode kernel is missing"))?;
                let args = [
                    q.clone(),
                    page,
                    indptr.clone(),
                    indices.clone(),
                    info.clone(),
                    k_rope.clone(),
                    aux.q_rope_position_map.clone(),
                    out,
                    out_lse,
                    self.rotary_mode(),
                    Value::Float(scale),
                    Value::Float(theta),
                    Value::Float(sm_scale),
                ];
                call(ctx, f, "paged decode", &args)?;
            } else {
                let f = prefill.ok_or_else(|| err("the prefill kernel is missing"))?;
                let args = [
                    q.clone(),
                    dt.qo_indptr.clone(),
                    page,
                    indptr.clone(),
                    indices.clone(),
                    info.clone(),
                    k_rope.clone(),
                    aux.q_rope_position_map.clone(),
                    out.clone(),
                    out_lse.clone(),
                    Value::Int(i64::from(causal)),
                    self.rotary_mode(),
                    Value::Float(scale),
                    Value::Float(theta),
                    Value::Float(sm_scale),
                ];
                call(ctx, f, "paged prefill", &args)?;
                if let (Some(marks), Some(window)) = (uncertain.as_deref_mut(), c.layer_sliding_window) {
                    let (lse, o_max, unit) = stale_max::read_outputs(&out, &out_lse)?;
                    let outputs = stale_max::CallOutputs { lse: &lse, o_max: &o_max, unit };
                    let depth = &step.plan.depths[d];
                    stale_max::mark_uncertain_rows(
                        depth,
                        window,
                        c.page_size,
                        c.num_qo_heads as usize,
                        &outputs,
                        marks,
                    );
                }
            }
            if first {
                first = false;
            } else {
                let args = [o.clone(), lse.clone(), tmp_out.clone(), tmp_lse.clone()];
                call(ctx, &self.kernels.merge_inplace[0], "merge_inplace", &args)?;
            }
            computed = true;
        }
        Ok(computed)
    }

    /// `attention_kv_cache_debug_get_kv`: the keys and values of tokens `start..end` of a
    /// sequence, into `k` and `v` of shape `(num_layers, end - start, num_kv_heads, qk_head_dim)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn debug_get_kv(
        &self,
        ctx: &mut CallCtx<'_>,
        st: &State,
        seq: i64,
        start: i64,
        end: i64,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<()> {
        let f = self
            .kernels
            .debug_get_kv
            .as_ref()
            .ok_or_else(|| err("the cache was created without a debug_get_kv kernel"))?;
        let s = st.pool.seq(seq)?;
        if start < 0 || end > i64::from(s.seq_length) || start >= end {
            return Err(err(format!(
                "expected 0 <= start < end <= {} (the length of sequence {seq}), found start {start} and end {end}",
                s.seq_length
            )));
        }
        let c = &self.cfg;
        for (t, what) in [(k, "k"), (v, "v")] {
            check_tensor(
                t,
                what,
                &[Some(c.num_layers), Some(end - start), Some(c.num_kv_heads), Some(c.qk_head_dim)],
                c.dtype,
            )?;
            check_writable(t, what)?;
        }
        if c.attn_kinds[c.layer_begin as usize..(c.layer_begin + c.num_layers) as usize]
            .iter()
            .any(|k| *k != AttnKind::Mha)
        {
            return Err(err("debug_get_kv supports MHA layers only"));
        }
        let positions = st.pool.positions(s);
        let pos = super::cache::int_tensor(&positions[start as usize..end as usize])?;
        for (layer, page) in self.pages.iter().enumerate() {
            let args = [
                page.clone(),
                pos.clone(),
                Value::Tensor(k.clone()),
                Value::Tensor(v.clone()),
                Value::Int(layer as i64),
            ];
            call(ctx, f, "debug_get_kv", &args)?;
        }
        Ok(())
    }
}
