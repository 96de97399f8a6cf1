//! A trace as a numpy `.npz` file: every copied tensor is an array named after its place
//! (`step12.args.0`, `step12.result`, `step12.outputs.3`, `step12.result.1` for a tuple's
//! element, `result` for the run's result), and the array `__trace__` holds the steps as
//! UTF-8 JSON (`json.loads(np.load(path)["__trace__"].tobytes())`).
//!
//! numpy has no bfloat16: such tensors are stored as their `uint16` bits, with the dtype in the
//! JSON. Functions, storage and other objects cannot be stored; the file keeps their kind and
//! description, and a loaded trace holds them as [`Opaque`] objects. Tuples nested deeper than
//! 32 are stored as such descriptions too. A tuple shared in several places is stored once and
//! referred to by the name of its first place elsewhere (`{"same": "step3.result"}`), so a file
//! is as small as the trace in memory. Reading (in `load.rs`) treats the file as untrusted.

use super::copy::MAX_COPY_DEPTH;
use super::{Trace, TraceStep};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::npy;
use crate::tensor::Tensor;
use crate::value::Value;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// What the `format` field of the JSON says.
pub(super) const FORMAT: &str = "relaxvm-trace";
/// The version of the layout described above. Version 2 added `same` (a tuple stored once and
/// referred to by name where it is shared); version 1 files are read as they are.
pub(super) const VERSION: u32 = 2;
/// The array holding the JSON.
pub(super) const META: &str = "__trace__";

/// A value a loaded trace cannot hold as itself (a function, storage, an object): its kind
/// (`"function"`, `"storage"`...) and its description when it was saved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opaque {
    /// The value's type name.
    pub kind: String,
    /// Its description.
    pub text: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Meta {
    pub(super) format: String,
    pub(super) version: u32,
    pub(super) function: String,
    pub(super) skipped: usize,
    pub(super) max_bytes: usize,
    pub(super) steps: Vec<StepMeta>,
    /// After the steps: the order `same` references are resolved in.
    pub(super) result: Encoded,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StepMeta {
    pub(super) index: usize,
    pub(super) function: String,
    pub(super) pc: usize,
    pub(super) callee: String,
    pub(super) depth: usize,
    pub(super) end: usize,
    pub(super) failed: bool,
    pub(super) values: Option<ValuesMeta>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ValuesMeta {
    pub(super) args: Vec<Encoded>,
    pub(super) result: Encoded,
    pub(super) outputs: Vec<(usize, Encoded)>,
}

/// A value in the JSON: scalars inline, tensors by the name of their array.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub(super) enum Encoded {
    Null,
    Int(i64),
    /// Rust's shortest round-trip text, so NaN and infinities survive JSON.
    Float(String),
    Bool(bool),
    Str(String),
    Dtype(String),
    Device(String),
    Shape(Vec<i64>),
    Tensor {
        array: String,
        dtype: String,
        shape: Vec<i64>,
    },
    Tuple(Vec<Encoded>),
    /// The tuple stored under this name earlier in the file (steps in order, each one's
    /// arguments, result and outputs, then the run's result): sharing is kept, so a value whose
    /// sharing makes it exponentially large when unfolded stays as small as it is.
    Same(String),
    Opaque {
        kind: String,
        text: String,
    },
}

impl Trace {
    /// Writes the trace to `path` as a numpy `.npz` file (see [`crate::trace`]), replacing
    /// it atomically.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let other = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
        crate::format::write_atomically(path, |out| {
            let mut zip = zip::ZipWriter::new_stream(out);
            let mut enc = Encoder::default();
            // The steps before the run's result: the order `same` references are read in.
            let steps = self.steps.iter().map(|s| enc.step(s)).collect();
            let result = enc.value(&self.result, "result".into(), 0);
            let meta = Meta {
                format: FORMAT.into(),
                version: VERSION,
                function: self.function.clone(),
                skipped: self.skipped,
                max_bytes: self.max_bytes,
                steps,
                result,
            };
            let mut arrays = enc.arrays;
            let json = serde_json::to_vec(&meta)?;
            arrays.push((META.to_string(), Tensor::from_vec([json.len() as i64], json).map_err(|e| other(&e))?));
            for (name, t) in &arrays {
                let bytes = npy::to_bytes(t).map_err(|e| other(&e))?;
                let options = zip::write::SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Stored)
                    .large_file(bytes.len() as u64 >= u64::from(u32::MAX));
                zip.start_file(format!("{name}.npy"), options)?;
                zip.write_all(&bytes)?;
            }
            zip.finish()?;
            Ok(())
        })
        // An I/O error of its kind (a missing folder stays "not found"); the writer's errors
        // already name the trace's path (and a link's target), never the temporary file's.
        .map_err(|e: std::io::Error| Error::from(std::io::Error::new(e.kind(), format!("cannot write trace {e}"))))
    }
}

/// Encodes values, collecting their tensors as arrays and naming each tuple after its place.
#[derive(Default)]
struct Encoder {
    /// The arrays to write, by name.
    arrays: Vec<(String, Tensor)>,
    /// The name of each tuple stored so far, by the address of its items (alive while the
    /// trace is borrowed).
    tuples: HashMap<*const Vec<Value>, String>,
}

impl Encoder {
    fn step(&mut self, s: &TraceStep) -> StepMeta {
        let at = |what: &str| format!("step{}.{what}", s.index);
        StepMeta {
            index: s.index,
            function: s.function.to_string(),
            pc: s.pc,
            callee: s.callee.to_string(),
            depth: s.depth,
            end: s.end,
            failed: s.failed,
            values: s.values.as_ref().map(|v| ValuesMeta {
                args: v.args.iter().enumerate().map(|(i, a)| self.value(a, at(&format!("args.{i}")), 0)).collect(),
                result: self.value(&v.result, at("result"), 0),
                outputs: v.outputs.iter().map(|(i, o)| (*i, self.value(o, at(&format!("outputs.{i}")), 0))).collect(),
            }),
        }
    }

    /// `v` as JSON, its tensors appended to `arrays` under `name` (and `name.k` inside tuples).
    fn value(&mut self, v: &Value, name: String, depth: usize) -> Encoded {
        match v {
            Value::Null => Encoded::Null,
            Value::Int(x) => Encoded::Int(*x),
            Value::Float(x) => Encoded::Float(format!("{x:?}")),
            Value::Bool(x) => Encoded::Bool(*x),
            Value::Str(s) => Encoded::Str(s.to_string()),
            Value::DType(d) => Encoded::Dtype(d.to_string()),
            Value::Device(d) => Encoded::Device(d.to_string()),
            Value::Shape(s) => Encoded::Shape(s.dims().to_vec()),
            Value::Tensor(t) => {
                // numpy cannot hold bfloat16: its bits are stored as uint16.
                let stored = if t.dtype() == DataType::BF16 {
                    Tensor::from_parts(
                        t.storage().clone(),
                        t.byte_offset(),
                        t.shape().clone(),
                        Some(t.strides()),
                        DataType::U16,
                    )
                    .unwrap_or_else(|_| t.clone())
                } else {
                    t.clone()
                };
                self.arrays.push((name.clone(), stored));
                Encoded::Tensor { array: name, dtype: t.dtype().to_string(), shape: t.shape().dims().to_vec() }
            }
            Value::Tuple(items) if depth < MAX_COPY_DEPTH => {
                if let Some(first) = self.tuples.get(&Arc::as_ptr(items)) {
                    return Encoded::Same(first.clone());
                }
                self.tuples.insert(Arc::as_ptr(items), name.clone());
                Encoded::Tuple(
                    items.iter().enumerate().map(|(k, x)| self.value(x, format!("{name}.{k}"), depth + 1)).collect(),
                )
            }
            // A loaded trace's opaque value is saved as it was read.
            Value::Object(o) => match o.downcast_ref::<Opaque>() {
                Some(d) => Encoded::Opaque { kind: d.kind.clone(), text: d.text.clone() },
                None => Encoded::Opaque { kind: v.type_name().into(), text: v.describe() },
            },
            other => Encoded::Opaque { kind: other.type_name().into(), text: other.describe() },
        }
    }
}
