//! A step's int32 arrays in one allocation: each array (or matrix of equal rows) at a 64-byte
//! aligned offset of one storage (the alignment the kernels view tensors in place with), so
//! that `begin_forward` makes one allocation for its twenty-odd kernel arrays, not several each.

use relaxvm::storage::{Storage, ALIGNMENT};
use relaxvm::{DataType, Device, Error, Result, Shape, Tensor, Value};
use smallvec::SmallVec;

/// A packed tensor's rows (one for a vector; the matrices of a step have three).
type Rows<'a> = SmallVec<[&'a [i32]; 3]>;

/// Where arrays go in a packed storage, one after another, each at a 64-byte boundary: the
/// one account of an array's shape and offset, which [`Packer`] places its arrays by and a
/// refill of packed arrays checks and writes them by (so both agree by construction).
#[derive(Default, Clone, Copy)]
pub(crate) struct Layout {
    bytes: usize,
}

/// An array's place in a [`Layout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Its rows and the first row's length (a tensor of that shape views it).
    pub(crate) shape: (usize, usize),
    /// Whether every row has the first one's length (a matrix's rows must).
    pub(crate) even: bool,
    /// Its byte offset in the storage.
    pub(crate) offset: usize,
}

impl Layout {
    /// Places an array of `rows` after those placed so far: its values, to the next 64-byte
    /// boundary.
    pub(crate) fn place(&mut self, rows: &[&[i32]]) -> Placed {
        let first = rows.first().map_or(0, |r| r.len());
        let len: usize = rows.iter().map(|r| r.len()).sum();
        let offset = self.bytes;
        self.bytes += (len * 4).div_ceil(ALIGNMENT) * ALIGNMENT;
        Placed { shape: (rows.len(), first), even: rows.iter().all(|r| r.len() == first), offset }
    }

    /// The bytes the arrays placed so far take.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Writes `rows` one after another from byte `at` of `buf` (a copy per row, not a checked
/// write per value).
pub(crate) fn write_rows(buf: &mut [u8], at: usize, rows: &[&[i32]]) {
    let mut at = at;
    for r in rows {
        let dst = &mut buf[at..at + r.len() * 4];
        for (d, x) in dst.chunks_exact_mut(4).zip(r.iter()) {
            d.copy_from_slice(&x.to_ne_bytes());
        }
        at += r.len() * 4;
    }
}

/// The arrays added so far; [`Packer::finish`] makes their tensors. Inline up to the arrays of
/// a step of two depths: a decode step packs its arrays without a heap allocation per array
/// (#32 item 8).
#[derive(Default)]
pub(crate) struct Packer<'a> {
    /// Per tensor: its rows and its place.
    parts: SmallVec<[(Rows<'a>, Placed); 24]>,
    layout: Layout,
}

impl<'a> Packer<'a> {
    /// Adds a vector; returns its index (the tests' shorthand for a one-row matrix).
    #[cfg(test)]
    pub(crate) fn vector(&mut self, v: &'a [i32]) -> usize {
        self.matrix(&[v])
    }

    /// Adds a `(rows.len(), n)` matrix of rows of equal length `n`; returns its index.
    pub(crate) fn matrix(&mut self, rows: &[&'a [i32]]) -> usize {
        let placed = self.layout.place(rows);
        self.parts.push((rows.iter().copied().collect(), placed));
        self.parts.len() - 1
    }

    /// Each array's rows and row length, in order: two packers with the same layout put their
    /// arrays at the same offsets, in tensors of the same shapes.
    pub(crate) fn layout(&self) -> Vec<(usize, usize)> {
        self.parts.iter().map(|(_, placed)| placed.shape).collect()
    }

    fn fill(&self, buf: &mut [u8]) {
        for (rows, placed) in &self.parts {
            write_rows(buf, placed.offset, rows);
        }
    }

    /// The storage and the tensors, in the order they were added (a vector has shape `(n,)`).
    pub(crate) fn finish(self) -> Result<(Storage, Vec<Value>)> {
        let storage = Storage::alloc_filled(self.layout.bytes(), Device::default(), |buf| {
            self.fill(buf);
            Ok(())
        })?;
        let values = self
            .parts
            .iter()
            .map(|(_, placed)| {
                if !placed.even {
                    return Err(Error::value("internal error: the rows of a packed matrix differ in length"));
                }
                let (rows, n) = (placed.shape.0 as i64, placed.shape.1 as i64);
                let shape = if rows == 1 { vec![n] } else { vec![rows, n] };
                let t = Tensor::from_parts(storage.clone(), placed.offset, Shape::from(shape), None, DataType::I32)?;
                Ok(Value::Tensor(t))
            })
            .collect::<Result<Vec<Value>>>()?;
        Ok((storage, values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_come_back_aligned_with_their_values() {
        let (a, b, c) = ([1, 2, 3], [4, 5], [6, 7]);
        let mut p = Packer::default();
        assert_eq!((p.vector(&a), p.matrix(&[&b, &c]), p.vector(&[])), (0, 1, 2));
        let (_, t) = p.finish().unwrap();
        let tensors: Vec<&Tensor> = t.iter().map(|v| v.as_tensor().unwrap()).collect();
        assert_eq!(tensors[0].to_vec::<i32>().unwrap(), [1, 2, 3]);
        assert_eq!(tensors[1].shape().to_vec(), [2, 2]);
        assert_eq!(tensors[1].to_vec::<i32>().unwrap(), [4, 5, 6, 7]);
        assert_eq!(tensors[2].shape().to_vec(), [0]);
        assert!(tensors.iter().all(|t| (t.data_ptr() as usize).is_multiple_of(ALIGNMENT)));
    }

    #[test]
    fn rows_written_at_an_arrays_offset_show_under_its_tensor() {
        let (a, b) = ([1, 2, 3], [4, 5]);
        let mut p = Packer::default();
        p.vector(&a);
        p.vector(&b);
        assert_eq!(p.layout(), [(1, 3), (1, 2)]);
        let (storage, t) = p.finish().unwrap();
        let mut layout = Layout::default();
        let (pa, pb) = (layout.place(&[&a]), layout.place(&[&b]));
        assert_eq!((pa.offset, pb.offset, storage.len()), (0, ALIGNMENT, layout.bytes()));
        storage
            .write_with(|buf| {
                write_rows(buf, pa.offset, &[&[7, 8, 9]]);
                write_rows(buf, pb.offset, &[&[10], &[11]]);
            })
            .unwrap();
        assert_eq!(t[0].as_tensor().unwrap().to_vec::<i32>().unwrap(), [7, 8, 9]);
        assert_eq!(t[1].as_tensor().unwrap().to_vec::<i32>().unwrap(), [10, 11]);
        let mut layout = Layout::default();
        let (even, uneven) = (layout.place(&[&a, &a]), layout.place(&[&a, &b]));
        assert_eq!((even.shape, even.even, uneven.shape, uneven.even), ((2, 3), true, (2, 3), false));
        assert_eq!((uneven.offset, layout.bytes()), (ALIGNMENT, 2 * ALIGNMENT));
    }

    #[test]
    fn a_matrix_of_uneven_rows_is_an_error() {
        let mut p = Packer::default();
        p.matrix(&[&[1, 2], &[3]]);
        let e = p.finish().unwrap_err();
        assert!(e.to_string().contains("internal error: the rows of a packed matrix differ in length"), "{e}");
    }
}
