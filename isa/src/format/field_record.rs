//! A record of the named varint fields the format's readers read (counts, indexes, 32-bit
//! values), for tests that derive crafted files from a valid one: set each count one past the
//! bytes left, each index to its bound, each 32-bit value to 2^32, and check the message names
//! that field at its offset, with no hand-kept offset table that could drift from the reader.

/// How a recorded field is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A count of items, at most `per_byte` of which share one byte of the `left` bytes after it.
    Count {
        /// How many items may share one byte.
        per_byte: usize,
        /// The bytes left in the section after the count.
        left: usize,
    },
    /// An index that must be below `bound`.
    Index {
        /// The table's size.
        bound: usize,
    },
    /// A value that must fit in 32 bits.
    U32,
}

/// One named varint field a reader read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRead {
    /// The field's name in its errors (`"constant count"` is the count of `"constant"`).
    pub what: String,
    /// Its file offset (the offset its errors report).
    pub offset: u64,
    /// The size of its varint in bytes.
    pub len: usize,
    /// How it is checked.
    pub kind: FieldKind,
}

relaxvm_core::field_recorder!(FieldRead);
