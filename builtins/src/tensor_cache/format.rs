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
//! or overflowing shapes) this loader fails with an error instead, before allocating. Files that
//! TVM would load but whose sizes do not bound what loading makes (records sharing bytes, a
//! shard file named twice) are refused too: see [`load_shard`].

use super::layout::{self, Plan};
use super::record::ParamRecord;
use relaxvm::input_file::FileIdentity;
use relaxvm::{DataType, Device, Error, Result, Storage, Tensor};
use serde::Deserialize;
use std::collections::HashMap;
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

/// The shard files a load has read so far, by identity: a file named twice (the same
/// `dataPath`, or two paths through links) is refused, so that what a load keeps is bounded by
/// the files' sizes (see [`load_shard`]).
#[derive(Default)]
pub(crate) struct SeenShards(HashMap<FileIdentity, String>);

/// Loads one shard's tensors, in record order.
///
/// What a load may produce is bounded by what it reads: the records of a shard must not share
/// a byte (checked before the file is read; TVM's writer lays them end to end), a shard file
/// may appear once per load (`seen`), and a record decodes to at most twice its stored size
/// (`f32-to-bf16`). So a load holds at most three times the shards' total size (the file read
/// and its decoded records), whatever the metadata says.
pub(crate) fn load_shard(dir: &Path, shard: &ShardRecord, seen: &mut SeenShards) -> Result<Vec<(String, Tensor)>> {
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
    if let Some(id) = file.identity() {
        if let Some(first) = seen.0.insert(id, shard.data_path.clone()) {
            return Err(Error::value(format!(
                "{:?} is the same file as the earlier shard {first:?}: each shard file may be named once",
                shard.data_path
            )));
        }
    }
    let plans = layout::plan(&shard.records, len)?;
    // Exactly `len` bytes, or an error naming the file (one that changes size is refused).
    let raw = file.read_to_vec(None).map_err(cannot_read)?;
    plans.iter().map(|p| Ok((p.rec.name.clone(), decode(p, &raw)?))).collect()
}

/// Decodes one planned record from its shard's bytes (which [`layout::plan`] checked it lies in).
fn decode(plan: &Plan<'_>, raw: &[u8]) -> Result<Tensor> {
    let bad = |m: String| Error::value(format!("parameter {:?}: {m}", plan.rec.name));
    let bytes = &raw[plan.range.clone()];
    if plan.bf16 {
        // Each stored bfloat16 widens to a float32: allocated fallibly (twice the stored size).
        let storage = Storage::alloc_filled(bytes.len() * 2, Device::cpu(0), |out| {
            for (o, c) in out.chunks_exact_mut(4).zip(bytes.chunks_exact(2)) {
                let f = f32::from_bits(u32::from(u16::from_ne_bytes([c[0], c[1]])) << 16);
                o.copy_from_slice(&f.to_ne_bytes());
            }
            Ok(())
        })
        .map_err(|e| bad(e.to_string()))?;
        return Tensor::from_parts(storage, 0, plan.shape.clone(), None, DataType::F32).map_err(|e| bad(e.to_string()));
    }
    Tensor::from_bytes(plan.dtype, plan.shape.clone(), bytes).map_err(|e| bad(e.to_string()))
}
