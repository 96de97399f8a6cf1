//! One tensor's entry in a shard of a tensor cache (`tensor-cache.json`), as TVM's
//! `dump_tensor_cache` writes it: read by the format, placed in its shard by the layout.

use serde::Deserialize;

/// One tensor of a shard.
#[derive(Deserialize)]
pub(crate) struct ParamRecord {
    /// The cache key.
    pub(crate) name: String,
    /// The tensor's shape.
    pub(crate) shape: Vec<i64>,
    /// The tensor's dtype name (`float32`, `bfloat16`, ...).
    pub(crate) dtype: String,
    /// `raw` or `f32-to-bf16` (only meaningful for float32).
    pub(crate) format: String,
    /// How many bytes the record occupies in the shard.
    pub(crate) nbytes: i64,
    /// Where the record starts in the shard.
    #[serde(rename = "byteOffset")]
    pub(crate) byte_offset: i64,
}
