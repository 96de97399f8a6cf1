//! How a tensor prints ([`fmt::Display`]): numpy's layout — nested brackets, one row per line,
//! every element padded to one width — with the middle of a large tensor elided as `...` (so
//! printing a huge or broadcast tensor costs what is shown, not its size), and floats with a
//! decimal point (`1.0`, never `1`, which would read as an integer).

use crate::dispatch_dtype;
use crate::element::Element;
use crate::tensor::Tensor;
use ndarray::{ArrayViewD, Axis};
use std::fmt;

/// Tensors with more elements than this print elided (numpy's default `threshold`).
const THRESHOLD: usize = 1000;
/// How many items an elided axis shows at each end (numpy's default `edgeitems`).
const EDGE: usize = 3;
/// Tensors with more dimensions print as a summary (the printer recurses once per dimension;
/// numpy allows 64).
const MAX_DIMS: usize = 64;

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ndim() > MAX_DIMS {
            return write!(f, "<tensor of {} dimensions, dtype {}>", self.ndim(), self.dtype());
        }
        let elide = self.numel() > THRESHOLD;
        dispatch_dtype!(self.dtype(), T => match self.view::<T>() {
            Ok(v) => write_tensor(f, &v, elide),
            Err(e) => write!(f, "<{e}>"),
        })
    }
}

/// The indices of an axis of length `n` that are shown; `None` marks the elided middle.
fn shown(n: usize, elide: bool) -> impl Iterator<Item = Option<usize>> {
    let cut = elide && n > 2 * EDGE;
    let head = if cut { EDGE } else { n };
    let tail = if cut { n - EDGE..n } else { n..n };
    (0..head).map(Some).chain(cut.then_some(None)).chain(tail.map(Some))
}

/// One element as text: `Debug` gives floats their decimal point and the others their usual form.
fn cell<T: Element>(x: &T) -> String {
    format!("{x:?}")
}

/// The text of every shown element, in printing order.
fn cells<T: Element>(v: &ArrayViewD<'_, T>, elide: bool, out: &mut Vec<String>) {
    if v.ndim() == 0 {
        out.extend(v.first().map(cell));
        return;
    }
    for i in shown(v.len_of(Axis(0)), elide).flatten() {
        cells(&v.index_axis(Axis(0), i), elide, out);
    }
}

fn write_tensor<T: Element>(f: &mut fmt::Formatter<'_>, v: &ArrayViewD<'_, T>, elide: bool) -> fmt::Result {
    let mut texts = Vec::new();
    cells(v, elide, &mut texts);
    let width = texts.iter().map(String::len).max().unwrap_or(0);
    write_axis(f, v, elide, 0, width, &mut texts.into_iter())
}

fn write_axis<T: Element>(
    f: &mut fmt::Formatter<'_>,
    v: &ArrayViewD<'_, T>,
    elide: bool,
    depth: usize,
    width: usize,
    texts: &mut impl Iterator<Item = String>,
) -> fmt::Result {
    if v.ndim() == 0 {
        return write!(f, "{:>width$}", texts.next().unwrap_or_default());
    }
    f.write_str("[")?;
    for (k, i) in shown(v.len_of(Axis(0)), elide).enumerate() {
        if k > 0 {
            if v.ndim() == 1 {
                f.write_str(", ")?;
            } else {
                // Rows on lines of their own, blocks of rows apart by blank lines, as numpy.
                f.write_str(",")?;
                for _ in 1..v.ndim() {
                    f.write_str("\n")?;
                }
                write!(f, "{:depth$}", "", depth = depth + 1)?;
            }
        }
        match i {
            Some(i) => write_axis(f, &v.index_axis(Axis(0), i), elide, depth + 1, width, texts)?,
            None => f.write_str("...")?,
        }
    }
    f.write_str("]")
}

#[cfg(test)]
mod tests {
    use crate::{DataType, Device, Tensor};

    #[test]
    fn floats_keep_their_point_and_columns_align() {
        let t = Tensor::from_vec([2, 3], vec![0.0f32, 1.5, -2.0, 3.0, 10.0, 5.0]).unwrap();
        assert_eq!(t.to_string(), "[[ 0.0,  1.5, -2.0],\n [ 3.0, 10.0,  5.0]]");
        let i = Tensor::from_vec([3], vec![1i32, 20, 3]).unwrap();
        assert_eq!(i.to_string(), "[ 1, 20,  3]");
        assert_eq!(Tensor::scalar(2.0f64).to_string(), "2.0");
        assert_eq!(Tensor::from_vec([2], vec![true, false]).unwrap().to_string(), "[ true, false]");
        let h = Tensor::from_vec([2], vec![half::f16::from_f32(1.0), half::f16::from_f32(0.5)]).unwrap();
        assert_eq!(h.to_string(), "[1.0, 0.5]");
        let b = Tensor::from_vec([2], vec![half::bf16::from_f32(-1.0), half::bf16::from_f32(0.25)]).unwrap();
        assert_eq!(b.to_string(), "[-1.0, 0.25]");
    }

    #[test]
    fn three_dimensions_put_blank_lines_between_blocks() {
        let t = Tensor::from_vec([2, 1, 2], vec![1i64, 2, 3, 4]).unwrap();
        assert_eq!(t.to_string(), "[[[1, 2]],\n\n [[3, 4]]]");
        assert_eq!(Tensor::zeros([0, 3], DataType::F32, Device::cpu(0)).unwrap().to_string(), "[]");
    }

    #[test]
    fn too_many_dimensions_print_a_summary() {
        let t = Tensor::zeros(vec![1i64; 100_000], DataType::U8, Device::cpu(0)).unwrap();
        assert_eq!(t.to_string(), "<tensor of 100000 dimensions, dtype uint8>");
    }

    #[test]
    fn large_tensors_print_their_edges_only() {
        let t = Tensor::from_vec([2000], (0..2000).collect::<Vec<i32>>()).unwrap();
        assert_eq!(t.to_string(), "[   0,    1,    2, ..., 1997, 1998, 1999]");
        // A broadcast view of 10^12 elements prints in the time of the 36 it shows.
        let one = Tensor::from_vec([1], vec![7u8]).unwrap();
        let wide =
            Tensor::from_parts(one.storage().clone(), 0, [1_000_000, 1_000_000].into(), Some(vec![0, 0]), DataType::U8)
                .unwrap();
        let text = wide.to_string();
        assert!(text.starts_with("[[7, 7, 7, ..., 7, 7, 7],\n [7, 7, 7, ..., 7, 7, 7],\n"), "{text}");
        assert_eq!(text.matches('7').count(), 36, "{text}");
    }
}
