//! `vm.op.matmul(a, b)`: numpy's `a @ b`.
//!
//! 2-D operands multiply as matrices; a 1-D left operand is a row vector and a 1-D right
//! operand a column vector (that dimension is removed from the result); leading (batch)
//! dimensions broadcast. Scalars and zero-dimensional tensors are errors, as in numpy. The
//! dtypes promote by numpy's table. `float32` and `float64` use the `gemm` crate's kernels
//! ([`float_gemm`](super::float_gemm); `float16`/`bfloat16` compute in `float32`); integers
//! wrap, and booleans give `any(a & b)`.
//!
//! A large product runs on the shared thread pool in tiles of the result whose shape depends
//! on the operands' shapes alone, each computed on one thread the same way wherever it runs,
//! so the result is the same on any number of threads ([`tiled`](super::tiled)). A float
//! result is written by `gemm` into room that is not zeroed first (`float_gemm::product`).

use super::float_gemm::{self, GemmFloat};
use super::num::Num;
use super::promote::promote_types;
use super::tiled::{batched, Plan};
use super::{broadcast_shapes, cast_tensor, fmt_shape, numel, tensor_value, try_zeros};
use crate::args::{self, value_err};
use ndarray::ArrayD;
use relaxvm::{CallCtx, DataType, Result, Tensor, Value};

/// Multiply-adds in one piece of a `float32` product (`float64`: half as many): about 5 ms
/// on one core, so the calling thread checks for an interrupt (Ctrl-C, `vm.interrupt()`)
/// every few milliseconds even in one huge product. Each piece packs its blocks of both
/// operands afresh, so pieces are large: with `gemm`, a 1024x1024 product on one thread takes
/// the same time (19 ms) in 512x512 tiles as whole, and 8% more in 256x1024 bands (of rows;
/// bands of columns are what `tiled::tile_shape` cuts, and they cost no more).
const WORK_PER_PIECE: usize = 1 << 28;

/// Multiply-adds in one piece of the integer (naive) product, some 50 times slower per
/// multiply-add than the float GEMM.
const NAIVE_WORK_PER_PIECE: usize = 1 << 20;

/// `vm.op.matmul(a, b)`.
pub(crate) fn matmul(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 2)?;
    let a = args::tensor(name, args, 0, "lhs")?;
    let b = args::tensor(name, args, 1, "rhs")?;
    let plan = plan(name, a, b)?;
    let dtype = promote_types(a.dtype(), b.dtype());
    let poll = &mut || ctx.check_interrupt();
    match dtype {
        DataType::F64 => gemm::<f64>(name, a, b, &plan, poll).map(tensor_value),
        DataType::F32 => gemm::<f32>(name, a, b, &plan, poll).map(tensor_value),
        DataType::F16 => gemm::<f32>(name, a, b, &plan, poll).map(|r| tensor_value(r.mapv(half::f16::from_f32))),
        DataType::BF16 => gemm::<f32>(name, a, b, &plan, poll).map(|r| tensor_value(r.mapv(half::bf16::from_f32))),
        DataType::Bool => naive::<bool>(name, a, b, &plan, poll).map(tensor_value),
        DataType::I8 => naive::<i8>(name, a, b, &plan, poll).map(tensor_value),
        DataType::I16 => naive::<i16>(name, a, b, &plan, poll).map(tensor_value),
        DataType::I32 => naive::<i32>(name, a, b, &plan, poll).map(tensor_value),
        DataType::I64 => naive::<i64>(name, a, b, &plan, poll).map(tensor_value),
        DataType::U8 => naive::<u8>(name, a, b, &plan, poll).map(tensor_value),
        DataType::U16 => naive::<u16>(name, a, b, &plan, poll).map(tensor_value),
        DataType::U32 => naive::<u32>(name, a, b, &plan, poll).map(tensor_value),
        DataType::U64 => naive::<u64>(name, a, b, &plan, poll).map(tensor_value),
    }
}

fn dims(t: &Tensor) -> Vec<usize> {
    // Tensor dimensions are non-negative: `Tensor::from_parts` checks them.
    t.shape().iter().map(|d| *d as usize).collect()
}

fn plan(name: &str, a: &Tensor, b: &Tensor) -> Result<Plan> {
    let (sa, sb) = (dims(a), dims(b));
    for (i, s) in [(0, &sa), (1, &sb)] {
        if s.is_empty() {
            return Err(value_err(
                name,
                format!("operand {i} must have at least one dimension, found a zero-dimensional tensor"),
            ));
        }
    }
    let (n, k) = if sa.len() == 1 { (1, sa[0]) } else { (sa[sa.len() - 2], sa[sa.len() - 1]) };
    let (k2, m) = if sb.len() == 1 { (sb[0], 1) } else { (sb[sb.len() - 2], sb[sb.len() - 1]) };
    if k != k2 {
        return Err(value_err(
            name,
            format!(
                "the inner dimensions differ: {} @ {} has {k} columns on the left and {k2} rows on the right",
                fmt_shape(&sa),
                fmt_shape(&sb)
            ),
        ));
    }
    let batch_of = |s: &[usize]| s[..s.len().saturating_sub(2)].to_vec();
    let batch = broadcast_shapes(name, &batch_of(&sa), &batch_of(&sb))?;
    let mut out_shape = batch.clone();
    if sa.len() > 1 {
        out_shape.push(n);
    }
    if sb.len() > 1 {
        out_shape.push(m);
    }
    numel(name, &out_shape, 8)?;
    Ok(Plan { batch, n, k, m, out_shape })
}

/// Floats: the `gemm` crate's kernels per tile or batch element.
fn gemm<T: Num + GemmFloat>(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    plan: &Plan,
    poll: &mut dyn FnMut() -> Result<()>,
) -> Result<ArrayD<T>> {
    let (x, y) = (cast_tensor::<T>(name, a, &mut *poll)?, cast_tensor::<T>(name, b, &mut *poll)?);
    let work_per_piece = WORK_PER_PIECE / (std::mem::size_of::<T>() / 4).max(1);
    float_gemm::product(name, x.view(), y.view(), plan, poll, work_per_piece)
}

/// Integers and booleans: a wrapping triple loop.
fn naive<T: Num>(
    name: &str,
    a: &Tensor,
    b: &Tensor,
    plan: &Plan,
    poll: &mut dyn FnMut() -> Result<()>,
) -> Result<ArrayD<T>> {
    let (x, y) = (cast_tensor::<T>(name, a, &mut *poll)?, cast_tensor::<T>(name, b, &mut *poll)?);
    let zeros = try_zeros(name, numel(name, &plan.out_shape, std::mem::size_of::<T>())?)?;
    // The room starts at zero and the kernel adds: a step along k accumulates as it is.
    batched(name, x.view(), y.view(), plan, poll, NAIVE_WORK_PER_PIECE, zeros, |p, q, mut c, _accumulate| {
        for (p_row, mut c_row) in p.rows().into_iter().zip(c.rows_mut()) {
            for (p_ik, q_row) in p_row.iter().zip(q.rows()) {
                for (c_ij, q_kj) in c_row.iter_mut().zip(q_row) {
                    *c_ij = c_ij.plus(p_ik.times(*q_kj));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::tiled::{batched, tile_shape, tiles};
    use super::*;
    use crate::tensor_ops::test_util::{on_one_thread, out, t};
    use ndarray::ArrayViewMut2;
    use relaxvm::Error;
    use relaxvm::Shape;

    const N: &str = "vm.op.matmul";

    fn mm(args: &[Value]) -> Result<Value> {
        matmul(N, &mut CallCtx::detached(), args)
    }

    #[test]
    fn matrices_and_vectors() {
        let a = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t(&[3, 2], vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0]);
        assert_eq!(out::<f32>(mm(&[a.clone(), b.clone()])), (vec![2, 2], DataType::F32, vec![4.0, 5.0, 10.0, 11.0]));
        let v = t(&[3], vec![1.0f32, 1.0, 1.0]);
        assert_eq!(out::<f32>(mm(&[a.clone(), v.clone()])), (vec![2], DataType::F32, vec![6.0, 15.0]));
        assert_eq!(out::<f32>(mm(&[v.clone(), b.clone()])), (vec![2], DataType::F32, vec![2.0, 2.0]));
        assert_eq!(out::<f32>(mm(&[v.clone(), v.clone()])), (vec![], DataType::F32, vec![3.0]));
    }

    #[test]
    fn batched_broadcast_and_dtypes() {
        let a = t(&[2, 1, 1, 2], vec![1i32, 2, 3, 4]);
        let b = t(&[3, 2, 1], vec![1i32, 1, 2, 2, 3, 3]);
        let (s, d, v) = out::<i32>(mm(&[a.clone(), b]));
        assert_eq!((s, d, v), (vec![2, 3, 1, 1], DataType::I32, vec![3, 6, 9, 7, 14, 21]));
        let f = t(&[2, 1], vec![0.5f64, 0.5]);
        let (s, d, v) = out::<f64>(mm(&[a.clone(), f]));
        assert_eq!((s, d, v), (vec![2, 1, 1, 1], DataType::F64, vec![1.5, 3.5]));
        let w = t(&[1, 1], vec![i8::MAX]);
        assert_eq!(out::<i8>(mm(&[w.clone(), t(&[1, 1], vec![2i8])])).2, vec![-2]);
        let bools = t(&[1, 2], vec![true, false]);
        assert_eq!(out::<bool>(mm(&[bools.clone(), t(&[2, 1], vec![false, true])])).2, vec![false]);
        let h = t(&[1, 1], vec![half::f16::from_f32(1.5)]);
        assert_eq!(out::<half::f16>(mm(&[h.clone(), h])).2, vec![half::f16::from_f32(2.25)]);
    }

    #[test]
    fn transposed_and_empty() {
        let base = Tensor::from_vec([2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let tr = Tensor::from_parts(base.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::F64).unwrap();
        let (s, _, v) = out::<f64>(mm(&[Value::Tensor(base), Value::Tensor(tr)]));
        assert_eq!((s, v), (vec![2, 2], vec![14.0, 32.0, 32.0, 77.0]));
        let e = t(&[2, 0], Vec::<f32>::new());
        let (s, _, v) = out::<f32>(mm(&[e, t(&[0, 3], Vec::<f32>::new())]));
        assert_eq!((s, v), (vec![2, 3], vec![0.0; 6]));
        let (s, _, v) = out::<f32>(mm(&[t(&[0, 2], Vec::<f32>::new()), t(&[2, 3], vec![0.0f32; 6])]));
        assert_eq!((s, v.len()), (vec![0, 3], 0));
    }

    #[test]
    fn errors() {
        let a = t(&[2, 3], vec![0.0f32; 6]);
        let e = mm(&[a.clone(), a.clone()]).unwrap_err().to_string();
        assert!(
            e.contains(N) && e.contains("(2, 3) @ (2, 3)") && e.contains("3 columns") && e.contains("2 rows"),
            "{e}"
        );
        let e = mm(&[Value::Tensor(Tensor::scalar(1.0f32)), a.clone()]).unwrap_err().to_string();
        assert!(e.contains("operand 0 must have at least one dimension"), "{e}");
        assert_eq!(
            format!("{:?}", mm(&[a.clone(), Value::Float(2.0)]).expect_err("an error")),
            r#"Type { expected: "tensor as argument 1 (rhs) of vm.op.matmul", found: "float 2.0" }"#
        );
        assert_eq!(
            format!(
                "{:?}",
                mm(&[t(&[2, 2, 3], vec![0.0f32; 12]), t(&[3, 3, 1], vec![0.0f32; 9])]).expect_err("an error")
            ),
            r#"Value("vm.op.matmul: operands could not be broadcast together with shapes (2,) and (3,) (dimension 0: 2 vs 3)")"#
        );
        assert_eq!(
            format!("{:?}", mm(&[a]).expect_err("an error")),
            r#"Arity { func: "vm.op.matmul", expected: "2", got: 1 }"#
        );
        let huge_empty =
            |d: &[i64]| Value::Tensor(Tensor::zeros(Shape::from(d), DataType::F32, Default::default()).unwrap());
        let e = mm(&[huge_empty(&[0, 1 << 40, 1]), huge_empty(&[0, 1, 1 << 40])]).unwrap_err();
        assert!(e.to_string().contains("too many elements"), "{e}");
        let (s, _, v) = out::<f32>(mm(&[huge_empty(&[0, 1 << 20, 1]), huge_empty(&[0, 1, 1 << 20])]));
        assert_eq!((s, v.len()), (vec![0, 1 << 20, 1 << 20], 0));
    }

    /// A tensor's elements, exactly.
    fn bits(t: &Tensor) -> Vec<u64> {
        match t.dtype() {
            DataType::F32 => t.to_vec::<f32>().unwrap().iter().map(|v| u64::from(v.to_bits())).collect(),
            DataType::F64 => t.to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).collect(),
            _ => t.to_vec::<i32>().unwrap().iter().map(|v| *v as u64).collect(),
        }
    }

    fn ramp<T: relaxvm::Element>(shape: &[i64], f: impl Fn(usize) -> T) -> Value {
        let n = shape.iter().product::<i64>() as usize;
        t(shape, (0..n).map(f).collect())
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        // Tiled (one big product), grouped (many small ones) and the integer kernel.
        let big = [
            ramp(&[300, 700], |i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5),
            ramp(&[700, 500], |i| ((i * 104729) % 997) as f32 / 997.0 - 0.5),
        ];
        let small = [ramp(&[600, 32, 48], |i| (i % 13) as f64 * 0.1), ramp(&[48, 40], |i| (i % 7) as f64 - 3.0)];
        let ints = [ramp(&[200, 100], |i| (i % 11) as i32 - 5), ramp(&[100, 300], |i| (i % 5) as i32)];
        for operands in [&big[..], &small[..], &ints[..]] {
            let many = mm(operands).unwrap();
            let one = on_one_thread(|| mm(operands).unwrap());
            let (x, y) = (many.as_tensor().unwrap(), one.as_tensor().unwrap());
            assert_eq!(x.shape(), y.shape());
            assert_eq!(bits(x), bits(y), "{:?}", x.shape());
        }
        // And they are right: against a float64 triple loop.
        let got = out::<f32>(mm(&big)).2;
        let (a, b) = (out::<f32>(Ok(big[0].clone())).2, out::<f32>(Ok(big[1].clone())).2);
        for (i, j) in [(0, 0), (299, 499), (255, 320), (256, 319), (17, 411)] {
            let want: f64 = (0..700).map(|k| a[i * 700 + k] as f64 * b[k * 500 + j] as f64).sum();
            assert!((got[i * 500 + j] as f64 - want).abs() < 1e-3, "({i}, {j}): {} vs {want}", got[i * 500 + j]);
        }
        let got = out::<i32>(mm(&ints)).2;
        let (a, b) = (out::<i32>(Ok(ints[0].clone())).2, out::<i32>(Ok(ints[1].clone())).2);
        let want: Vec<i32> =
            (0..200 * 300).map(|ij| (0..100).map(|k| a[ij / 300 * 100 + k] * b[k * 300 + ij % 300]).sum()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn tiled_products_do_not_depend_on_the_thread_count_either() {
        // Small pieces, so that a 300x700 @ 700x500 product is cut into 4x4 tiles.
        let a = ramp(&[300, 700], |i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5);
        let b = ramp(&[700, 500], |i| ((i * 104729) % 997) as f32 / 997.0 - 0.5);
        let (a, b) = (a.as_tensor().unwrap(), b.as_tensor().unwrap());
        let p = plan(N, a, b).unwrap();
        assert_eq!(tile_shape(300, 700, 500, 1 << 22), (64, 64));
        let run = || {
            let (x, y) = operands::<f32>(a, b);
            let r = float_gemm::product(N, x.view(), y.view(), &p, &mut || Ok(()), 1 << 22);
            r.unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let many = run();
        assert_eq!(many, on_one_thread(run));
        // Tiles block the inner sum their own way, so they agree with the whole product to
        // rounding (the tiles, not the threads, are what depends on the shapes).
        let whole = out::<f32>(mm(&[Value::Tensor(a.clone()), Value::Tensor(b.clone())])).2;
        for (t, w) in many.iter().zip(&whole) {
            assert!((f32::from_bits(*t) - w).abs() <= 1e-4 * w.abs().max(1.0), "{} vs {w}", f32::from_bits(*t));
        }
    }

    #[test]
    fn every_element_of_a_float_product_is_written() {
        // Builds with debug assertions fill a product's room with NaN first, so an element left
        // unwritten would show. Whole products several to a piece with a shorter last piece, a
        // tiled product with no inner dimension, a vector times a batch, thin tiles.
        let cases: [(&[i64], &[i64], usize, f32); 4] = [
            (&[5, 3, 4], &[4, 6], 48, 12.0),
            (&[300, 0], &[0, 500], 1 << 10, 0.0),
            (&[7], &[5, 7, 3], 16, 21.0),
            (&[129, 3], &[3, 65], 1 << 12, 9.0),
        ];
        for (sa, sb, work, each) in cases {
            let (a, b) = (ramp(sa, |_| 3.0f32), ramp(sb, |_| 1.0f32));
            let (a, b) = (a.as_tensor().unwrap(), b.as_tensor().unwrap());
            let p = plan(N, a, b).unwrap();
            let (x, y) = operands::<f32>(a, b);
            let r = float_gemm::product(N, x.view(), y.view(), &p, &mut || Ok(()), work).unwrap();
            assert_eq!(r.shape(), p.out_shape, "{sa:?} @ {sb:?}");
            assert!(r.iter().all(|v| *v == each), "{sa:?} @ {sb:?}: {r:?}");
        }
    }

    #[test]
    fn tiles_cover_the_result_and_depend_on_shapes_only() {
        // Full-height bands of columns where they fit, near-square tiles where they do not.
        assert_eq!(tile_shape(1024, 1024, 1024, WORK_PER_PIECE), (1024, 256));
        assert_eq!(tile_shape(1024, 1024, 1024, 1 << 26), (256, 256));
        assert_eq!(tile_shape(4096, 1024, 4096, WORK_PER_PIECE), (512, 512));
        assert_eq!(tile_shape(1, 1024, 100_000, 1 << 26), (1, 65536));
        assert_eq!(tile_shape(5000, 1 << 30, 3, WORK_PER_PIECE), (64, 3));
        let mut data = vec![0u8; 300 * 500];
        let c = ArrayViewMut2::from_shape((300, 500), &mut data[..]).unwrap();
        let tiles: Vec<_> = tiles(c, 256, 320).into_iter().map(|(r, c, t)| (r, c, t.nrows(), t.ncols())).collect();
        assert_eq!(tiles, [(0, 0, 256, 320), (0, 320, 256, 180), (256, 0, 44, 320), (256, 320, 44, 180)]);
    }

    #[test]
    fn an_interrupt_stops_a_long_product() {
        let x = ramp(&[1024, 1024], |i| (i % 3) as f32);
        let (a, b) = (x.as_tensor().unwrap(), x.as_tensor().unwrap());
        let plan = plan(N, a, b).unwrap();
        assert_eq!(interrupted_after(1, |poll| gemm::<f32>(N, a, b, &plan, poll)), ("interrupted".into(), 2));
    }

    /// A tensor of `shape` whose elements all share one: every stride 0 (numpy's
    /// `broadcast_to` of a scalar), so a huge product needs no memory.
    fn broadcast<T: relaxvm::Element>(v: T, shape: &[i64]) -> Tensor {
        let one = Tensor::from_vec([1], vec![v]).unwrap();
        let strides = vec![0; shape.len()];
        Tensor::from_parts(one.storage().clone(), 0, Shape::new(shape.to_vec()), Some(strides), one.dtype()).unwrap()
    }

    /// Both operands' elements as `T` (nothing to poll).
    fn operands<'a, T: Num>(
        a: &'a Tensor,
        b: &'a Tensor,
    ) -> (super::super::Elements<'a, T>, super::super::Elements<'a, T>) {
        (cast_tensor::<T>(N, a, &mut || Ok(())).unwrap(), cast_tensor::<T>(N, b, &mut || Ok(())).unwrap())
    }

    /// `run`'s error when its poll fails ("interrupted") after the first `ok` calls, and how
    /// many times it polled.
    fn interrupted_after<R: std::fmt::Debug>(
        ok: usize,
        run: impl FnOnce(super::super::Poll<'_>) -> Result<R>,
    ) -> (String, usize) {
        let mut polls = 0;
        let e = run(&mut || {
            polls += 1;
            if polls > ok {
                Err(Error::value("interrupted"))
            } else {
                Ok(())
            }
        })
        .expect_err("interrupted");
        (e.to_string(), polls)
    }

    #[test]
    fn a_thin_product_polls_between_steps_of_its_inner_dimension() {
        // 1 x k @ k x 1: one output element, one tile; with pieces of 2^10 multiply-adds, the
        // inner dimension runs in 2^6 steps, polled between.
        let k = 1 << 16;
        let (a, b) = (broadcast(1.0f32, &[1, k]), broadcast(1.0f32, &[k, 1]));
        let plan = plan(N, &a, &b).unwrap();
        let (x, y) = operands::<f32>(&a, &b);
        let mut polls = 0;
        let r = float_gemm::product(
            N,
            x.view(),
            y.view(),
            &plan,
            &mut || {
                polls += 1;
                Ok(())
            },
            1 << 10,
        )
        .unwrap();
        // The sum is exact (integers below 2^24) whatever the steps.
        assert_eq!(r.into_raw_vec_and_offset().0, vec![k as f32]);
        // One poll before the piece, one between each two steps, one before looking for
        // another piece.
        assert_eq!(polls, 1 + (((k as usize) >> 10) - 1) + 1);
        // An interrupt stops it at the next step.
        let stopped = interrupted_after(3, |poll| float_gemm::product(N, x.view(), y.view(), &plan, poll, 1 << 10));
        assert_eq!(stopped, ("interrupted".into(), 4));
        // The integer product steps the same way (and adds exactly).
        let (a, b) = (broadcast(3i64, &[1, k]), broadcast(2i64, &[k, 1]));
        let (x, y) = operands::<i64>(&a, &b);
        let zeros = vec![0i64; 1];
        let mut polls = 0;
        let kernel =
            |p: ndarray::ArrayView2<'_, i64>, q: ndarray::ArrayView2<'_, i64>, mut c: ArrayViewMut2<'_, i64>, _| {
                c[[0, 0]] += p.row(0).dot(&q.column(0));
            };
        let r = batched(
            N,
            x.view(),
            y.view(),
            &plan,
            &mut || {
                polls += 1;
                Ok(())
            },
            1 << 12,
            zeros,
            kernel,
        )
        .unwrap();
        assert_eq!((r.into_raw_vec_and_offset().0, polls), (vec![6 * k], 1 + 15 + 1));
    }

    #[test]
    fn a_huge_thin_product_is_interrupted() {
        // numpy's `broadcast_to(1, (1, 2**36)) @ broadcast_to(1, (2**36, 1))`: minutes of work
        // in one output element, stopped at the first poll after the first step (of 2^16
        // multiply-adds here: steps of the real size take long in a debug build; the Python
        // tests interrupt the real one).
        let k = 1i64 << 36;
        let (a, b) = (broadcast(1.0f32, &[1, k]), broadcast(1.0f32, &[k, 1]));
        let (x, y) = operands::<f32>(&a, &b);
        let plan = plan(N, &a, &b).unwrap();
        let stopped = interrupted_after(1, |poll| float_gemm::product(N, x.view(), y.view(), &plan, poll, 1 << 16));
        assert_eq!(stopped, ("interrupted".into(), 2));
    }
}
