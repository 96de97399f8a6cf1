//! A step's int32 arrays in one allocation: each array (or matrix of equal rows) at a 64-byte
//! aligned offset of one storage (the alignment the kernels view tensors in place with), so
//! that `begin_forward` makes one allocation for its twenty-odd kernel arrays, not several each.

use relaxvm::storage::{Storage, ALIGNMENT};
use relaxvm::{DataType, Device, Error, Result, Shape, Tensor, Value};

/// The arrays added so far; [`Packer::finish`] makes their tensors.
#[derive(Default)]
pub(crate) struct Packer<'a> {
    /// Per tensor: its rows (one for a vector) and its byte offset.
    parts: Vec<(Vec<&'a [i32]>, usize)>,
    bytes: usize,
}

impl<'a> Packer<'a> {
    /// Adds a vector; returns its index.
    pub(crate) fn vector(&mut self, v: &'a [i32]) -> usize {
        self.matrix(vec![v])
    }

    /// Adds a `(rows.len(), n)` matrix of rows of equal length `n`; returns its index.
    pub(crate) fn matrix(&mut self, rows: Vec<&'a [i32]>) -> usize {
        let len: usize = rows.iter().map(|r| r.len()).sum();
        self.parts.push((rows, self.bytes));
        self.bytes += (len * 4).div_ceil(ALIGNMENT) * ALIGNMENT;
        self.parts.len() - 1
    }

    /// The tensors, in the order they were added (a vector has shape `(n,)`).
    pub(crate) fn finish(self) -> Result<Vec<Value>> {
        let storage = Storage::alloc_filled(self.bytes, Device::default(), |buf| {
            for (rows, offset) in &self.parts {
                let mut at = *offset;
                for &x in rows.iter().flat_map(|r| r.iter()) {
                    buf[at..at + 4].copy_from_slice(&x.to_ne_bytes());
                    at += 4;
                }
            }
            Ok(())
        })?;
        self.parts
            .iter()
            .map(|(rows, offset)| {
                let n = rows.first().map_or(0, |r| r.len()) as i64;
                if rows.iter().any(|r| r.len() as i64 != n) {
                    return Err(Error::value("internal error: the rows of a packed matrix differ in length"));
                }
                let shape = if rows.len() == 1 { vec![n] } else { vec![rows.len() as i64, n] };
                let t = Tensor::from_parts(storage.clone(), *offset, Shape::from(shape), None, DataType::I32)?;
                Ok(Value::Tensor(t))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_come_back_aligned_with_their_values() {
        let (a, b, c) = ([1, 2, 3], [4, 5], [6, 7]);
        let mut p = Packer::default();
        assert_eq!((p.vector(&a), p.matrix(vec![&b, &c]), p.vector(&[])), (0, 1, 2));
        let t = p.finish().unwrap();
        let tensors: Vec<&Tensor> = t.iter().map(|v| v.as_tensor().unwrap()).collect();
        assert_eq!(tensors[0].to_vec::<i32>().unwrap(), [1, 2, 3]);
        assert_eq!(tensors[1].shape().to_vec(), [2, 2]);
        assert_eq!(tensors[1].to_vec::<i32>().unwrap(), [4, 5, 6, 7]);
        assert_eq!(tensors[2].shape().to_vec(), [0]);
        assert!(tensors.iter().all(|t| (t.data_ptr() as usize).is_multiple_of(ALIGNMENT)));
    }

    #[test]
    fn a_matrix_of_uneven_rows_is_an_error() {
        let mut p = Packer::default();
        p.matrix(vec![&[1, 2], &[3]]);
        let e = p.finish().unwrap_err();
        assert!(e.to_string().contains("internal error: the rows of a packed matrix differ in length"), "{e}");
    }
}
