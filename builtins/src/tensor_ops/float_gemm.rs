//! The float matrix product kernel: `c = a @ b` for `f32` and `f64` views, by the `gemm`
//! crate, which has AVX-512 microkernels (about twice matrixmultiply's speed on CPUs that
//! have them) as well as AVX2, NEON and portable ones, chosen at run time.
//!
//! `gemm` takes raw pointers and element strides, so this is the one module of the crate
//! with `unsafe` code; it exposes a safe function on ndarray views whose shapes it checks.

use ndarray::{ArrayView2, ArrayViewMut2};

/// The element types `gemm` multiplies (its entry point panics for any other type).
pub(crate) trait GemmFloat: Copy + Send + Sync + 'static {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
}

impl GemmFloat for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

impl GemmFloat for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

/// Overwrites `c` with `a @ b` on the calling thread.
///
/// The sum over the inner dimension is blocked the same way for the same shapes and strides,
/// so the same call gives the same bits on any thread.
///
/// # Panics
/// If the shapes do not chain: `a` is `n x k`, `b` is `k x m` and `c` is `n x m`.
pub(crate) fn mat_mul<T: GemmFloat>(a: ArrayView2<'_, T>, b: ArrayView2<'_, T>, mut c: ArrayViewMut2<'_, T>) {
    let ((n, k), (k2, m)) = (a.dim(), b.dim());
    assert!(k == k2 && c.dim() == (n, m), "mat_mul: {:?} @ {:?} into {:?}", a.dim(), b.dim(), c.dim());
    if n == 0 || m == 0 {
        return;
    }
    if k == 0 {
        // An empty sum; `gemm` would leave `c` as it is when told not to read it.
        c.fill(T::ZERO);
        return;
    }
    let (sa, sb) = (a.strides(), b.strides());
    let (c_rs, c_cs) = (c.strides()[0], c.strides()[1]);
    // SAFETY: the pointers come from live ndarray views, whose every element
    // `ptr + i * stride[0] + j * stride[1]` for `i`, `j` within the shape is in bounds: `a`'s
    // for i < n, j < k, `b`'s for i < k, j < m and `c`'s for i < n, j < m, which are the
    // elements `gemm` reads and writes given these dimensions (checked above to chain).
    // `gemm` accepts any strides, negative and zero ones included (it reads `a` and `b` only,
    // so elements shared by a zero-stride view are fine). `c` is borrowed mutably, so it
    // aliases neither operand. `read_dst = false` means `c`'s old contents, maybe never
    // written, are not read. `T` is `f32` or `f64` (the `GemmFloat` impls), the types `gemm`
    // supports. `Parallelism::None` runs it on this thread, with no pool of its own.
    unsafe {
        gemm::gemm(
            n,
            m,
            k,
            c.as_mut_ptr(),
            c_cs,
            c_rs,
            false,
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
