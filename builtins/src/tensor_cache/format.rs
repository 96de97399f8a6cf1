//! The on-disk format of a TVM tensor cache (`tvm.contrib.tvmjs.dump_tensor_cache`): a directory
//! with `tensor-cache.json` and binary shards.
//!
//! ```json
//! {"metadata": {...},
//!  "records": [{"dataPath": "params_shard_0.bin", "format": "raw-shard", "nbytes": 4096,
//!               "md5sum": "...",
//!               "records": [{"name": "w", "shape": [2, 3], "dtype": "float32",
//!                            "format": "f32-to-bf16", "nbytes": 12, "byteOffset": 0}]}]}
//! ```
//!
//! As TVM 0.27's loader (`src/runtime/vm/tensor_cache_support.cc`): a shard's `format` must be
//! `raw-shard` and its `nbytes` the file's length; `md5sum` and `metadata` are not read; a record
//! of dtype float32 and format `f32-to-bf16` holds bfloat16 bits that widen to float32 (`<< 16`);
//! any other record is the raw native bytes of the tensor. Where TVM would read out of bounds
//! or crash (a record outside its shard, a byte count that disagrees with the shape, negative
//! or overflowing shapes) this loader fails with an error instead, before allocating.

use relaxvm::{DataType, Error, Result, Shape, Tensor};
use serde::Deserialize;
use std::path::Path;

/// The whole `tensor-cache.json`.
#[derive(Deserialize)]
pub(crate) struct Metadata {
    /// The shards, loaded in order.
    pub(crate) records: Vec<ShardRecord>,
}

/// One binary shard and the tensors it holds.
#[derive(Deserialize)]
pub(crate) struct ShardRecord {
    /// The shard's file, relative to the cache directory.
    #[serde(rename = "dataPath")]
    pub(crate) data_path: String,
    /// Must be `raw-shard`.
    pub(crate) format: String,
    /// The shard file's exact length.
    pub(crate) nbytes: i64,
    /// The tensors, in order.
    pub(crate) records: Vec<ParamRecord>,
}

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

/// Reads and parses `<dir>/tensor-cache.json`.
pub(crate) fn read_metadata(dir: &Path) -> Result<Metadata> {
    let path = dir.join("tensor-cache.json");
    // Read as every input is (relaxvm::input_file: a regular file, never a fifo or a device).
    let bytes = relaxvm::input_file::read(&path, &Default::default()).map_err(cannot_read)?;
    let text = String::from_utf8(bytes).map_err(|e| Error::value(format!("malformed {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::value(format!("malformed {}: {e}", path.display())))
}

/// The reader's error (which names the file first) as "cannot read PATH: why".
fn cannot_read(e: Error) -> Error {
    Error::value(format!("cannot read {}", e.to_string().trim_start_matches("I/O error: ")))
}

/// Loads one shard's tensors, in record order.
pub(crate) fn load_shard(dir: &Path, shard: &ShardRecord) -> Result<Vec<(String, Tensor)>> {
    if shard.format != "raw-shard" {
        return Err(Error::value(format!("Only `raw-shard` format is supported, found {:?}", shard.format)));
    }
    let path = dir.join(&shard.data_path);
    // Opened as every input is (a regular file, never a fifo or a device).
    let file = relaxvm::input_file::open(&path, relaxvm::input_file::DEFAULT_MAX_INPUT).map_err(cannot_read)?;
    let len = file.len();
    // Checked before reading, so a wrong size never makes us read (or allocate) a huge file.
    if u64::try_from(shard.nbytes).ok() != Some(len) {
        return Err(Error::value(format!(
            "Encountered an corrupted parameter shard: the record says {} bytes but the file has {len}. It means it is not downloaded completely or downloading is interrupted. Please try to download again.",
            shard.nbytes
        )));
    }
    // Exactly `len` bytes, or an error naming the file (one that changes size is refused).
    let raw = file.read_to_vec(None).map_err(cannot_read)?;
    shard.records.iter().map(|r| Ok((r.name.clone(), load_record(r, &raw)?))).collect()
}

/// Decodes one record from its shard's bytes.
fn load_record(rec: &ParamRecord, raw: &[u8]) -> Result<Tensor> {
    let bad = |m: String| Error::value(format!("parameter {:?}: {m}", rec.name));
    let dtype: DataType = rec.dtype.parse().map_err(|e: Error| bad(e.to_string()))?;
    let shape = Shape::from(rec.shape.clone());
    let numel = shape.numel().ok_or_else(|| bad(format!("invalid shape {shape}")))?;
    let bf16 = dtype == DataType::F32 && rec.format == "f32-to-bf16";
    let stored_size = if bf16 { 2 } else { dtype.itemsize() };
    let expected = numel.checked_mul(stored_size).ok_or_else(|| bad(format!("shape {shape} is too large")))?;
    if usize::try_from(rec.nbytes).ok() != Some(expected) {
        return Err(bad(format!(
            "nbytes is {} but shape {shape} of {} in format {:?} needs {expected}",
            rec.nbytes, rec.dtype, rec.format
        )));
    }
    let start =
        usize::try_from(rec.byte_offset).map_err(|_| bad(format!("negative byteOffset {}", rec.byte_offset)))?;
    let bytes = start.checked_add(expected).and_then(|end| raw.get(start..end)).ok_or_else(|| {
        bad(format!("bytes {start}..{start}+{expected} lie outside the shard of {} bytes", raw.len()))
    })?;
    if bf16 {
        let data: Vec<f32> =
            bytes.chunks_exact(2).map(|c| f32::from_bits(u32::from(u16::from_ne_bytes([c[0], c[1]])) << 16)).collect();
        return Tensor::from_vec(shape, data).map_err(|e| bad(e.to_string()));
    }
    Tensor::from_bytes(dtype, shape, bytes).map_err(|e| bad(e.to_string()))
}
