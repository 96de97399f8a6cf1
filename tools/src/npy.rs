//! numpy `.npy` files as tensors: versions 1.0 to 3.0, the dtypes `bool`, `int8`..`int64`,
//! `uint8`..`uint64`, `float16`, `float32` and `float64`, either byte order, C or Fortran order.
//! Writing produces version 1.0 (2.0 for huge headers), little-endian, C order.
//!
//! Why not npyz or ndarray-npy: both parse the header dict with `py_literal`, whose parser takes
//! time exponential in the nesting depth of a literal (measured: 18 nested `[` take 0.66 s, each
//! further level ×4), so a 100-byte hostile header would hang `relaxvm run --input`. The header
//! here is read by a small parser that accepts exactly numpy's three keys in linear time.
//!
//! ```
//! use relaxvm_core::Tensor;
//! let t = Tensor::from_vec([2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
//! let bytes = relaxvm_tools::npy::to_bytes(&t).unwrap();
//! let back = relaxvm_tools::npy::from_bytes(&bytes).unwrap();
//! assert!(back.content_eq(&t));
//! ```

use crate::{DataType, Shape, Tensor};
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

/// Why a `.npy` file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NpyError {
    /// The file is not a `.npy` file this reader understands.
    #[error("invalid .npy data: {0}")]
    Format(String),
    /// A dtype `.npy` cannot hold (bfloat16) or this reader does not support.
    #[error("unsupported .npy dtype: {0}")]
    Dtype(String),
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The failure.
        source: std::io::Error,
    },
}

fn bad(msg: impl Into<String>) -> NpyError {
    NpyError::Format(msg.into())
}

/// Reads a tensor from the bytes of a `.npy` file.
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor, NpyError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or_else(|| bad("missing the \\x93NUMPY magic"))?;
    let (&[major, _minor], rest) = rest.split_at_checked(2).ok_or_else(|| bad("truncated header"))? else {
        return Err(bad("truncated header"));
    };
    let (len, rest) = match major {
        1 => rest.split_at_checked(2).map(|(l, r)| (usize::from(u16::from_le_bytes([l[0], l[1]])), r)),
        2 | 3 => rest.split_at_checked(4).map(|(l, r)| (u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize, r)),
        v => return Err(bad(format!("unsupported format version {v}"))),
    }
    .ok_or_else(|| bad("truncated header"))?;
    let (header, data) = rest.split_at_checked(len).ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("the header is not text"))?;
    let header = Header::parse(header)?;
    let dtype = header.dtype()?;
    let shape = Shape::from(header.shape.clone());
    if header.fortran_order && shape.len() > 1 {
        // The data is the C-order layout of the reversed shape; view it transposed and copy.
        let reversed: Vec<i64> = shape.iter().rev().copied().collect();
        let swapped = maybe_swap(data, dtype, header.big_endian);
        let t = Tensor::from_bytes(dtype, Shape::from(reversed), &swapped).map_err(|e| bad(e.to_string()))?;
        let mut strides = vec![1i64; shape.len()];
        for i in 1..shape.len() {
            strides[i] = strides[i - 1].saturating_mul(shape[i - 1].max(1));
        }
        let view =
            Tensor::from_parts(t.storage().clone(), 0, shape, Some(strides), dtype).map_err(|e| bad(e.to_string()))?;
        return view.contiguous().map_err(|e| bad(e.to_string()));
    }
    Tensor::from_bytes(dtype, shape, &maybe_swap(data, dtype, header.big_endian)).map_err(|e| bad(e.to_string()))
}

/// The bytes of a `.npy` file holding `t`.
pub fn to_bytes(t: &Tensor) -> Result<Vec<u8>, NpyError> {
    let descr = descr(t.dtype())?;
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {}, }}", t.shape());
    // Pad with spaces so that the data starts at a multiple of 64 bytes; the header ends in \n.
    let (version, prefix) = if header.len() + 11 <= usize::from(u16::MAX) { (1u8, 10) } else { (2u8, 12) };
    let total = (prefix + header.len() + 1).div_ceil(64) * 64;
    header.extend(std::iter::repeat_n(' ', total - prefix - header.len() - 1));
    header.push('\n');
    let mut out = Vec::with_capacity(total + t.nbytes());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        let len = u32::try_from(header.len()).map_err(|_| bad("header too large"))?;
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&t.contiguous_bytes().map_err(|e| bad(e.to_string()))?);
    Ok(out)
}

/// Reads a `.npy` file: a regular file within the default input size limit
/// ([`crate::input_file`]).
pub fn load(path: impl AsRef<Path>) -> Result<Tensor, NpyError> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let bytes = crate::input_file::read(path, &Default::default()).map_err(|e| {
        let source = match e.into_kind() {
            crate::ErrorKind::Io(io) => io,
            other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
        };
        // The reader's messages start with the path, which `NpyError::Io` prints itself.
        let msg = source.to_string();
        let msg = msg.strip_prefix(&format!("{shown}: ")).unwrap_or(&msg).to_string();
        NpyError::Io { path: shown.clone(), source: std::io::Error::new(source.kind(), msg) }
    })?;
    from_bytes(&bytes)
}

/// Writes `t` to a `.npy` file, replacing it atomically
/// ([`write_atomically`](crate::format::write_atomically): special files are refused).
pub fn save(t: &Tensor, path: impl AsRef<Path>) -> Result<(), NpyError> {
    let path = path.as_ref();
    let bytes = to_bytes(t)?;
    crate::format::write_atomically(path, |out| out.write_all(&bytes))
        .map_err(|source| NpyError::Io { path: path.display().to_string(), source })
}

/// numpy's type string for `dtype`, in this machine's byte order.
fn descr(dtype: DataType) -> Result<String, NpyError> {
    let order = if cfg!(target_endian = "little") { '<' } else { '>' };
    let (kind, size) = match dtype {
        DataType::Bool => return Ok("|b1".into()),
        DataType::I8 => return Ok("|i1".into()),
        DataType::U8 => return Ok("|u1".into()),
        DataType::I16 => ('i', 2),
        DataType::I32 => ('i', 4),
        DataType::I64 => ('i', 8),
        DataType::U16 => ('u', 2),
        DataType::U32 => ('u', 4),
        DataType::U64 => ('u', 8),
        DataType::F16 => ('f', 2),
        DataType::F32 => ('f', 4),
        DataType::F64 => ('f', 8),
        DataType::BF16 => return Err(NpyError::Dtype("bfloat16 has no numpy dtype".into())),
    };
    Ok(format!("{order}{kind}{size}"))
}

/// Byte-swaps each element when the file's byte order differs from this machine's.
fn maybe_swap(data: &[u8], dtype: DataType, big_endian: bool) -> std::borrow::Cow<'_, [u8]> {
    let size = dtype.itemsize();
    if big_endian == cfg!(target_endian = "big") || size == 1 {
        return data.into();
    }
    let mut out = data.to_vec();
    out.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    out.into()
}

/// The header dictionary.
#[derive(Debug, Default)]
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<i64>,
    big_endian: bool,
}

impl Header {
    fn dtype(&self) -> Result<DataType, NpyError> {
        let body = self.descr.trim_start_matches(['<', '>', '|', '=']);
        Ok(match body {
            "b1" | "?" => DataType::Bool,
            "i1" => DataType::I8,
            "i2" => DataType::I16,
            "i4" => DataType::I32,
            "i8" => DataType::I64,
            "u1" => DataType::U8,
            "u2" => DataType::U16,
            "u4" => DataType::U32,
            "u8" => DataType::U64,
            "f2" => DataType::F16,
            "f4" => DataType::F32,
            "f8" => DataType::F64,
            _ => {
                return Err(NpyError::Dtype(format!(
                    "{:?}: expected bool, int8..int64, uint8..uint64, float16, float32 or float64",
                    self.descr
                )))
            }
        })
    }

    /// Parses `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`.
    fn parse(text: &str) -> Result<Header, NpyError> {
        let mut p = Lit { s: text.trim_end().as_bytes(), i: 0 };
        let mut h = Header::default();
        let (mut descr, mut order, mut shape) = (false, false, false);
        p.expect(b'{')?;
        loop {
            p.ws();
            if p.eat(b'}') {
                break;
            }
            let key = p.string()?;
            p.ws();
            p.expect(b':')?;
            p.ws();
            match key.as_str() {
                "descr" => {
                    h.descr = p.string()?;
                    descr = true;
                }
                "fortran_order" => {
                    h.fortran_order = p.boolean()?;
                    order = true;
                }
                "shape" => {
                    h.shape = p.tuple()?;
                    shape = true;
                }
                other => return Err(bad(format!("unexpected header key {other:?}"))),
            }
            p.ws();
            if !p.eat(b',') {
                p.ws();
                p.expect(b'}')?;
                break;
            }
        }
        p.ws();
        if p.i != p.s.len() {
            return Err(bad("text after the header dictionary"));
        }
        if !(descr && order && shape) {
            return Err(bad("the header needs 'descr', 'fortran_order' and 'shape'"));
        }
        h.big_endian = h.descr.starts_with('>') || (h.descr.starts_with('=') && cfg!(target_endian = "big"));
        Ok(h)
    }
}

/// A cursor over the header's Python literal.
struct Lit<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lit<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }
    fn eat(&mut self, b: u8) -> bool {
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, b: u8) -> Result<(), NpyError> {
        if self.eat(b) {
            Ok(())
        } else {
            Err(bad(format!("expected '{}' at byte {} of the header", b as char, self.i)))
        }
    }
    fn string(&mut self) -> Result<String, NpyError> {
        let quote = match self.s.get(self.i) {
            Some(q @ (b'\'' | b'"')) => *q,
            _ => return Err(bad(format!("expected a string at byte {} of the header", self.i))),
        };
        self.i += 1;
        let start = self.i;
        while self.s.get(self.i).is_some_and(|b| *b != quote) {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| bad("a header string is not text"))?;
        self.expect(quote)?;
        Ok(text.to_string())
    }
    fn boolean(&mut self) -> Result<bool, NpyError> {
        let rest = &self.s[self.i..];
        if rest.starts_with(b"True") {
            self.i += 4;
            Ok(true)
        } else if rest.starts_with(b"False") {
            self.i += 5;
            Ok(false)
        } else {
            Err(bad(format!("expected True or False at byte {} of the header", self.i)))
        }
    }
    fn tuple(&mut self) -> Result<Vec<i64>, NpyError> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                return Ok(dims);
            }
            let start = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
            dims.push(digits.parse().map_err(|_| bad(format!("expected a dimension at byte {start} of the header")))?);
            self.ws();
            if !self.eat(b',') {
                self.ws();
                self.expect(b')')?;
                return Ok(dims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `np.save` of `np.arange(6, dtype='<i2').reshape(2, 3)`.
    fn numpy_i16() -> Vec<u8> {
        let mut v = b"\x93NUMPY\x01\x00v\x00".to_vec();
        let mut h = "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }".to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        assert_eq!(h.len(), 0x76);
        v.extend_from_slice(h.as_bytes());
        for i in 0..6i16 {
            v.extend_from_slice(&i.to_le_bytes());
        }
        v
    }

    #[test]
    fn reads_what_numpy_writes() {
        let t = from_bytes(&numpy_i16()).unwrap();
        assert_eq!(t.dtype(), DataType::I16);
        assert_eq!(t.shape().dims(), &[2, 3]);
        assert_eq!(t.to_vec::<i16>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(to_bytes(&t).unwrap(), numpy_i16(), "and writes it back byte for byte");
    }

    #[test]
    fn round_trips_every_supported_dtype() {
        for dtype in DataType::ALL.into_iter().filter(|d| *d != DataType::BF16) {
            for dims in [vec![], vec![0], vec![3], vec![2, 1, 2]] {
                let t = Tensor::zeros(dims.clone(), dtype, Default::default()).unwrap();
                let bytes = to_bytes(&t).unwrap();
                assert_eq!(bytes.len() % 64, t.nbytes() % 64, "data starts at a multiple of 64");
                let back = from_bytes(&bytes).unwrap();
                assert!(back.content_eq(&t), "{dtype} {dims:?}");
            }
        }
        let bf = Tensor::zeros([1], DataType::BF16, Default::default()).unwrap();
        assert!(matches!(to_bytes(&bf), Err(NpyError::Dtype(_))));
    }

    fn file(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let h = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}}}\n",
            if fortran { "True" } else { "False" }
        );
        let mut v = b"\x93NUMPY\x02\x00".to_vec();
        v.extend_from_slice(&(h.len() as u32).to_le_bytes());
        v.extend_from_slice(h.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn big_endian_and_fortran_order() {
        let t = from_bytes(&file(">i4", false, "(2,)", &[0, 0, 0, 1, 0, 0, 1, 0])).unwrap();
        assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 256]);
        // [[0, 1, 2], [3, 4, 5]] in Fortran order is 0 3 1 4 2 5
        let data: Vec<u8> = [0u8, 3, 1, 4, 2, 5].to_vec();
        let t = from_bytes(&file("|u1", true, "(2, 3)", &data)).unwrap();
        assert_eq!(t.to_vec::<u8>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
        assert!(t.is_contiguous());
    }

    #[test]
    fn malformed_files_are_errors() {
        let err = |b: &[u8]| from_bytes(b).unwrap_err().to_string();
        assert!(err(b"NUMPY").contains("magic"));
        assert!(err(b"\x93NUMPY\x01").contains("truncated"));
        assert!(err(b"\x93NUMPY\x04\x00\x00\x00").contains("version 4"));
        assert!(err(b"\x93NUMPY\x01\x00\xff\x00{").contains("truncated"));
        assert!(err(&file("<c8", false, "(1,)", &[0; 8])).contains("unsupported .npy dtype"));
        assert!(err(&file("<f4", false, "(2,)", &[0; 4])).contains("needs 8 bytes"));
        assert!(err(&file("|b1", false, "(1,)", &[9])).contains("0 or 1"));
        assert!(err(&file("<f4", false, "(x,)", &[])).contains("dimension"));
        assert!(err(&file("<f4", false, "(99999999999999999999,)", &[])).contains("dimension"));
        assert!(err(&file("<f4", false, "(4611686018427387904, 4)", &[])).contains("invalid tensor shape"));
        assert!(err(&file("<f4", false, "(2305843009213693952, 2)", &[])).contains("too large"));
        let mut h = file("<f4", false, "(1,)", &[0; 4]);
        h[12] = b'[';
        assert!(err(&h).contains("expected '{'"));
        // Deeply nested literals (which make py_literal-based readers take exponential time)
        // are refused at once.
        for shape in ["[".repeat(100_000), "(".repeat(100_000), format!("({})", "((1,),".repeat(50_000))] {
            let e = err(&file("<f4", false, &shape, &[]));
            assert!(e.contains("dimension") || e.contains("expected"), "{e}");
        }
        // every truncation of a valid file is an error, not a panic
        let good = numpy_i16();
        for n in 0..good.len() {
            assert!(format!("{:?}", from_bytes(&good[..n]).expect_err("an error")).starts_with(r#"Format("#), "{n}");
        }
    }
}
