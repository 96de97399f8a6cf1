//! The tiling of a matrix product (`vm.op.matmul`): the result cut into pieces fixed by the
//! shapes alone, run on the shared thread pool, each by a kernel that computes one tile or
//! whole products of a batch the same way on any thread.

use super::num::Num;
use super::{fmt_shape, parallel, shaped};
use crate::args::value_err;
use ndarray::{ArrayD, ArrayView2, ArrayViewD, ArrayViewMut2, Axis, Ix2, IxDyn};
use relaxvm::{Error, Result};

/// The geometry of one `a @ b`.
pub(crate) struct Plan {
    /// The broadcast batch shape.
    pub(crate) batch: Vec<usize>,
    /// Rows of the left operand and of the result.
    pub(crate) n: usize,
    /// The inner dimension.
    pub(crate) k: usize,
    /// Columns of the right operand and of the result.
    pub(crate) m: usize,
    /// The result's shape (without the dimensions of 1-D operands).
    pub(crate) out_shape: Vec<usize>,
}

/// Products below this many multiply-adds (some tens of microseconds) stay on the calling
/// thread: waking the pool would cost more than it saves.
const MIN_PARALLEL_WORK: usize = 1 << 21;

/// The narrowest band of columns (spanning every row) a tile is cut as; narrower ones were not
/// measured to be faster than near-square tiles.
const MIN_BAND: usize = 256;

/// Tiles of the result are multiples of this many rows and columns (whole microkernel
/// blocks), unless the result is smaller.
const TILE_ALIGN: usize = 64;

/// The operand with two matrix axes (a 1-D operand gains one), ready to broadcast.
fn with_matrix_axes<T>(v: ArrayViewD<'_, T>, left: bool) -> ArrayViewD<'_, T> {
    if v.ndim() == 1 {
        v.insert_axis(Axis(if left { 0 } else { 1 }))
    } else {
        v
    }
}

/// The shape `batch + (rows, cols)` an operand broadcasts to.
fn full_shape(plan: &Plan, left: bool) -> Vec<usize> {
    let (r, c) = if left { (plan.n, plan.k) } else { (plan.k, plan.m) };
    plan.batch.iter().copied().chain([r, c]).collect()
}

/// A piece of the result, computed by one task.
enum Piece<'a, T> {
    /// Whole results of the batch elements from `first` on (`data` holds them).
    Whole { first: usize, data: &'a mut [T] },
    /// The tile at `row`, `col` of batch element `bi`'s result.
    Tile { bi: usize, row: usize, col: usize, c: ArrayViewMut2<'a, T> },
}

/// The longest step along the inner dimension: a tile of one row or column goes to `gemm`'s
/// vector kernels, which on stride-0 operands (numpy's `broadcast_to`) measured some 15 times
/// slower per multiply-add than its matrix kernels (a 1x2^28 @ 2^28x1 step took 4 s).
const MAX_INNER_STEP: usize = 1 << 20;

/// How much of the inner dimension one step of a tile of `cells` elements takes: about
/// `work` multiply-adds, at least one, at most [`MAX_INNER_STEP`]. It depends on the shapes
/// alone, so the steps — and the order of a float sum — are the same on any number of threads.
pub(crate) fn inner_step(cells: usize, work: usize) -> usize {
    (work / cells.max(1)).clamp(1, MAX_INNER_STEP)
}

/// The rows and columns of a tile of an `n x m` result with inner dimension `k` that holds
/// about `work` multiply-adds, aligned. It depends on the shapes alone, never on the thread
/// count.
///
/// A tile spans every row of the result when a band at least [`MIN_BAND`] columns wide fits
/// in `work`: `gemm` packs a block of the right operand's columns once and runs it past all the
/// rows of the left one, so a band packs each operand block about once. (A 1024x1024 product on
/// two threads measured 3-4% faster in four 1024x256 bands than in four 512x512 tiles, in
/// interleaved runs.) Otherwise tiles are near-square, so that both operands' blocks are packed
/// once per much work.
pub(crate) fn tile_shape(n: usize, k: usize, m: usize, work: usize) -> (usize, usize) {
    let cells = (work / k.max(1)).max(TILE_ALIGN * TILE_ALIGN);
    if n <= cells / MIN_BAND {
        let cols = (cells / n.max(1) / TILE_ALIGN * TILE_ALIGN).max(TILE_ALIGN).min(m);
        return (n.max(1), cols);
    }
    let side = ((cells as f64).sqrt() as usize / TILE_ALIGN * TILE_ALIGN).max(TILE_ALIGN);
    let rows = side.min(n).max(1);
    let cols = (cells / rows / TILE_ALIGN * TILE_ALIGN).max(TILE_ALIGN).min(m);
    (rows, cols)
}

/// `c` cut into tiles of `rows x cols` (smaller at the edges), with their positions.
pub(crate) fn tiles<T>(c: ArrayViewMut2<'_, T>, rows: usize, cols: usize) -> Vec<(usize, usize, ArrayViewMut2<'_, T>)> {
    let mut out = Vec::new();
    let (mut rest, mut row) = (c, 0);
    while rest.nrows() > 0 {
        let take = rows.min(rest.nrows());
        let (mut band, tail) = rest.split_at(Axis(0), take);
        rest = tail;
        let (height, mut col) = (band.nrows(), 0);
        while band.ncols() > 0 {
            let take = cols.min(band.ncols());
            let (tile, tail) = band.split_at(Axis(1), take);
            band = tail;
            let width = tile.ncols();
            out.push((row, col, tile));
            col += width;
        }
        row += height;
    }
    out
}

/// Runs `kernel` for every batch element, over pieces of the result spread across the
/// thread pool, with `poll` on the calling thread between its pieces and between the steps of
/// a long one (`kernel(a, b, c, accumulate)` writes `a @ b` into `c`, or adds it to `c` when
/// `accumulate`: the steps along the inner dimension after a tile's first). Which pieces there are
/// depends on the shapes alone and each is computed the same way on any thread, so the result
/// does not depend on the number of threads. `data` is the result's room (`plan.out_shape`'s
/// elements), which the kernel is given piece by piece: it returns `Ok` only once every piece
/// was given to the kernel, and the kernel returned.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batched<T: Num, O: Send>(
    name: &str,
    a: ArrayViewD<'_, T>,
    b: ArrayViewD<'_, T>,
    plan: &Plan,
    poll: &mut dyn FnMut() -> Result<()>,
    work_per_piece: usize,
    mut data: Vec<O>,
    kernel: impl Fn(ArrayView2<'_, T>, ArrayView2<'_, T>, ArrayViewMut2<'_, O>, bool) + Sync,
) -> Result<ArrayD<O>> {
    let total = data.len();
    // With no elements there is nothing to compute (and n * m may not even fit then).
    let block = if total == 0 { 0 } else { plan.n * plan.m };
    // Every element is given to the kernel (`float_gemm::product` relies on it): the room is
    // whole results, never a part of one.
    if block > 0 && !total.is_multiple_of(block) {
        return Err(Error::value(format!(
            "{name}: internal error: room for {total} elements is not a whole number of {}x{} results",
            plan.n, plan.m
        )));
    }
    if block > 0 {
        let (a, b) = (with_matrix_axes(a, true), with_matrix_axes(b, false));
        let (fa, fb) = (full_shape(plan, true), full_shape(plan, false));
        let bad = |s: &[usize]| value_err(name, format!("cannot broadcast an operand to {}", fmt_shape(s)));
        let a = a.broadcast(IxDyn(&fa)).ok_or_else(|| bad(&fa))?;
        let b = b.broadcast(IxDyn(&fb)).ok_or_else(|| bad(&fb))?;
        let internal = |e: ndarray::ShapeError| parallel::internal_error(name, e);
        // The operands of batch element `bi`.
        let operands = |bi: usize| -> Result<(ArrayView2<'_, T>, ArrayView2<'_, T>)> {
            let (mut av, mut bv) = (a.view(), b.view());
            let mut rest = bi;
            for (axis, d) in plan.batch.iter().enumerate().rev() {
                let ix = rest % d;
                rest /= d;
                av = av.index_axis_move(Axis(axis), ix);
                bv = bv.index_axis_move(Axis(axis), ix);
            }
            Ok((av.into_dimensionality::<Ix2>().map_err(internal)?, bv.into_dimensionality::<Ix2>().map_err(internal)?))
        };
        let (n, k, m) = (plan.n, plan.k, plan.m);
        // Multiply-adds of one product (a product with k = 0 still writes its zeros).
        let each = n.saturating_mul(k).saturating_mul(m).max(block);
        let batches = total / block;
        let tasks = parallel::tasks_for(each.saturating_mul(batches), MIN_PARALLEL_WORK);
        let work = |piece: Result<Piece<'_, O>>, check: &mut dyn FnMut() -> Result<()>| -> Result<()> {
            match piece? {
                Piece::Whole { first, data } => {
                    for (i, chunk) in data.chunks_exact_mut(block).enumerate() {
                        let (av, bv) = operands(first + i)?;
                        kernel(av, bv, ArrayViewMut2::from_shape((n, m), chunk).map_err(internal)?, false);
                    }
                }
                Piece::Tile { bi, row, col, mut c } => {
                    let (av, bv) = operands(bi)?;
                    let rows = ndarray::Slice::from(row..row + c.nrows());
                    let cols = ndarray::Slice::from(col..col + c.ncols());
                    let (av, bv) = (av.slice_axis(Axis(0), rows), bv.slice_axis(Axis(1), cols));
                    // A tile of more work than a piece (a long inner dimension: a thin product
                    // is one tile) runs in steps along k, accumulated, with a check between.
                    let step = inner_step(c.nrows() * c.ncols(), work_per_piece);
                    let mut k0 = 0;
                    loop {
                        let k1 = k.min(k0 + step);
                        let (ak, bk) = (ndarray::Slice::from(k0..k1), ndarray::Slice::from(k0..k1));
                        kernel(av.slice_axis(Axis(1), ak), bv.slice_axis(Axis(0), bk), c.view_mut(), k0 > 0);
                        if k1 >= k {
                            break;
                        }
                        k0 = k1;
                        check()?;
                    }
                }
            }
            Ok(())
        };
        if each <= work_per_piece {
            // Small products: whole ones, several to a piece.
            let group = (work_per_piece / each).max(1);
            let pieces = data
                .chunks_mut(group.saturating_mul(block))
                .enumerate()
                .map(|(i, data)| Ok(Piece::Whole { first: i * group, data }));
            parallel::for_each_piece(name, pieces, tasks, &work, poll)?;
        } else {
            let (rows, cols) = tile_shape(n, k, m, work_per_piece);
            let pieces = data.chunks_exact_mut(block).enumerate().flat_map(|(bi, chunk)| {
                let tiled = ArrayViewMut2::from_shape((n, m), chunk).map(|c| tiles(c, rows, cols));
                let tiled: Vec<Result<Piece<'_, O>>> = match tiled {
                    Ok(t) => t.into_iter().map(|(row, col, c)| Ok(Piece::Tile { bi, row, col, c })).collect(),
                    Err(e) => vec![Err(internal(e))],
                };
                tiled
            });
            parallel::for_each_piece(name, pieces, tasks, &work, poll)?;
        }
    }
    shaped(name, &plan.out_shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_that_is_not_whole_results_is_refused() {
        let (a, b) = (ArrayD::<f32>::zeros(IxDyn(&[2, 3])), ArrayD::<f32>::zeros(IxDyn(&[3, 2])));
        let plan = Plan { batch: vec![], n: 2, k: 3, m: 2, out_shape: vec![2, 2] };
        let kernel = |_: ArrayView2<'_, f32>, _: ArrayView2<'_, f32>, _: ArrayViewMut2<'_, f32>, _: bool| {};
        let e = batched("f", a.view(), b.view(), &plan, &mut || Ok(()), 1 << 20, vec![0f32; 5], kernel);
        let e = e.expect_err("an error").to_string();
        assert!(e.contains("f: internal error: room for 5 elements is not a whole number of 2x2 results"), "{e}");
    }

    #[test]
    fn grouped_whole_products_take_their_own_operands() {
        // Ten 2x2 products, three to a piece (work 3 x 8): each piece starts at its own batch,
        // and the right operand broadcasts over the batch.
        let a = ArrayD::from_shape_fn(IxDyn(&[10, 2, 2]), |ix| (ix[0] * 4 + ix[1] * 2 + ix[2]) as f32);
        let b = ArrayD::from_shape_fn(IxDyn(&[2, 2]), |ix| if ix[0] == ix[1] { 2.0f32 } else { 0.0 });
        let plan = Plan { batch: vec![10], n: 2, k: 2, m: 2, out_shape: vec![10, 2, 2] };
        let kernel = |p: ArrayView2<'_, f32>, q: ArrayView2<'_, f32>, mut c: ArrayViewMut2<'_, f32>, acc: bool| {
            if acc {
                c += &p.dot(&q);
            } else {
                c.assign(&p.dot(&q));
            }
        };
        let out = batched("f", a.view(), b.view(), &plan, &mut || Ok(()), 3 * 8, vec![0f32; 40], kernel).unwrap();
        assert_eq!(out, a.mapv(|v| v * 2.0));
    }
}
