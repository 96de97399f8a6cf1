//! The first masked row of TVM's causal sliding-window prefill kernel, made defined.
//!
//! TVM 0.27's CPU paged-prefill kernel (`batch_prefill_paged_kv_cpu_sliding_window`, run for an
//! `mha_sliding` layer in a step that appends after attention, with `causal = 1`) keeps the
//! running maximum of a query row in a local, `new_m`, that it sets only on columns the mask
//! lets through; on a masked column it goes on with whatever `new_m` holds. The first query row
//! it visits starts with `new_m` never written — an uninitialised stack slot (in the LLVM IR,
//! a `phi` of `undef` at the loop's entry) — and when that row's first column is masked, which
//! happens once the block's cached length reaches the window `W` (row 0 sees columns
//! `kv_len - W + 1 ..`), the row's result depends on what an earlier call left in that slot:
//! in TVM, leftovers of its C++ runtime (process-dependent, ASLR), in relaxvm, of its own
//! frames. Later rows and blocks read the value the row before left, which is defined but not
//! theirs: a row whose scores are far below that value underflows to NaN (attack finding
//! kvcache/01); where TVM's result is finite relaxvm keeps its bytes, and the rows it leaves
//! non-finite are computed again one kernel row per call (`sliding_rows`).
//!
//! relaxvm makes that first row defined without changing the kernel: the first kernel row
//! (block) with cached columns, when its row 0 would start masked, is given a window offset
//! `s = kv_len - W + 1` larger (and its RoPE offset as much), so the kernel skips the `s`
//! leading columns row 0 masks instead of visiting them. Each row `r` then masks the same
//! columns as before (`col' = col - s >= r`), row 0's first column is visible, and its result
//! is what TVM gives whenever its stale value is harmless (no larger than the row's first
//! score): the masked columns contribute exactly zero either way. (A block holding an attention
//! sink, whose columns come first and would stay, cannot occur: relaxvm refuses a sequence's own
//! sliding window on a cache with sliding layers; such a row would be left as TVM runs it.)

/// What the causal sliding-window prefill kernel's first visited row needs for a depth.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum SlidingFirstRow {
    /// Its first column is visible (or the depth has no cached columns): nothing to do.
    #[default]
    Defined,
    /// Kernel row `row` had its window offset moved by `shift` columns.
    Shifted { row: usize, shift: i32 },
}

/// One depth's arrays the kernel reads to find its columns (`length_info` and the rest).
pub(crate) struct Columns<'a> {
    pub(crate) qo_indptr: &'a [i32],
    pub(crate) page_indptr: &'a [i32],
    pub(crate) last_page_len: &'a [i32],
    pub(crate) sink_size: &'a [i32],
    pub(crate) window_offset: &'a mut [i32],
    pub(crate) k_rope_pos_offset: &'a mut [i32],
}

impl Columns<'_> {
    /// The cached columns kernel row `b` attends (the kernel's `kv_chunk_len`).
    fn kv_len(&self, b: usize, ps: i32) -> i32 {
        let pages = self.page_indptr[b + 1] - self.page_indptr[b];
        if pages == 0 {
            return 0;
        }
        (pages - 1) * ps + self.last_page_len[b] - self.window_offset[b] + self.sink_size[b]
    }
}

/// Makes the first visited row of a depth defined for the causal sliding-window prefill
/// kernel of window `window` (see the module's documentation); returns what it did.
pub(crate) fn define_first_row(c: Columns<'_>, window: i32, ps: i32) -> SlidingFirstRow {
    let rows = c.qo_indptr.len().saturating_sub(1);
    // The kernel visits rows in order (for the first head); a row without queries or without
    // cached columns leaves the slot as it found it.
    let Some(b) = (0..rows).find(|&b| c.qo_indptr[b + 1] > c.qo_indptr[b] && c.kv_len(b, ps) > 0) else {
        return SlidingFirstRow::Defined;
    };
    let shift = c.kv_len(b, ps) - window + 1;
    if shift <= 0 || c.sink_size[b] > 0 {
        return SlidingFirstRow::Defined;
    }
    c.window_offset[b] += shift;
    c.k_rope_pos_offset[b] += shift;
    SlidingFirstRow::Shifted { row: b, shift }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `define_first_row` on kernel rows given as (queries, pages, last page length,
    /// window offset, sink); returns the outcome, the offsets and the RoPE offsets after it.
    fn run(rows: &[(i32, i32, i32, i32, i32)], window: i32) -> (SlidingFirstRow, Vec<i32>, Vec<i32>) {
        let (mut qo, mut pages) = (vec![0], vec![0]);
        for r in rows {
            qo.push(qo.last().unwrap() + r.0);
            pages.push(pages.last().unwrap() + r.1);
        }
        let last: Vec<i32> = rows.iter().map(|r| r.2).collect();
        let mut offset: Vec<i32> = rows.iter().map(|r| r.3).collect();
        let sink: Vec<i32> = rows.iter().map(|r| r.4).collect();
        let mut rope = vec![100; rows.len()];
        let c = Columns {
            qo_indptr: &qo,
            page_indptr: &pages,
            last_page_len: &last,
            sink_size: &sink,
            window_offset: &mut offset,
            k_rope_pos_offset: &mut rope,
        };
        let out = define_first_row(c, window, 16);
        (out, offset, rope)
    }

    #[test]
    fn a_first_row_inside_the_window_is_left_alone() {
        // 3 pages, 5 tokens in the last, offset 16: 21 cached columns < window 24.
        assert_eq!(run(&[(8, 3, 5, 16, 0)], 24), (SlidingFirstRow::Defined, vec![16], vec![100]));
        // No cached columns at all.
        assert_eq!(run(&[(8, 0, 0, 0, 0)], 24).0, SlidingFirstRow::Defined);
    }

    #[test]
    fn a_full_window_skips_the_columns_row_0_masks() {
        // 37 tokens, window 24: offset 13, 24 cached columns; row 0 masks column 0.
        assert_eq!(run(&[(8, 3, 5, 13, 0)], 24), (SlidingFirstRow::Shifted { row: 0, shift: 1 }, vec![14], vec![101]));
    }

    #[test]
    fn the_first_row_with_queries_and_columns_is_the_one_shifted() {
        // Row 0 has no cached columns, row 1 a full window, row 2 too (it reads the value row 1
        // left, defined): only row 1 moves.
        let (out, offset, rope) = run(&[(4, 0, 0, 0, 0), (2, 3, 5, 13, 0), (2, 3, 5, 13, 0)], 24);
        assert_eq!(out, SlidingFirstRow::Shifted { row: 1, shift: 1 });
        assert_eq!((offset, rope), (vec![0, 14, 13], vec![100, 101, 100]));
    }

    #[test]
    fn a_first_row_with_an_attention_sink_is_not_moved() {
        // 2 pages, last 16, offset 4, sink 4: 32 columns, window 24 (moving the offset would
        // skip tokens after the sink, not the masked ones).
        assert_eq!(run(&[(3, 2, 16, 4, 4)], 24), (SlidingFirstRow::Defined, vec![4], vec![100]));
    }
}
