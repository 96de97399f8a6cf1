//! A bounds-checked reader over one section's bytes whose errors name the section and the
//! absolute byte offset in the file.

use super::field_record::{note, FieldKind, FieldRead};
use super::varint;
use crate::error::{Error, Result};

/// Reads primitives from a byte slice that starts at file offset `base`.
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    section: &'static str,
}

impl<'a> Cursor<'a> {
    /// A cursor over `data`, which lies at file offset `base` in section `section`.
    pub fn new(data: &'a [u8], base: u64, section: &'static str) -> Self {
        Cursor { data, pos: 0, base, section }
    }

    /// The position within the section.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The absolute file offset of section position `pos`.
    pub fn file_offset(&self, pos: usize) -> u64 {
        self.base.saturating_add(pos as u64)
    }

    /// An error at section position `pos`.
    #[cold]
    pub fn err_at(&self, pos: usize, msg: impl std::fmt::Display) -> Error {
        let noun = if self.section.ends_with("header") { "" } else { " section" };
        Error::format(format!("{}{noun} at byte {}: {msg}", self.section, self.file_offset(pos)))
    }

    /// An error at the current position.
    #[cold]
    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        self.err_at(self.pos, msg)
    }

    /// One byte.
    pub fn byte(&mut self) -> Result<u8> {
        let b = *self.data.get(self.pos).ok_or_else(|| self.err("unexpected end of section"))?;
        self.pos += 1;
        Ok(b)
    }

    /// A dtype's one-byte tag (the constants and the signatures sections share it).
    pub fn dtype(&mut self) -> Result<crate::dtype::DataType> {
        let at = self.pos;
        let tag = self.byte()?;
        crate::dtype::DataType::from_tag(tag).map_err(|_| self.err_at(at, format!("unknown dtype tag {tag}")))
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err(format!("{n} bytes needed, {} left in the section", self.remaining())));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A little-endian fixed-width 64-bit integer.
    pub fn fixed64(&mut self) -> Result<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// An unsigned varint.
    pub fn varint(&mut self) -> Result<u64> {
        let (v, n) = varint::get(&self.data[self.pos..]).ok_or_else(|| self.err("truncated varint"))?;
        self.pos += n;
        Ok(v)
    }

    /// A zigzag-encoded signed varint.
    pub fn signed(&mut self) -> Result<i64> {
        self.varint().map(varint::unzigzag)
    }

    /// A varint that must fit in `u32`; `what` names it in the error.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        let at = self.pos;
        let v = self.varint()?;
        self.record(at, what, "", FieldKind::U32);
        u32::try_from(v).map_err(|_| self.beyond_u32(at, what, v))
    }

    /// A varint that must be below `bound`; `what` names it in the error.
    pub fn index(&mut self, what: &str, bound: usize) -> Result<usize> {
        let at = self.pos;
        let v = self.varint()?;
        self.record(at, what, "", FieldKind::Index { bound });
        match usize::try_from(v) {
            Ok(i) if i < bound => Ok(i),
            _ => Err(self.err_at(at, format!("{what} {v} out of range (there are {bound})"))),
        }
    }

    /// A function index below `bound` that must exceed the previous entry's (`next` is one past
    /// it, and is advanced): tables keyed by function are written in increasing order.
    pub fn increasing_function_index(&mut self, next: &mut usize, bound: usize) -> Result<usize> {
        let at = self.pos;
        let i = self.index("function index", bound)?;
        if i < *next {
            return Err(self.err_at(at, format!("function index {i} out of order (entries must increase)")));
        }
        *next = i + 1;
        Ok(i)
    }

    /// A 32-bit index (function, constant) that must be below `bound`.
    pub fn index32(&mut self, what: &str, bound: usize) -> Result<u32> {
        let at = self.pos;
        let i = self.index(what, bound)?;
        u32::try_from(i).map_err(|_| self.beyond_u32(at, what, i))
    }

    /// The refusal of a 32-bit field's value `v` (read at `at`; `what` names the field).
    fn beyond_u32(&self, at: usize, what: &str, v: impl std::fmt::Display) -> Error {
        self.err_at(at, format!("{what} {v} does not fit in 32 bits"))
    }

    /// A count of items that take at least `min_bytes` bytes each (or, with `per_byte > 1`, of
    /// which up to `per_byte` share one byte): rejected unless that many could fit in the rest
    /// of the section, so that the caller can allocate for it.
    pub fn count(&mut self, what: &str, per_byte: usize) -> Result<usize> {
        let at = self.pos;
        let v = self.varint()?;
        self.record(at, what, " count", FieldKind::Count { per_byte, left: self.remaining() });
        let cap = (self.remaining() as u64).saturating_mul(per_byte as u64);
        match usize::try_from(v) {
            Ok(n) if v <= cap => Ok(n),
            _ => Err(self.err_at(
                at,
                format!("{what} count {v} cannot fit in the {} bytes left in the section", self.remaining()),
            )),
        }
    }

    /// Notes the varint field `what` + `suffix` read from `at` up to here, when a recording
    /// runs (see [`super::field_record`]; the name is built only then).
    fn record(&self, at: usize, what: &str, suffix: &str, kind: FieldKind) {
        note(|| FieldRead { what: format!("{what}{suffix}"), offset: self.file_offset(at), len: self.pos - at, kind });
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(self.err(format!("{} unexpected bytes at the end of the section", self.remaining())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_indices_must_increase() {
        // Prefix varints: (v << 1) | 1 is a one-byte value v.
        let mut c = Cursor::new(&[(2 << 1) | 1, (5 << 1) | 1, (5 << 1) | 1, (9 << 1) | 1], 0, "signatures");
        let mut next = 0;
        assert_eq!(c.increasing_function_index(&mut next, 8).unwrap(), 2);
        assert_eq!(c.increasing_function_index(&mut next, 8).unwrap(), 5);
        let e = c.increasing_function_index(&mut next, 8).unwrap_err().to_string();
        assert!(e.contains("out of order") && e.contains("signatures section at byte 2"), "{e}");
        let e = c.increasing_function_index(&mut next, 8).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn errors_name_section_and_absolute_offset() {
        let mut c = Cursor::new(&[0b11, 0b10], 100, "constants");
        assert_eq!(c.varint().unwrap(), 1);
        let e = c.varint().unwrap_err().to_string();
        assert!(e.contains("constants section at byte 101") && e.contains("truncated"), "{e}");
    }

    #[test]
    fn counts_are_capped_by_remaining_bytes() {
        let mut out = Vec::new();
        super::varint::put(&mut out, 1 << 40);
        out.extend_from_slice(&[0; 10]);
        let mut c = Cursor::new(&out, 0, "strings");
        let e = c.count("string", 1).unwrap_err().to_string();
        assert!(e.contains("cannot fit"), "{e}");
        // 0x07 is the varint 3.
        let mut c = Cursor::new(&[0x07, 0, 0], 0, "strings");
        assert_eq!(
            format!("{:?}", c.count("string", 1).expect_err("an error")),
            r#"Format("strings section at byte 0: string count 3 cannot fit in the 2 bytes left in the section")"#
        );
        let mut c = Cursor::new(&[0x07, 0, 0], 0, "strings");
        assert_eq!(c.count("arg", 2).unwrap(), 3);
    }

    #[test]
    fn index_and_u32_bounds() {
        let mut out = Vec::new();
        super::varint::put(&mut out, 5);
        super::varint::put(&mut out, u64::from(u32::MAX) + 1);
        let mut c = Cursor::new(&out, 0, "functions");
        assert_eq!(
            format!("{:?}", c.index("function", 5).expect_err("an error")),
            r#"Format("functions section at byte 0: function 5 out of range (there are 5)")"#
        );
        assert_eq!(
            format!("{:?}", c.u32("register").expect_err("an error")),
            r#"Format("functions section at byte 1: register 4294967296 does not fit in 32 bits")"#
        );
        assert_eq!(
            format!("{:?}", c.byte().expect_err("an error")),
            r#"Format("functions section at byte 6: unexpected end of section")"#
        );
        assert!(c.finish().is_ok());
    }
}
