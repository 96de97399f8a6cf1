//! The string table shared by function, packed-function and parameter names, string
//! constants and location file names.
//!
//! ```text
//! strings ::= count:varint length:varint[count] bytes
//! ```
//!
//! Strings are referenced by index. The lengths come first so the reader finds every string
//! without scanning; the bytes must add up to exactly the rest of the section.

use super::cursor::Cursor;
use super::varint;
use crate::error::Result;
use crate::value::Value;
use indexmap::IndexSet;

/// Interns strings while a file is written; indices are in first-use order.
#[derive(Default)]
pub struct StringTable<'a> {
    set: IndexSet<&'a str>,
}

impl<'a> StringTable<'a> {
    /// The index of `s`, adding it if new.
    pub fn intern(&mut self, s: &'a str) -> u64 {
        self.set.insert_full(s).0 as u64
    }

    /// The section data.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        varint::put(&mut out, self.set.len() as u64);
        for s in &self.set {
            varint::put(&mut out, s.len() as u64);
        }
        for s in &self.set {
            out.extend_from_slice(s.as_bytes());
        }
        out
    }
}

/// A cap on the bytes a decoder may materialise beyond the file itself: strings are
/// referenced by index and locations by entry, so a small crafted file could otherwise ask for
/// the same long string to be copied millions of times.
pub struct Budget {
    left: u64,
}

impl Budget {
    /// The budget for a file whose metadata takes `meta_len` bytes.
    pub fn for_metadata(meta_len: usize) -> Self {
        Budget { left: (16 << 20) + 128 * meta_len as u64 }
    }

    /// Takes `bytes` from the budget, or fails with an error from `c` at `at`.
    pub fn charge(&mut self, bytes: u64, c: &Cursor<'_>, at: usize) -> Result<()> {
        self.left = self.left.checked_sub(bytes).ok_or_else(|| {
            c.err_at(at, "the file expands to too much memory (more than 128 bytes per byte of metadata)")
        })?;
        Ok(())
    }
}

/// The decoded string table: slices of the file, validated as UTF-8.
pub struct Strings<'a> {
    items: Vec<&'a str>,
    shared: Vec<Option<Value>>,
}

impl<'a> Strings<'a> {
    /// Decodes the section.
    pub fn decode(mut c: Cursor<'a>) -> Result<Self> {
        let n = c.count("string", 1)?;
        let mut lens = Vec::with_capacity(n);
        let mut total = 0usize;
        for _ in 0..n {
            let at = c.pos();
            let len = c.varint()?;
            total = usize::try_from(len)
                .ok()
                .and_then(|l| total.checked_add(l))
                .filter(|t| *t <= c.remaining())
                .ok_or_else(|| c.err_at(at, format!("string length {len} runs past the end of the section")))?;
            lens.push(total);
        }
        if total != c.remaining() {
            return Err(c.err(format!("the strings take {total} bytes but {} remain", c.remaining())));
        }
        let mut items = Vec::with_capacity(n);
        let mut prev = 0;
        for end in lens {
            let at = c.pos();
            let bytes = c.bytes(end - prev)?;
            prev = end;
            items.push(std::str::from_utf8(bytes).map_err(|e| c.err_at(at + e.valid_up_to(), "string is not UTF-8"))?);
        }
        Ok(Strings { shared: vec![None; items.len()], items })
    }

    /// The number of strings.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// String `i` (which must be below [`Strings::len`]).
    pub fn get(&self, i: usize) -> &'a str {
        self.items[i]
    }

    /// Reads a string index from `c` and returns the string, borrowed from the file.
    pub fn read(&self, c: &mut Cursor<'_>) -> Result<&'a str> {
        let i = c.index("string index", self.items.len())?;
        Ok(self.items[i])
    }

    /// Reads a string index and returns an owned copy, charged to `budget`.
    pub fn read_owned(&self, c: &mut Cursor<'_>, budget: &mut Budget) -> Result<String> {
        let at = c.pos();
        let s = self.read(c)?;
        budget.charge(s.len() as u64 + 24, c, at)?;
        Ok(s.to_string())
    }

    /// Reads a string index and returns it as a string value, shared by every constant that
    /// names the same string (one allocation per distinct string).
    pub fn read_value(&mut self, c: &mut Cursor<'_>, budget: &mut Budget) -> Result<Value> {
        let at = c.pos();
        let i = c.index("string constant index", self.items.len())?;
        if let Some(v) = &self.shared[i] {
            return Ok(v.clone());
        }
        budget.charge(self.items[i].len() as u64, c, at)?;
        let v = Value::str(self.items[i]);
        self.shared[i] = Some(v.clone());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_and_decodes() {
        let mut t = StringTable::default();
        assert_eq!(t.intern("main"), 0);
        assert_eq!(t.intern("héllo"), 1);
        assert_eq!(t.intern("main"), 0);
        assert_eq!(t.intern(""), 2);
        let bytes = t.encode();
        let s = Strings::decode(Cursor::new(&bytes, 0, "strings")).unwrap();
        assert_eq!(s.items, vec!["main", "héllo", ""]);
    }

    #[test]
    fn rejects_overlong_lengths_and_bad_utf8() {
        let mut bytes = vec![];
        varint::put(&mut bytes, 1);
        varint::put(&mut bytes, 10);
        bytes.extend_from_slice(b"abc");
        assert_eq!(
            format!("{:?}", Strings::decode(Cursor::new(&bytes, 0, "strings")).err().expect("an error")),
            r#"Format("strings section at byte 1: string length 10 runs past the end of the section")"#
        );
        let mut bytes = vec![];
        varint::put(&mut bytes, 1);
        varint::put(&mut bytes, 2);
        bytes.extend_from_slice(&[0xc3, 0x28]);
        let e = Strings::decode(Cursor::new(&bytes, 40, "strings")).err().unwrap().to_string();
        assert!(e.contains("not UTF-8") && e.contains("byte 42"), "{e}");
        let mut bytes = vec![];
        varint::put(&mut bytes, 1);
        varint::put(&mut bytes, 1);
        bytes.extend_from_slice(b"ab");
        assert_eq!(
            format!("{:?}", Strings::decode(Cursor::new(&bytes, 0, "strings")).err().expect("an error")),
            r#"Format("strings section at byte 2: the strings take 1 bytes but 2 remain")"#
        );
    }

    #[test]
    fn budget_caps_copies() {
        let mut b = Budget { left: 10 };
        let c = Cursor::new(&[], 0, "x");
        assert!(b.charge(6, &c, 0).is_ok());
        assert_eq!(
            format!("{:?}", b.charge(6, &c, 0).expect_err("an error")),
            r#"Format("x section at byte 0: the file expands to too much memory (more than 128 bytes per byte of metadata)")"#
        );
    }
}
