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
//! What the kernel computes for one row (its TIR, `_attention_prefill_cpu`; `fl` is float32
//! rounding, `ε = 2^-24` its unit round-off): `m = -5e4`, `d = 1`, `O = 0`, then for each
//! column `j` in order `S_j = fl(fl(q·k_j)·sm_scale·log2 e)`; a visible column sets
//! `new_m = max(m, S_j)`, a masked one sets `S_j = -5e4` and leaves `new_m` as it is;
//! `d = fl(fl(d·exp2f(m - new_m)) + exp2f(S_j - new_m))`,
//! `O = fl(fl(O·exp2f(m - new_m)) + fl(V_j·exp2f(S_j - new_m)))`, `m = new_m`; at the end
//! `o = fl(O / d)` and `lse = fl(m + log2f(d))`. `exp2f` and `log2f` (libm) are faithful:
//! within one unit of the last place, `2^-149` absolutely in the subnormal range.
//!
//! The certificate. For the rows of one call, in the kernel's order, keep `R`, an upper bound
//! on the `new_m` the last visited row left (`+∞` before the first row: the slot is
//! uninitialised). Let `M` be a row's final `m`, `D` its final `d`, `n` its visible columns.
//! - **Rounding of `lse`** (`up`). `lse_x = M + log2 D` (exact in `M` and the computed `D`)
//!   differs from the written `lse` by the final addition, `≤ ε·|lse_x|`, and `log2f`'s
//!   error, `≤ 2^-23·|log2 D| ≤ 2^-23·149` (`D ≥ 2^-149` when positive); so `|lse_x|` is
//!   below `|lse| + 1` and both together below `2^-24·(|lse| + 1) + 2^-23·149`, less than
//!   `2^-20·(|lse| + 256)`. And `D` itself carries the rounding of a product and a sum for
//!   each of at most `kv + 2` terms (every column, the initial
//!   `d` and the last scaling), each a factor `1 ± ε`: `log2` of the accumulated factor is
//!   below `2(kv + 2)·ε / ln 2 < (kv + 2)·2^-22`. `up(lse, kv)` adds both: it is at least
//!   `M + log2 D_exact` of the same weights in exact arithmetic.
//! - A row whose first column is visible starts fresh: `new_m` becomes its own first score,
//!   `M = own` its largest score, and the largest weight is added as `exp2f(0) = 1` and only
//!   scaled by `exp2f(0) = 1` afterwards, so `D ≥ 1`, `log2f(D) ≥ 0` (faithful) and, rounding
//!   being monotone, `M ≤ lse`: it is TVM's fresh computation, kept, and the new `R` is
//!   `up(lse)` (a bound with room to spare).
//! - A row whose first column is masked has `M = max(stale, own) ≤ max(R, own)`, and
//!   `δ = M - own ≥ 0`. Every computed weight is at most `2^-δ·(1 + 2^-23) + 2^-149` (the
//!   exact weight `2^(S_j - M) ≤ 2^-δ`, plus `exp2f`'s error, relative in the normal range,
//!   absolute in the subnormal one; the later scalings by `exp2f(m - new_m) ≤ 1` only shrink
//!   it), so `D ≤ n·2^-δ·(1 + 2^(δ-149))` up to the `(kv + 2)·2^-22` of `up`, and
//!   `δ ≤ M - lse_x + log2 n + log2(1 + 2^(δ-149)) ≤ R - lse + log2 n + 1 + (up(lse) - lse)`
//!   whenever `δ ≤ 149`: this is `δ_ub`. For `δ > 149` the same bound gives `δ_ub > 148`
//!   (`D ≤ n·2^-148` then), so either way a row with `δ_ub` below the keep threshold (< 125)
//!   has `δ ≤ δ_ub`.
//! - **Error of a kept row.** In the normal range the stale computation rounds as the fresh one
//!   does (each operation `1 ± ε`, scale-free), so its error is the kernel's own. What the
//!   subnormal range adds is absolute, at most `2^-149` per operation: per column, the weight
//!   (`exp2f`), its product with `V_j` and the rescaling of `O` and of `d`. With `Δ` those
//!   additions, the numerator `N = Σ w_j V_j` moves by `|ΔN| ≤ n·2^-149·(maxV + 2)` and the
//!   denominator by `|ΔD| ≤ n·2^-149·2`, `maxV` the largest `|v|` the row attends; so
//!   `o = N / D` (`|o| ≤ maxV`) moves by `(|ΔN| + |o|·|ΔD|) / D ≤ n·2^-149·(3·maxV + 2) / D`,
//!   and `D ≥ 2^-δ` (the largest weight): `|Δo| ≤ n·2^(δ-149)·(3·maxV + 2)`. The row is kept
//!   only when that is at most `ε·maxV`, one float32 rounding unit of the largest value on top
//!   of the kernel's own rounding: `δ_ub ≤ 125 - log2 n - log2(3 + 2/maxV)`. `maxV` is bounded
//!   below by the row's own output, a convex combination of those values: with `A` its largest
//!   magnitude, `maxV ≥ (A - 2^-24)/(1 + 2^-23)` under that same condition (so a row whose
//!   output is ~0 is never kept on this ground).
//! - **The margin** ([`MARGIN`]). The last step dropped terms of second order: `D ≥ 2^-δ` is
//!   really `D ≥ 2^-δ·(1 - 2^-23)` (its largest weight, rounded), the product `ΔN·ΔD / D²` is at
//!   most `2^-24` relative at the threshold, and the test itself is evaluated in float64 (a
//!   dozen operations on values below `2^17` in magnitude, each off by at most `2^-36`; above
//!   that `up`'s relative `2^-20` dominates float64's `2^-52`). In base-2 units of `δ` these
//!   are together below `2^-20`; the margin is that bound rounded up to `0.01` (0.7% of the
//!   smallest weight), which costs nothing: a row within it of the threshold is recomputed.
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

/// How far below the keep threshold a row's bound must be, in base-2 units (the module's
/// documentation derives it: the terms it covers sum to less than `2^-20`).
pub(crate) const MARGIN: f64 = 0.01;

/// A float32 `lse` plus the rounding of its computation (`m + log2 d` in float32, `d` a sum
/// of up to `terms` float32 weights), as an upper bound (derived in the module's documentation).
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
                let keep = v_low > 0.0 && delta <= 125.0 - log_n - (3.0 + 2.0 / v_low).log2() - MARGIN;
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
    fn a_row_at_the_keep_threshold_is_kept_just_inside_and_recomputed_just_outside() {
        // Review R-kv-2. Row 0 is fresh (lse 100), row 1 starts on its maximum with n = 22
        // visible columns of 23 and an output of magnitude 0.5: kept exactly while
        // δ_ub = up(100) - lse1 + log2 22 + 1 + (up(lse1) - lse1)
        //      <= 125 - log2 22 - log2(3 + 2 / v_low) - MARGIN.
        let d = depth(&[(2, 2, 16, 9)]);
        assert_eq!(kv_len(&d, 0, 16), 23);
        let (lse0, a) = (100.0f32, 0.5f64);
        let v_low = (a / (1.0 + 2.0 * 2f64.powi(-24)) - 2f64.powi(-24)) / (1.0 + 2f64.powi(-23));
        let log_n = 22f64.log2();
        let limit = 125.0 - log_n - (3.0 + 2.0 / v_low).log2() - MARGIN;
        let delta = |lse1: f32| {
            let l = f64::from(lse1);
            up(f64::from(lse0), 23) - l + log_n + 1.0 + (up(l, 23) - l)
        };
        // The float32 lse1 nearest the threshold from each side (δ_ub falls as lse1 grows).
        // Bisection on the bit patterns (for negative floats a larger pattern is further
        // from 0): -5 is inside, -20 outside.
        let (mut inb, mut outb) = ((-5.0f32).to_bits(), (-20.0f32).to_bits());
        assert!(delta(f32::from_bits(inb)) <= limit && delta(f32::from_bits(outb)) > limit);
        while outb - inb > 1 {
            let mid = inb + (outb - inb) / 2;
            if delta(f32::from_bits(mid)) <= limit {
                inb = mid;
            } else {
                outb = mid;
            }
        }
        let (inside, outside) = (f32::from_bits(inb), f32::from_bits(outb));
        assert!(delta(outside) > limit && delta(inside) <= limit);
        assert!(limit - delta(inside) < 1e-5, "{} {}", limit, delta(inside));
        assert_eq!(marks(&d, 24, &[lse0, inside], &[a; 2]), [false, false]);
        assert_eq!(marks(&d, 24, &[lse0, outside], &[a; 2]), [false, true]);
        // With the margin gone the outside row would have been kept: the margin decides it.
        assert!(delta(outside) <= limit + MARGIN);
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
