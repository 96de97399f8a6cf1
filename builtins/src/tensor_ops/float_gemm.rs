//! The float matrix product kernel: `c = a @ b` for `f32` and `f64` views, by the `gemm`
//! crate, which has AVX-512 microkernels (about twice matrixmultiply's speed on CPUs that
//! have them) as well as AVX2, NEON and portable ones, chosen at run time.
//!
//! `gemm` takes raw pointers and element strides, so this is the one module of the crate
//! with `unsafe` code. It exposes [`product`], safe, which has `gemm` write a new result
//! without zeroing it first (and then takes it as initialised).

use super::num::Num;
use super::tiled::{batched, Plan};
use super::{numel, try_vec};
use ndarray::{ArrayD, ArrayView2, ArrayViewD, ArrayViewMut2};
use relaxvm::Result;
use std::mem::MaybeUninit;

/// The element types `gemm` multiplies (its entry point panics for any other type).
pub(crate) trait GemmFloat: Copy + Send + Sync + 'static {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Not a number: what builds with debug assertions (the tests') put in a result's room
    /// before a product, so that an element a product failed to write shows.
    const NAN: Self;
}

impl GemmFloat for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NAN: Self = f32::NAN;
}

impl GemmFloat for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NAN: Self = f64::NAN;
}

/// `a @ b` for `plan` (`vm.op.matmul`'s broadcasting and tiling: [`batched`]), in pieces of
/// about `work_per_piece` multiply-adds, in a new array. Its room is not zeroed first (a pass
/// over all of it, some 3% of a 1024x1024 product): `gemm` writes every element.
pub(crate) fn product<T: Num + GemmFloat>(
    name: &str,
    a: ArrayViewD<'_, T>,
    b: ArrayViewD<'_, T>,
    plan: &Plan,
    poll: &mut dyn FnMut() -> Result<()>,
    work_per_piece: usize,
) -> Result<ArrayD<T>> {
    let total = numel(name, &plan.out_shape, std::mem::size_of::<T>())?;
    let mut room = try_vec(name, total)?;
    if cfg!(debug_assertions) {
        room.resize(total, MaybeUninit::new(T::NAN));
    } else {
        room.resize_with(total, MaybeUninit::uninit);
    }
    let out = batched(name, a, b, plan, poll, work_per_piece, room, mat_mul_uninit)?;
    // SAFETY: `batched` returns `Ok` only once it has given every element of the room to the
    // kernel, in pieces that cover the result (whole products, or the tiles `tiles` cuts), and
    // the kernel returned for each; `mat_mul_uninit` writes every element of the `c` it is
    // given (a tile's later steps along k, which add, come after its first, which writes).
    // So every element is initialised.
    Ok(unsafe { out.assume_init() })
}

/// Overwrites `c` with `a @ b` through [`mat_mul_uninit`] (what [`product`] runs per piece),
/// for the tests' destinations of any strides.
#[cfg(test)]
fn mat_mul<T: GemmFloat>(a: ArrayView2<'_, T>, b: ArrayView2<'_, T>, mut c: ArrayViewMut2<'_, T>) {
    use ndarray::ShapeBuilder;
    if c.is_empty() {
        // No element, and strides ndarray may not accept for a view made anew.
        return mat_mul_uninit(a, b, ndarray::Array2::uninit(c.raw_dim()).view_mut(), false);
    }
    let strides = ndarray::Ix2(c.strides()[0] as usize, c.strides()[1] as usize);
    // SAFETY: a view of `c`'s own elements, with its shape and strides, as `MaybeUninit<T>`
    // (`T`'s layout), used while `c` is borrowed mutably here; what is written through it is
    // initialised `T`s, so `c` stays initialised.
    let room = unsafe { ArrayViewMut2::from_shape_ptr(c.raw_dim().strides(strides), c.as_mut_ptr().cast()) };
    mat_mul_uninit(a, b, room, false);
}

/// Writes `a @ b` into `c` on the calling thread, whose elements need not be initialised: it
/// writes every one. With `accumulate`, adds `a @ b` to `c`, whose elements must then all be
/// initialised (a step along the inner dimension after the first, see `tiled::batched`).
///
/// The sum over the inner dimension is blocked the same way for the same shapes and strides,
/// so the same call gives the same bits on any thread.
///
/// # Panics
/// If the shapes do not chain: `a` is `n x k`, `b` is `k x m` and `c` is `n x m`.
fn mat_mul_uninit<T: GemmFloat>(
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    mut c: ArrayViewMut2<'_, MaybeUninit<T>>,
    accumulate: bool,
) {
    match chain(&a, &b, c.dim()) {
        Work::None => {}
        Work::Zeros if accumulate => {}
        Work::Zeros => c.fill(MaybeUninit::new(T::ZERO)),
        Work::Product => {
            // `gemm` hands a product with one row or column or an inner dimension of at most 2
            // to its vector kernels, which take `c` as a slice: it is initialised for them
            // (such a piece writes few elements for its work, so zeroing them costs nothing).
            let (n, k, m) = (a.nrows(), a.ncols(), b.ncols());
            if !accumulate && (n <= 1 || m <= 1 || k <= 2) {
                c.fill(MaybeUninit::new(T::ZERO));
            }
            let strides = (c.strides()[0], c.strides()[1]);
            // SAFETY: as in `mat_mul`; `MaybeUninit<T>` has `T`'s layout, and `gemm` only
            // writes `c`'s elements (`read_dst = false`), or reads and writes them when
            // `accumulate` says they are all initialised (`read_dst = true`).
            unsafe { gemm_into(a, b, c.as_mut_ptr().cast::<T>(), strides, accumulate) }
        }
    }
}

/// What a product of these shapes takes.
enum Work {
    /// No element to write.
    None,
    /// An empty sum (no inner dimension): zeros, written here rather than by `gemm`'s
    /// special case for it.
    Zeros,
    /// A product for `gemm`.
    Product,
}

/// What `a @ b` into a result of `dim` takes, after checking that the shapes chain.
fn chain<T>(a: &ArrayView2<'_, T>, b: &ArrayView2<'_, T>, dim: (usize, usize)) -> Work {
    let ((n, k), (k2, m)) = (a.dim(), b.dim());
    assert!(k == k2 && dim == (n, m), "mat_mul: {:?} @ {:?} into {:?}", a.dim(), b.dim(), dim);
    match (n == 0 || m == 0, k == 0) {
        (true, _) => Work::None,
        (false, true) => Work::Zeros,
        (false, false) => Work::Product,
    }
}

/// `gemm` writing `a @ b` into the `n x m` elements at `c` (`n`, `m` from `a` and `b`, all
/// three non-zero and the shapes chained: [`chain`] said [`Work::Product`]), or adding it to
/// them with `read_dst`.
///
/// # Safety
/// `c` and `strides` (row, column, in elements) are those of a live view of `n x m` elements
/// of `T`'s layout that the caller borrows mutably for the call; with `read_dst`, all of them
/// initialised.
unsafe fn gemm_into<T: GemmFloat>(
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    c: *mut T,
    strides: (isize, isize),
    read_dst: bool,
) {
    let ((n, k), m) = (a.dim(), b.dim().1);
    let (sa, sb) = (a.strides(), b.strides());
    let (c_rs, c_cs) = strides;
    // SAFETY: the pointers come from live ndarray views (`c` by the contract), whose every
    // element `ptr + i * stride[0] + j * stride[1]` for `i`, `j` within the shape is in
    // bounds: `a`'s for i < n, j < k, `b`'s for i < k, j < m and `c`'s for i < n, j < m, which
    // are the elements `gemm` reads and writes given these dimensions (chained: `chain`).
    // `gemm` accepts any strides, negative and zero ones included (it reads `a` and `b` only,
    // so elements shared by a zero-stride view are fine). `c` is borrowed mutably, so it
    // aliases neither operand. `read_dst = false` means `c`'s old contents, maybe never
    // written, are not read, and every element of `c` is written; `read_dst = true` (alpha 1)
    // reads them, initialised by the contract, and adds the product. `T` is `f32` or `f64` (the
    // `GemmFloat` impls), the types `gemm` supports. `Parallelism::None` runs it on this
    // thread, with no pool of its own.
    unsafe {
        gemm::gemm(
            n,
            m,
            k,
            c,
            c_cs,
            c_rs,
            read_dst,
            a.as_ptr(),
            sa[1],
            sa[0],
            b.as_ptr(),
            sb[1],
            sb[0],
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{s, Array2};

    /// `a @ b` by the definition, in f64.
    fn reference(a: ArrayView2<'_, f64>, b: ArrayView2<'_, f64>) -> Array2<f64> {
        Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| (0..a.ncols()).map(|k| a[[i, k]] * b[[k, j]]).sum())
    }

    /// Small integers, so every product and sum is exact in f64 whatever the order.
    fn ints(rows: usize, cols: usize, seed: usize) -> Array2<f64> {
        Array2::from_shape_fn((rows, cols), |(i, j)| ((i * 31 + j * 17 + seed) % 9) as f64 - 4.0)
    }

    #[test]
    fn any_strides_give_the_exact_product() {
        let a = ints(70, 90, 1);
        let b = ints(90, 50, 2);
        let want = reference(a.view(), b.view());
        // Contiguous, transposed (column-major), stepped and reversed operands.
        let at = a.t().to_owned();
        let wide = ints(140, 90, 1);
        let cases: Vec<(ArrayView2<'_, f64>, Array2<f64>)> = vec![
            (a.view(), want.clone()),
            (at.t(), want.clone()),
            (wide.slice(s![..;2, ..]), reference(wide.slice(s![..;2, ..]), b.view())),
            (a.slice(s![..;-1, ..]), reference(a.slice(s![..;-1, ..]), b.view())),
        ];
        for (lhs, want) in cases {
            let mut c = Array2::<f64>::from_elem((70, 50), f64::NAN);
            mat_mul(lhs, b.view(), c.view_mut());
            assert_eq!(c, want);
            // Into a transposed, column-major destination too.
            let mut ct = Array2::<f64>::from_elem((50, 70), f64::NAN);
            mat_mul(lhs, b.view(), ct.view_mut().reversed_axes());
            assert_eq!(ct.t(), want);
        }
    }

    #[test]
    fn zero_strides_and_empty_dimensions() {
        // A row broadcast down the rows (stride 0), as numpy's broadcast_to makes.
        let row = ints(1, 40, 3);
        let a = row.broadcast((30, 40)).unwrap();
        assert_eq!(a.strides(), [0, 1]);
        let b = ints(40, 20, 4);
        let mut c = Array2::<f64>::zeros((30, 20));
        mat_mul(a, b.view(), c.view_mut());
        assert_eq!(c, reference(a, b.view()));
        // And in f32 (exact too: the sums are small integers).
        let (row32, b32) = (row.mapv(|v| v as f32), b.mapv(|v| v as f32));
        let mut c32 = Array2::<f32>::zeros((30, 20));
        mat_mul(row32.broadcast((30, 40)).unwrap(), b32.view(), c32.view_mut());
        assert_eq!(c32, c.mapv(|v| v as f32));
        // k = 0: all zeros, whatever `c` held.
        let mut c = Array2::<f32>::from_elem((3, 4), 7.0);
        mat_mul(Array2::<f32>::zeros((3, 0)).view(), Array2::<f32>::zeros((0, 4)).view(), c.view_mut());
        assert_eq!(c, Array2::<f32>::zeros((3, 4)));
        // n = 0 or m = 0: nothing to write.
        mat_mul(
            Array2::<f32>::zeros((0, 5)).view(),
            Array2::<f32>::zeros((5, 4)).view(),
            Array2::zeros((0, 4)).view_mut(),
        );
        mat_mul(
            Array2::<f32>::zeros((3, 5)).view(),
            Array2::<f32>::zeros((5, 0)).view(),
            Array2::zeros((3, 0)).view_mut(),
        );
    }

    #[test]
    #[should_panic(expected = "mat_mul: (2, 3) @ (2, 3) into (2, 3)")]
    fn shapes_that_do_not_chain_are_refused() {
        let a = Array2::<f32>::zeros((2, 3));
        mat_mul(a.view(), a.view(), Array2::zeros((2, 3)).view_mut());
    }
}
