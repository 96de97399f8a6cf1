//! A bounds-checked little-endian reader over TVM's serialized bytes (dmlc streams: fixed-width
//! integers, `u64`-counted vectors and strings). Every count is checked against the bytes left
//! before anything is allocated, so a hostile count fails instead of exhausting memory.

use relaxvm::{Error, Result};

/// How a recorded field was read (see [`record_fields`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// Fixed-size bytes: an integer, a float, or bytes whose count was read before.
    Fixed,
    /// A `u64` element count, each element at least `item_size` bytes.
    Count {
        /// The least size of one element that the count is checked against.
        item_size: usize,
    },
    /// The bytes of a UTF-8 string (after its count).
    Text,
}

/// One field a reader read: where it lies, and how its errors name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRead {
    /// What the reader describes in its errors (`relax.VMExecutable`, ...).
    pub what: &'static str,
    /// The field's name in its errors.
    pub field: String,
    /// Its offset within the reader's bytes (the offset its errors report).
    pub pos: usize,
    /// Its address in memory, to find it in a file that holds the reader's bytes (nested
    /// readers, such as the module tree inside `__tvm_ffi__library_bin`, start inside it).
    pub addr: usize,
    /// Its size in bytes.
    pub len: usize,
    /// How it was read.
    pub kind: FieldKind,
}

// Tests derive crafted files from the record (truncate each field, overflow each count, break
// each string), so their table of fields follows the reader; a field read by no test fails there.
relaxvm::field_recorder!(FieldRead);

/// Marks the last recorded field (just read by `take`) as `kind`.
fn mark_last(kind: FieldKind) {
    with_last(|last| last.kind = kind);
}

/// A reader of one serialized object; errors name `what` it reads and the byte offset.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Bytes<'a> {
    /// A reader at the start of `data`, describing it as `what` in errors.
    pub fn new(data: &'a [u8], what: &'static str) -> Self {
        Bytes { data, pos: 0, what }
    }

    /// The current byte offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// An error at the current offset.
    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::format(format!("{} at byte {}: {msg}", self.what, self.pos))
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err(format!("{field} needs {n} bytes, but only {} remain (truncated?)", self.remaining())));
        }
        let out = &self.data[self.pos..self.pos + n];
        note(|| FieldRead {
            what: self.what,
            field: field.to_owned(),
            pos: self.pos,
            addr: out.as_ptr() as usize,
            len: n,
            kind: FieldKind::Fixed,
        });
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let b = self.take(N, field)?;
        Ok(b.try_into().expect("take returned N bytes"))
    }

    /// A `u8`.
    pub fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, field: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// A little-endian `i32`.
    pub fn i32(&mut self, field: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array(field)?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self, field: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }

    /// A little-endian `f64`.
    pub fn f64(&mut self, field: &str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array(field)?))
    }

    /// A `u64` element count of items at least `item_size` bytes each, checked against the
    /// bytes left.
    pub fn count(&mut self, field: &str, item_size: usize) -> Result<usize> {
        let at = self.pos;
        let n = self.u64(field)?;
        mark_last(FieldKind::Count { item_size: item_size.max(1) });
        let fits = usize::try_from(n).ok().filter(|n| n.saturating_mul(item_size.max(1)) <= self.remaining());
        fits.ok_or_else(|| {
            Error::format(format!(
                "{} at byte {at}: {field} count {n} needs at least {} bytes, but only {} remain",
                self.what,
                (n as u128) * item_size.max(1) as u128,
                self.remaining()
            ))
        })
    }

    /// A `u64`-length UTF-8 string.
    pub fn string(&mut self, field: &str) -> Result<String> {
        let n = self.count(field, 1)?;
        let at = self.pos;
        let b = self.take(n, field)?;
        mark_last(FieldKind::Text);
        let s = std::str::from_utf8(b)
            .map_err(|_| Error::format(format!("{} at byte {at}: {field} is not valid UTF-8", self.what)))?;
        let mut out = String::new();
        out.try_reserve_exact(n).map_err(|_| self.err(format!("{field}: no memory for {n} bytes")))?;
        out.push_str(s);
        Ok(out)
    }

    /// An empty vector with room for `n` items, or an error naming `field` when memory runs out.
    /// Callers take `n` from [`Bytes::count`], so the room is bounded by the bytes left.
    pub fn vec_with_capacity<T>(&self, n: usize, field: &str) -> Result<Vec<T>> {
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| self.err(format!("{field}: no memory for {n} items")))?;
        Ok(v)
    }

    /// A `u64`-counted vector of `i64`.
    pub fn vec_i64(&mut self, field: &str) -> Result<Vec<i64>> {
        let n = self.count(field, 8)?;
        let mut v = self.vec_with_capacity(n, field)?;
        for _ in 0..n {
            v.push(self.i64(field)?);
        }
        Ok(v)
    }

    /// A `u64`-counted vector of strings.
    pub fn vec_string(&mut self, field: &str) -> Result<Vec<String>> {
        let n = self.count(field, 8)?;
        let mut v = self.vec_with_capacity(n, field)?;
        for _ in 0..n {
            v.push(self.string(field)?);
        }
        Ok(v)
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(self.err(format!("{} unexpected trailing bytes", self.remaining())));
        }
        Ok(())
    }
}
