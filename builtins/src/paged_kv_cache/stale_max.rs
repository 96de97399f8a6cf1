//! Which rows of a causal sliding-window paged-prefill call TVM's stale running maximum may
//! have made inaccurate, decided from the kernel's own outputs (attack findings kvcache/01 and
//! kvcache/02).
//!
//! TVM 0.27's CPU kernel (`batch_prefill_paged_kv_cpu_sliding_window`, see `sliding_mask`)
//! visits rows in the order head, kernel row, query row, and keeps its running maximum `new_m`
//! across rows: a row whose first column is masked starts on the maximum `M` the row visited
//! before it left (its *stale* maximum) instead of its own largest score. Scores are in base-2
//! units (`s · sm_scale · log2 e`). With `own` the row's largest visible score and
//! `δ = M - own > 0`, every weight `exp2(s - M)` is `2^-δ` times the right one; when that pushes
//! weights into float32's subnormal range they keep few significant bits (kvcache/02: up to
//! ~10% off), and when it pushes all of them to 0 the row is `0 / 0 = NaN` (kvcache/01).
//!
//! The certificate. For the rows of one call, in the kernel's order, keep `R`, an upper bound
//! on the `new_m` the last visited row left (`+∞` before the first row: the slot is
//! uninitialised). The kernel writes each row's `lse = M + log2 D`, `D` the sum of its weights.
//! - A row whose first column is visible starts fresh (`M = own`, the largest weight is exactly
//!   1, so `D ≥ 1`): it is TVM's fresh computation, kept; `M ≤ lse (+ rounding)`, the new `R`.
//! - A row whose first column is masked has `M = max(stale, own)` with `stale ≤ R`. Its largest
//!   weight is `2^-δ` and there are `n` visible columns, each weight at most `2^-δ` plus one
//!   subnormal unit `2^-149` of `exp2f`'s error, so `D ≤ n·2^-δ·(1 + 2^(δ-149))` and
//!   `δ ≤ R - lse + log2 n + 1` (+ rounding) whenever `δ ≤ 149`; for `δ > 149` that bound
//!   exceeds 148 itself. Either way `δ_ub = R - lse + log2 n + 1` bounds `δ` for every row kept
//!   below (the threshold is below 125).
//! - Error of a kept row: relative to the same computation scaled by `2^-δ` (which normal
//!   floats carry exactly as the fresh kernel does), each weight, product and sum that is
//!   subnormal is off by at most `2^-149` more, and `D ≥ 2^-δ`: the output moves by at most
//!   `n·2^(δ-149)·(3·maxV + 2)`, `maxV` the largest `|v|` the row attends. The row is kept only
//!   when that is at most `2^-24·maxV` (one float32 rounding unit of the largest value, on top
//!   of the kernel's own rounding): `δ_ub ≤ 125 - log2 n - log2(3 + 2/maxV)`. `maxV` is bounded
//!   below by the row's own output, a convex combination of those values: with `A` its largest
//!   magnitude, `maxV ≥ (A - 2^-24)/(1 + 2^-23)` under that same condition (so a row whose
//!   output is ~0 is never kept on this ground).
//! - `R` afterwards: `M ≤ max(R, lse + 1)` (the largest weight, if not below `2^-149`, is at
//!   least half its value after rounding, so `own ≤ lse + 1`; if below, `own < M` and `M` is the
//!   stale `≤ R`).
//! - A row with no visible column (a step longer than the window) keeps `new_m`, so `R` stays;
//!   its partial result is `0 / 0` and it is recomputed. A row whose `lse` is below `-4.9e4`,
//!   `NaN` or infinite is recomputed: the kernel's `-5e4` sentinel of a masked column would
//!   count in `D` there (above it, `exp2(-5e4 - M)` is exactly 0 since `M ≥ -4.98e4`).
//!
//! Rows the certificate does not keep are computed again one kernel row per call
//! (`sliding_rows`), which starts each row fresh. On ordinary activations (row maxima within a
//! few dozen units of each other) no row is recomputed and the bytes are TVM's.

use super::forward::DepthArrays;
use relaxvm::{DataType, Result, Value};

/// The cached columns kernel row `b` of depth `d` attends (the kernel's `kv_chunk_len`).
pub(crate) fn kv_len(d: &DepthArrays, b: usize, ps: i32) -> i32 {
    let pages = d.page_indptr_sliding[b + 1] - d.page_indptr_sliding[b];
    if pages == 0 {
        return 0;
    }
    (pages - 1) * ps + d.last_page_len[b] - d.sliding_window_offset[b] + d.sink_size[b]
}

/// A float32 `lse` plus the rounding of its computation (`m + log2 d` in float32, `d` a sum
/// of up to `terms` float32 weights), as an upper bound.
fn up(lse: f64, terms: i32) -> f64 {
    lse + (lse.abs() + 256.0) * 2f64.powi(-20) + f64::from(terms + 2) * 2f64.powi(-22)
}

/// One call's outputs the certificate reads: `lse` (`(tokens, heads)`, float32) and the
/// largest `|o|` of each token row and head (`(tokens, heads)`), with `unit` the unit
/// round-off of the output's dtype.
pub(crate) struct CallOutputs<'a> {
    pub(crate) lse: &'a [f32],
    pub(crate) o_max: &'a [f64],
    pub(crate) unit: f64,
}

/// Marks in `redo` (one flag per token row) the rows of the causal sliding-window prefill
/// call on depth `d` (window `window`, page size `ps`, `heads` query heads) that the
/// certificate of the module's documentation does not keep.
pub(crate) fn mark_uncertain_rows(
    d: &DepthArrays,
    window: i32,
    ps: i32,
    heads: usize,
    out: &CallOutputs<'_>,
    redo: &mut [bool],
) {
    let blocks = d.qo_indptr.len().saturating_sub(1);
    let mut bound = f64::INFINITY;
    for h in 0..heads {
        for b in 0..blocks {
            let kv = kv_len(d, b, ps);
            if kv == 0 {
                // The kernel's column loop never runs: `new_m` is left as it was.
                continue;
            }
            for q_idx in 0..d.qo_indptr[b + 1] - d.qo_indptr[b] {
                let row = (d.qo_indptr[b] + q_idx) as usize;
                let visible_past = (window - q_idx - 1).max(0);
                let n = kv.min(visible_past);
                let lse = f64::from(out.lse[row * heads + h]);
                if kv <= visible_past {
                    // Column 0 is visible: the row starts fresh.
                    bound = if lse.is_nan() || lse == f64::INFINITY { f64::INFINITY } else { up(lse, kv) };
                    continue;
                }
                if n == 0 || !lse.is_finite() || lse < -4.9e4 {
                    redo[row] = true;
                    if lse.is_nan() || lse == f64::INFINITY {
                        bound = f64::INFINITY;
                    } else if lse.is_finite() {
                        bound = bound.max(up(lse, kv) + 1.0);
                    }
                    continue;
                }
                let log_n = f64::from(n).log2();
                let delta = bound - lse + log_n + 1.0 + (up(lse, kv) - lse);
                let a = out.o_max[row * heads + h] / (1.0 + 2.0 * out.unit);
                let v_low = (a - 2f64.powi(-24)) / (1.0 + 2f64.powi(-23));
                let keep = v_low > 0.0 && delta <= 125.0 - log_n - (3.0 + 2.0 / v_low).log2() - 0.01;
                if !keep {
                    redo[row] = true;
                }
                bound = bound.max(up(lse, kv) + 1.0);
            }
        }
    }
}

/// Reads a call's `lse` (`(tokens, heads)`, float32) and the largest `|o|` per token row and
/// head of its output `o` (`(tokens, heads, dim)`) for [`mark_uncertain_rows`].
pub(crate) fn read_outputs(o: &Value, lse: &Value) -> Result<(Vec<f32>, Vec<f64>, f64)> {
    let (o, lse) = (o.as_tensor()?, lse.as_tensor()?);
    let lse: Vec<f32> = lse
        .with_contiguous_bytes(|b| b.chunks_exact(4).map(|e| f32::from_ne_bytes([e[0], e[1], e[2], e[3]])).collect())?;
    let dim = o.shape().last().copied().unwrap_or(1).max(1) as usize;
    let (size, unit): (usize, f64) = match o.dtype() {
        DataType::F32 => (4, 2f64.powi(-24)),
        DataType::F16 => (2, 2f64.powi(-11)),
        DataType::BF16 => (2, 2f64.powi(-8)),
        DataType::F64 => (8, 2f64.powi(-53)),
        // No float format TVM's kernels are built for: nothing is certified, every row is
        // computed again.
        _ => (o.dtype().itemsize(), f64::NAN),
    };
    let dtype = o.dtype();
    let o_max = o.with_contiguous_bytes(|b| {
        b.chunks_exact(size * dim)
            .map(|row| {
                row.chunks_exact(size)
                    .map(|e| match dtype {
                        DataType::F32 => f64::from(f32::from_ne_bytes([e[0], e[1], e[2], e[3]])),
                        DataType::F16 => f64::from(half::f16::from_ne_bytes([e[0], e[1]])),
                        DataType::BF16 => f64::from(half::bf16::from_ne_bytes([e[0], e[1]])),
                        DataType::F64 => f64::from_ne_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]),
                        _ => f64::NAN,
                    })
                    // A NaN makes the row's maximum NaN, and the row is not kept.
                    .fold(0.0f64, |m, x| if x.is_nan() || m.is_nan() { f64::NAN } else { m.max(x.abs()) })
            })
            .collect()
    })?;
    Ok((lse, o_max, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A depth of kernel rows given as (queries, pages, last page length, window offset).
    fn depth(rows: &[(i32, i32, i32, i32)]) -> DepthArrays {
        let mut d = DepthArrays::default();
        d.qo_indptr.push(0);
        d.page_indptr_sliding.push(0);
        for r in rows {
            d.qo_indptr.push(d.qo_indptr.last().unwrap() + r.0);
            d.page_indptr_sliding.push(d.page_indptr_sliding.last().unwrap() + r.1);
            d.last_page_len.push(r.2);
            d.sliding_window_offset.push(r.3);
            d.sink_size.push(0);
        }
        d
    }

    fn marks(d: &DepthArrays, window: i32, lse: &[f32], o_max: &[f64]) -> Vec<bool> {
        let tokens = d.qo_indptr.last().copied().unwrap_or(0) as usize;
        let mut redo = vec![false; tokens];
        let out = CallOutputs { lse, o_max, unit: 2f64.powi(-24) };
        mark_uncertain_rows(d, window, 16, lse.len() / tokens, &out, &mut redo);
        redo
    }

    #[test]
    fn rows_of_similar_scale_are_kept() {
        // One block, window 24, 24 cached columns (shifted: row 0 sees 23 of them).
        let d = depth(&[(4, 2, 16, 9)]);
        assert_eq!(kv_len(&d, 0, 16), 23);
        assert_eq!(marks(&d, 24, &[3.0, 5.0, -2.0, 1.0], &[0.5; 4]), [false; 4]);
    }

    #[test]
    fn a_row_far_below_an_earlier_row_is_recomputed() {
        // Row 1's lse is ~120 base-2 units below row 0's: its weights may be subnormal.
        let d = depth(&[(3, 2, 16, 9)]);
        assert_eq!(marks(&d, 24, &[150.0, 30.0, 150.0], &[0.5; 3]), [false, true, false]);
        // 100 units below: fine with values of magnitude 0.5 ...
        assert_eq!(marks(&d, 24, &[130.0, 30.0, 130.0], &[0.5; 3]), [false; 3]);
        // ... but not when the row's output (so maybe its values) is tiny.
        assert_eq!(marks(&d, 24, &[130.0, 30.0, 130.0], &[0.5, 1e-9, 0.5]), [false, true, false]);
    }

    #[test]
    fn the_bound_carries_across_kernel_rows() {
        // Two blocks (sequences) past the window; block 0's row 0 is fresh, block 1's is not
        // (it reads block 0's last row): in head 0 it is far below it, in head 1 not.
        let d = depth(&[(2, 2, 16, 9), (2, 2, 16, 8)]);
        // (row, head) layout: lse[row * 2 + head].
        let lse = [200.0, 10.0, 200.0, 10.0, 50.0, 10.0, 50.0, 10.0];
        let redo = marks(&d, 24, &lse, &[0.5; 8]);
        assert_eq!(redo, [false, false, true, true]);
    }

    #[test]
    fn rows_without_columns_or_with_a_non_finite_lse_are_recomputed() {
        // Window 3: rows 2 and 3 of a 4-token step see no cached column.
        let d = depth(&[(4, 1, 8, 6)]);
        assert_eq!(marks(&d, 3, &[1.0, 1.0, 1.0, 1.0], &[0.5; 4]), [false, false, true, true]);
        let d = depth(&[(3, 2, 16, 9)]);
        assert_eq!(marks(&d, 24, &[1.0, f32::NEG_INFINITY, 1.0], &[0.5; 3]), [false, true, false]);
        assert_eq!(marks(&d, 24, &[1.0, f32::NAN, 1.0], &[0.5; 3]), [false, true, true]);
        assert_eq!(marks(&d, 24, &[1.0, -4.95e4, 1.0], &[0.5; 3]), [false, true, false]);
    }

    #[test]
    fn an_unknown_start_recomputes_until_a_fresh_row() {
        // The first visited row's column 0 is masked: the slot's value is unknown.
        let d = depth(&[(2, 2, 16, 8), (1, 1, 4, 0)]);
        assert_eq!(marks(&d, 24, &[1.0, 1.0, 1.0], &[0.5; 3]), [true, true, false]);
    }
}
