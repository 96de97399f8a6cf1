//! A trace as a numpy `.npz` file: every copied tensor is an array named after its place
//! (`step12.args.0`, `step12.result`, `step12.outputs.3`, `step12.result.1` for a tuple's
//! element, `result` for the run's result), and the array `__trace__` holds the steps as
//! UTF-8 JSON (`json.loads(np.load(path)["__trace__"].tobytes())`).
//!
//! numpy has no bfloat16: such tensors are stored as their `uint16` bits, with the dtype in the
//! JSON. Functions, storage and other objects cannot be stored; the file keeps their kind and
//! description, and a loaded trace holds them as [`Opaque`] objects. Tuples nested deeper than
//! 32 are stored as such descriptions too.

use super::copy::MAX_COPY_DEPTH;
use super::{StepValues, Trace, TraceStep};
use crate::arcstr::ArcStr;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::npy;
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::value::Value;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

/// What the `format` field of the JSON says.
const FORMAT: &str = "relaxvm-trace";
/// The version of the layout described above.
const VERSION: u32 = 1;
/// The array holding the JSON.
const META: &str = "__trace__";
/// Deflate expands at most about 1032 times: a member claiming more is not a real file.
const MAX_DEFLATE_RATIO: u64 = 1100;

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
struct Meta {
    format: String,
    version: u32,
    function: String,
    skipped: usize,
    max_bytes: usize,
    result: Encoded,
    steps: Vec<StepMeta>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepMeta {
    index: usize,
    function: String,
    pc: usize,
    callee: String,
    depth: usize,
    end: usize,
    failed: bool,
    values: Option<ValuesMeta>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValuesMeta {
    args: Vec<Encoded>,
    result: Encoded,
    outputs: Vec<(usize, Encoded)>,
}

/// A value in the JSON: scalars inline, tensors by the name of their array.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum Encoded {
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
            let mut arrays = Vec::new();
            let meta = Meta {
                format: FORMAT.into(),
                version: VERSION,
                function: self.function.clone(),
                skipped: self.skipped,
                max_bytes: self.max_bytes,
                result: encode(&self.result, "result".into(), &mut arrays, 0),
                steps: self.steps.iter().map(|s| encode_step(s, &mut arrays)).collect(),
            };
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
        // An I/O error of its kind (a missing folder stays "not found"), naming the trace's path
        // rather than the temporary file's.
        .map_err(|e: std::io::Error| {
            Error::from(std::io::Error::new(e.kind(), format!("cannot write trace {}: {e}", path.display())))
        })
    }

    /// Reads a trace written by [`save`](Self::save).
    pub fn load(path: impl AsRef<Path>) -> Result<Trace> {
        let path = path.as_ref();
        let fail = |e: &dyn std::fmt::Display| Error::value(format!("cannot read trace {}: {e}", path.display()));
        // A regular file within the default input size limit (never a fifo or a device).
        // The reader's message starts with the path, as this one's does.
        let file = crate::input_file::open(path, crate::input_file::DEFAULT_MAX_INPUT)
            .map_err(|e| {
                Error::value(format!("cannot read trace {}", e.to_string().trim_start_matches("I/O error: ")))
            })?
            .into_file();
        let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| fail(&e))?;
        let mut read = |name: &str| -> Result<Tensor> {
            let mut member = zip.by_name(&format!("{name}.npy")).map_err(|e| fail(&format!("array {name:?}: {e}")))?;
            let size = member.size();
            if size > member.compressed_size().saturating_mul(MAX_DEFLATE_RATIO).saturating_add(4096) {
                return Err(fail(&format!("array {name:?} claims {size} bytes, more than its data can hold")));
            }
            let mut bytes = Vec::new();
            bytes.try_reserve_exact(size as usize).map_err(|_| fail(&format!("array {name:?}: out of memory")))?;
            member.by_ref().take(size).read_to_end(&mut bytes).map_err(|e| fail(&format!("array {name:?}: {e}")))?;
            npy::from_bytes(&bytes).map_err(|e| fail(&format!("array {name:?}: {e}")))
        };
        let json = read(META)?;
        if json.dtype() != DataType::U8 || json.ndim() != 1 {
            return Err(fail(&format!("{META} must be a 1-D uint8 array, found {}{}", json.dtype(), json.shape())));
        }
        let meta: Meta = serde_json::from_slice(&json.to_vec::<u8>()?).map_err(|e| fail(&format!("{META}: {e}")))?;
        if meta.format != FORMAT || meta.version != VERSION {
            return Err(fail(&format!(
                "expected format {FORMAT:?} version {VERSION}, found {:?} version {}",
                meta.format, meta.version
            )));
        }
        let decode = |e: &Encoded, read: &mut dyn FnMut(&str) -> Result<Tensor>| decode(e, read, 0);
        let mut steps = Vec::with_capacity(meta.steps.len());
        for (i, s) in meta.steps.into_iter().enumerate() {
            if s.index != meta.skipped + i {
                return Err(fail(&format!("step {i} of the file is numbered {}, not {}", s.index, meta.skipped + i)));
            }
            let values = match s.values {
                None => None,
                Some(v) => Some(StepValues {
                    args: v.args.iter().map(|a| decode(a, &mut read)).collect::<Result<_>>()?,
                    result: decode(&v.result, &mut read)?,
                    outputs: v.outputs.iter().map(|(i, o)| Ok((*i, decode(o, &mut read)?))).collect::<Result<_>>()?,
                }),
            };
            steps.push(TraceStep {
                index: s.index,
                function: ArcStr::from(s.function),
                pc: s.pc,
                callee: ArcStr::from(s.callee),
                depth: s.depth,
                end: s.end,
                failed: s.failed,
                values,
            });
        }
        let result = decode(&meta.result, &mut read)?;
        Ok(Trace { function: meta.function, steps, skipped: meta.skipped, max_bytes: meta.max_bytes, result })
    }
}

fn encode_step(s: &TraceStep, arrays: &mut Vec<(String, Tensor)>) -> StepMeta {
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
            args: v.args.iter().enumerate().map(|(i, a)| encode(a, at(&format!("args.{i}")), arrays, 0)).collect(),
            result: encode(&v.result, at("result"), arrays, 0),
            outputs: v.outputs.iter().map(|(i, o)| (*i, encode(o, at(&format!("outputs.{i}")), arrays, 0))).collect(),
        }),
    }
}

/// `v` as JSON, its tensors appended to `arrays` under `name` (and `name.k` inside tuples).
fn encode(v: &Value, name: String, arrays: &mut Vec<(String, Tensor)>, depth: usize) -> Encoded {
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
            arrays.push((name.clone(), stored));
            Encoded::Tensor { array: name, dtype: t.dtype().to_string(), shape: t.shape().dims().to_vec() }
        }
        Value::Tuple(items) if depth < MAX_COPY_DEPTH => Encoded::Tuple(
            items.iter().enumerate().map(|(k, x)| encode(x, format!("{name}.{k}"), arrays, depth + 1)).collect(),
        ),
        // A loaded trace's opaque value is saved as it was read.
        Value::Object(o) => match o.downcast_ref::<Opaque>() {
            Some(d) => Encoded::Opaque { kind: d.kind.clone(), text: d.text.clone() },
            None => Encoded::Opaque { kind: v.type_name().into(), text: v.describe() },
        },
        other => Encoded::Opaque { kind: other.type_name().into(), text: other.describe() },
    }
}

fn decode(e: &Encoded, read: &mut dyn FnMut(&str) -> Result<Tensor>, depth: usize) -> Result<Value> {
    Ok(match e {
        Encoded::Null => Value::Null,
        Encoded::Int(x) => Value::Int(*x),
        Encoded::Float(s) => Value::Float(s.parse().map_err(|_| Error::value(format!("invalid float {s:?}")))?),
        Encoded::Bool(x) => Value::Bool(*x),
        Encoded::Str(s) => Value::str(s),
        Encoded::Dtype(d) => Value::DType(d.parse()?),
        Encoded::Device(d) => Value::Device(d.parse()?),
        Encoded::Shape(dims) => Value::Shape(Shape::new(dims.clone())),
        Encoded::Tensor { array, dtype, shape } => {
            let dtype: DataType = dtype.parse()?;
            let stored = read(array)?;
            let expected = if dtype == DataType::BF16 { DataType::U16 } else { dtype };
            if stored.dtype() != expected || stored.shape().dims() != shape.as_slice() {
                return Err(Error::value(format!(
                    "array {array:?} is {}{}, the trace says {dtype}{}",
                    stored.dtype(),
                    stored.shape(),
                    Shape::new(shape.clone())
                )));
            }
            if dtype == DataType::BF16 {
                Value::Tensor(Tensor::from_bytes(dtype, stored.shape().clone(), &stored.contiguous_bytes()?)?)
            } else {
                Value::Tensor(stored)
            }
        }
        Encoded::Tuple(items) if depth < MAX_COPY_DEPTH => {
            Value::Tuple(Arc::new(items.iter().map(|x| decode(x, read, depth + 1)).collect::<Result<_>>()?))
        }
        Encoded::Tuple(_) => return Err(Error::value(format!("tuples nest deeper than {MAX_COPY_DEPTH}"))),
        Encoded::Opaque { kind, text } => {
            Value::Object(Arc::new(Box::new(Opaque { kind: kind.clone(), text: text.clone() })))
        }
    })
}
