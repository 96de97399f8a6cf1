//! Rows of a causal sliding-window step that TVM's kernel may have computed wrong, recomputed
//! one row per kernel call (attack findings kvcache/01 and kvcache/02).
//!
//! TVM 0.27's CPU paged-prefill kernel for `mha_sliding` layers (`causal = 1`, a step of
//! several tokens, which appends after attention) starts each query row after the first on the
//! running maximum the row before left (see `sliding_mask`), across the sequences of a batch
//! too. Where that stale maximum lies far above a row's own scores, the row's weights lose
//! precision (subnormals) or all underflow (`0 / 0 = NaN`). `stale_max` decides, from the
//! kernel's own log-sum-exps, which rows are certified accurate; relaxvm keeps TVM's bytes there.
//!
//! Each other row is computed again with the same kernels, one kernel row per call: the
//! ragged kernel on the row's own sequence up to it, then, per depth, the paged kernel on a
//! block holding only this row — moved past the cached columns the row masks, as
//! `sliding_mask` moves the first row, so that its first visited column is visible and its
//! maximum its own — merged in TVM's order. The masks are TVM's (the row keeps its index in its
//! kernel row), so the result is what TVM's kernel computes for that row without the stale
//! maximum. A row whose inputs hold a NaN or an infinity comes out non-finite again, as it
//! should. This runs before the step's K/V are appended (append comes after attention in these
//! steps), on scratch of its own, and costs a few kernel calls per recomputed row and depth.

use super::cache::{int_tensor, PagedKvCache};
use super::forward::Plan;
use super::kernel::call_kernel as call;
use relaxvm::{CallCtx, DataType, Device, Error, Result, Shape, Tensor, Value};

fn err(msg: impl std::fmt::Display) -> Error {
    Error::value(msg.to_string())
}

/// Rows `start..start + n` of the contiguous tensor in `v` (rows along its first axis).
fn rows(v: &Value, start: i64, n: i64) -> Result<Value> {
    let t = v.as_tensor()?;
    let dims = t.shape().to_vec();
    let row_bytes: i64 = dims[1..].iter().product::<i64>() * t.dtype().itemsize() as i64;
    let mut shape = vec![n];
    shape.extend_from_slice(&dims[1..]);
    let offset = t.byte_offset() + (start * row_bytes) as usize;
    Ok(Value::Tensor(Tensor::from_parts(t.storage().clone(), offset, Shape::from(shape), None, t.dtype())?))
}

/// The token rows of contiguous `o` (`(tokens, ...)`) holding a NaN or an infinity.
pub(crate) fn nonfinite_rows(o: &Value) -> Result<Vec<i64>> {
    let t = o.as_tensor()?;
    let tokens = t.shape().first().copied().unwrap_or(0);
    // The exponent bits of the float formats a cache may hold: all ones is NaN or infinity.
    let (size, mask): (usize, u32) = match t.dtype() {
        DataType::F32 => (4, 0x7f80_0000),
        DataType::F16 => (2, 0x7c00),
        DataType::BF16 => (2, 0x7f80),
        _ => return Ok(Vec::new()),
    };
    t.with_contiguous_bytes(|bytes| {
        let row_bytes = if tokens > 0 { bytes.len() / tokens as usize } else { 0 };
        (0..tokens)
            .filter(|&r| {
                let row = &bytes[r as usize * row_bytes..(r as usize + 1) * row_bytes];
                row.chunks_exact(size).any(|e| {
                    let bits = if size == 4 {
                        u32::from_ne_bytes([e[0], e[1], e[2], e[3]])
                    } else {
                        u32::from(u16::from_ne_bytes([e[0], e[1]]))
                    };
                    bits & mask == mask
                })
            })
            .collect()
    })
}

/// The kernel row of `indptr` (an `indptr` array) holding token row `r`, and `r`'s index in it.
fn kernel_row(indptr: &[i32], r: i32) -> Option<(usize, i32)> {
    (0..indptr.len().saturating_sub(1)).find(|&b| indptr[b] <= r && r < indptr[b + 1]).map(|b| (b, r - indptr[b]))
}

impl PagedKvCache {
    /// Recomputes token rows `bad` (in order) of `o`, the causal sliding-window attention of
    /// layer `local`, one row per kernel call (see the module's documentation).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn redo_sliding_rows(
        &self,
        ctx: &mut CallCtx<'_>,
        plan: &Plan,
        local: usize,
        q: &Value,
        k: &Value,
        v: &Value,
        o: &Value,
        sm_scale: f64,
        bad: &[i64],
    ) -> Result<()> {
        if bad.is_empty() {
            return Ok(());
        }
        let c = &self.cfg;
        let window = c
            .layer_sliding_window
            .ok_or_else(|| err("internal error: a causal sliding-window step without a layer window"))?;
        let ps = c.page_size;
        let f32 = DataType::F32;
        let heads = c.num_qo_heads;
        let tmp_o = Value::Tensor(Tensor::zeros(vec![1, heads, c.v_head_dim], c.dtype, Device::default())?);
        let tmp_lse = Value::Tensor(Tensor::zeros(vec![1, heads], f32, Device::default())?);
        let lse = Value::Tensor(Tensor::zeros(vec![1, heads], f32, Device::default())?);
        let prefill = self
            .kernels
            .prefill_sliding_window
            .as_ref()
            .ok_or_else(|| err("the sliding-window prefill kernel is missing"))?;
        for &r in bad {
            // Up to a chunk's rows, each a few kernel calls: Ctrl-C is seen between two rows.
            ctx.check_interrupt()?;
            let r32 = r as i32;
            let (s, r_in_seq) = kernel_row(&plan.cur_append_length_indptr, r32)
                .ok_or_else(|| err(format!("internal error: token row {r} is not in the step")))?;
            let start = i64::from(plan.cur_append_length_indptr[s]);
            let (q_r, o_r) = (rows(q, r, 1)?, rows(o, r, 1)?);
            let pos = int_tensor(&plan.q_rope_position_map[r as usize..r as usize + 1])?;
            // The ragged kernel: the row against its sequence's new tokens up to itself.
            let ragged = [
                q_r.clone(),
                int_tensor(&[0, 1])?,
                rows(k, start, i64::from(r_in_seq) + 1)?,
                rows(v, start, i64::from(r_in_seq) + 1)?,
                int_tensor(&[0, r_in_seq + 1])?,
                pos.clone(),
                int_tensor(&plan.k_ragged_rope_pos_offset[s..s + 1])?,
                o_r.clone(),
                lse.clone(),
                Value::Int(1),
                Value::Int(i64::from(c.rope_mode == super::create::RopeMode::Inline)),
                Value::Float(c.rotary_scale),
                Value::Float(c.rotary_theta),
                Value::Float(sm_scale),
            ];
            call(ctx, &self.kernels.prefill_ragged, "ragged prefill", &ragged)?;
            // Each depth's cached columns this row sees, as a block of this row alone.
            for d in &plan.depths {
                let Some((b, row)) = kernel_row(&d.qo_indptr, r32) else { continue };
                let pages =
                    &d.page_indices_sliding[d.page_indptr_sliding[b] as usize..d.page_indptr_sliding[b + 1] as usize];
                if pages.is_empty() {
                    continue;
                }
                let kv_len = super::stale_max::kv_len(d, b, ps);
                // TVM's mask: kernel row `row` sees the last `window - row - 1` cached columns.
                let visible = (window - row - 1).min(kv_len);
                if visible <= 0 {
                    continue;
                }
                let shift = kv_len - visible;
                if shift > 0 && d.sink_size[b] > 0 {
                    return Err(err(
                        "a non-finite sliding-window row next to an attention sink cannot be recomputed (the sink's columns come first)",
                    ));
                }
                let info = Tensor::from_vec(
                    Shape::from(vec![3, 1]),
                    vec![d.last_page_len[b], d.sliding_window_offset[b] + shift, d.sink_size[b]],
                )?;
                let args = [
                    q_r.clone(),
                    int_tensor(&[0, 1])?,
                    self.pages[local].clone(),
                    int_tensor(&[0, pages.len() as i32])?,
                    int_tensor(pages)?,
                    Value::Tensor(info),
                    int_tensor(&[d.k_rope_pos_offset_sliding[b] + shift])?,
                    pos.clone(),
                    tmp_o.clone(),
                    tmp_lse.clone(),
                    Value::Int(1),
                    Value::Int(i64::from(c.rope_mode == super::create::RopeMode::Inline)),
                    Value::Float(1.0),
                    Value::Float(10000.0),
                    Value::Float(sm_scale),
                ];
                call(ctx, prefill, "paged prefill", &args)?;
                let merge = [o_r.clone(), lse.clone(), tmp_o.clone(), tmp_lse.clone()];
                call(ctx, &self.kernels.merge_inplace[0], "merge_inplace", &merge)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_with_a_nan_or_an_infinity_are_found_in_each_float_format() {
        let t =
            Tensor::from_vec(Shape::from(vec![4, 2]), vec![1.0f32, 2.0, f32::NAN, 0.0, 3.0, 4.0, 0.0, f32::INFINITY])
                .unwrap();
        assert_eq!(nonfinite_rows(&Value::Tensor(t)).unwrap(), [1, 3]);
        let bits: Vec<u16> = vec![0x3c00, 0x7e00, 0x3c00, 0x3c00];
        let t = Tensor::from_bytes(
            DataType::F16,
            Shape::from(vec![2, 2]),
            &bits.iter().flat_map(|b| b.to_ne_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap();
        assert_eq!(nonfinite_rows(&Value::Tensor(t)).unwrap(), [0]);
    }

    /// A VM handle that logs the cache's kernel calls and polls, and answers the polls made
    /// after the first kernel call with an interrupt (the order of events a Ctrl-C during the
    /// first row's kernels gives).
    #[derive(Default)]
    struct Log {
        events: Vec<String>,
    }

    impl relaxvm::VmHandle for Log {
        fn call_closure(&mut self, _: &relaxvm::Closure, _: &[Value]) -> Result<Value> {
            unreachable!("the kernels are called as observed calls")
        }
        fn device(&self) -> Device {
            Device::default()
        }
        fn poll(&mut self) -> Result<()> {
            self.events.push("poll".into());
            if self.events.len() > 1 {
                return Err(relaxvm::ErrorKind::Interrupted.into());
            }
            Ok(())
        }
        fn call_observed(&mut self, name: &str, _: &relaxvm::Closure, _: &[Value]) -> Result<Value> {
            self.events.push(name.to_string());
            Ok(Value::Null)
        }
    }

    #[test]
    fn an_interrupt_during_a_recomputed_row_stops_before_the_next_row() {
        use super::super::forward::DepthArrays;
        // One sliding layer of window 24, two query heads on one KV head of 4 dimensions.
        let cache = super::super::cache::test_cache(Some(24));
        // One sequence of 20 cached tokens (two pages), a step of 3 tokens.
        let depth = DepthArrays {
            qo_indptr: vec![0, 3],
            page_indptr_sliding: vec![0, 2],
            page_indices_sliding: vec![0, 1],
            last_page_len: vec![4],
            sliding_window_offset: vec![0],
            sink_size: vec![0],
            k_rope_pos_offset_sliding: vec![0],
            ..DepthArrays::default()
        };
        let plan = Plan {
            append_lengths: vec![3],
            cur_append_length_indptr: vec![0, 3],
            k_ragged_rope_pos_offset: vec![20],
            q_rope_position_map: vec![20, 21, 22],
            depths: vec![depth],
            ..Plan::default()
        };
        let t = |heads: i64| Value::Tensor(Tensor::zeros(vec![3, heads, 4], DataType::F32, Device::default()).unwrap());
        let (q, k, v, o) = (t(2), t(1), t(1), t(2));
        let mut log = Log::default();
        let mut ctx = CallCtx::new(&mut log);
        let got = cache.redo_sliding_rows(&mut ctx, &plan, 0, &q, &k, &v, &o, 0.5, &[0, 1, 2]);
        let e = got.expect_err("the second row's poll sees the interrupt");
        assert!(matches!(e.kind(), relaxvm::ErrorKind::Interrupted), "{e}");
        // Row 0 ran whole (ragged, then the paged kernel and its merge), row 1 never started.
        assert_eq!(log.events, ["poll", "ragged", "paged", "merge", "poll"]);
    }

    #[test]
    fn a_token_row_is_found_in_its_kernel_row() {
        assert_eq!(kernel_row(&[0, 3, 8], 0), Some((0, 0)));
        assert_eq!(kernel_row(&[0, 3, 8], 4), Some((1, 1)));
        assert_eq!(kernel_row(&[0, 3, 8], 8), None);
    }
}
