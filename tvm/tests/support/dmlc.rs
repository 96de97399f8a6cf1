//! A writer of TVM's little-endian dmlc stream, for tests that write `relax.VMExecutable`
//! programs byte by byte.
#![allow(dead_code)] // each test crate uses the writes it needs

/// The bytes written so far.
#[derive(Default, Clone)]
pub struct W(pub Vec<u8>);

impl W {
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    pub fn i64(mut self, v: i64) -> Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    pub fn i32(mut self, v: i32) -> Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend(b);
        self
    }
    /// A length-prefixed string.
    pub fn str(self, s: &str) -> Self {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A length-prefixed vector of int64.
    pub fn vec_i64(self, v: &[i64]) -> Self {
        v.iter().fold(self.u64(v.len() as u64), |w, x| w.i64(*x))
    }
}
