//! Reading a trace file within a memory bound: the file is untrusted input.
//!
//! Loading decompresses at most [`Trace::load_limit`] bytes in total (by default 256 MiB plus
//! 16 bytes per byte of the file; [`Trace::save`] stores its arrays uncompressed, so a trace it
//! wrote needs about its own size). What counts against the limit: the JSON, 128 bytes for each
//! of its entries (what its parsed form may take in memory, bounded before parsing), and each
//! array once — an array the JSON names several times is read once and shared, so a small
//! archive cannot expand by naming one well-compressed member many times. Each member's size is
//! checked against what deflate can expand its compressed bytes to and against what is left of
//! the limit before it is read; its `.npy` header's shape and dtype must match the data it holds
//! and the JSON's description of it. The JSON nests at most [`MAX_JSON_DEPTH`] deep. Then the
//! trace's counts and indices are checked for consistency ([`Trace::check`]).

use super::copy::MAX_COPY_DEPTH;
use super::file::{Encoded, Meta, FORMAT, META, VERSION};
use super::{StepValues, Trace, TraceStep};
use crate::arc_string::ArcString;
use crate::dtype::DataType;
use crate::error::{Error, ErrorKind, Result};
use crate::npy;
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::value::Value;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::Arc;

/// The part of the default load limit that does not depend on the file's size: 256 MiB.
pub const LOAD_LIMIT_BASE: u64 = 256 << 20;
/// The part of the default load limit per byte of the file.
pub const LOAD_LIMIT_PER_FILE_BYTE: u64 = 16;
/// What one entry of the JSON (one value, field or list item) counts against the limit: more
/// than the parsed form of any entry takes (checked by a test).
const ENTRY_COST: u64 = 128;
/// How deeply the JSON may nest: the trace's own structure (8 levels) plus two levels per tuple
/// for tuples nested as deep as a trace copies them (32), with room to spare. serde_json's own limit is 128.
pub const MAX_JSON_DEPTH: usize = 2 * MAX_COPY_DEPTH + 16;
/// Deflate expands at most about 1032 times: a member claiming more is not a real file.
const MAX_DEFLATE_RATIO: u64 = 1100;

impl Trace {
    /// The default bound on the bytes loading a file of `file_size` bytes may decompress and
    /// parse: [`LOAD_LIMIT_BASE`] plus [`LOAD_LIMIT_PER_FILE_BYTE`] per byte.
    pub fn load_limit(file_size: u64) -> u64 {
        LOAD_LIMIT_BASE.saturating_add(file_size.saturating_mul(LOAD_LIMIT_PER_FILE_BYTE))
    }

    /// Reads a trace written by [`save`](Self::save), within the default limit
    /// ([`load_limit`](Self::load_limit) of the file's size).
    pub fn load(path: impl AsRef<Path>) -> Result<Trace> {
        Self::load_within(path, None)
    }

    /// Reads a trace written by [`save`](Self::save), decompressing and parsing at most `limit`
    /// bytes (`None`: the default, [`load_limit`](Self::load_limit) of the file's size). A file
    /// that needs more, or whose contents are inconsistent, is an error naming the file, the
    /// member and the field.
    pub fn load_within(path: impl AsRef<Path>, limit: Option<u64>) -> Result<Trace> {
        let path = path.as_ref();
        let fail = |e: &dyn std::fmt::Display| Error::value(format!("cannot read trace {}: {e}", path.display()));
        // A regular file within the default input size limit (never a fifo or a device). The
        // reader's message starts with the path, as this one's does.
        let opened = crate::input_file::open(path, crate::input_file::DEFAULT_MAX_INPUT).map_err(|e| {
            Error::value(format!("cannot read trace {}", e.to_string().trim_start_matches("I/O error: ")))
        })?;
        let size = opened.len();
        let file = opened.into_file();
        let limit = limit.unwrap_or_else(|| Self::load_limit(size));
        let zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| fail(&e))?;
        let mut archive = Archive { zip, limit, used: 0, arrays: HashMap::new() };
        read_trace(&mut archive).map_err(|e| match e.into_kind() {
            // Memory the allocator refused stays an allocation error (a MemoryError in Python).
            ErrorKind::Alloc { bytes, reason } => {
                Error::alloc(bytes, format!("cannot read trace {}: {reason}", path.display()))
            }
            other => fail(&Error::from(other)),
        })
    }
}

/// The archive being read, what has been charged against the limit, and the arrays read.
struct Archive {
    zip: zip::ZipArchive<BufReader<File>>,
    limit: u64,
    used: u64,
    /// Each array read so far, by name: read once however often the JSON names it.
    arrays: HashMap<String, Tensor>,
}

impl Archive {
    /// Counts `bytes` against the limit for `what`.
    fn charge(&mut self, bytes: u64, what: &dyn Fn() -> String) -> Result<()> {
        match self.used.checked_add(bytes) {
            Some(total) if total <= self.limit => {
                self.used = total;
                Ok(())
            }
            _ => Err(Error::value(format!(
                "{} needs {bytes} bytes, but only {} of the load limit of {} are left \
                 (a larger limit loads it: Trace::load_within, rx.Trace.load(path, limit=...))",
                what(),
                self.limit - self.used,
                self.limit
            ))),
        }
    }

    /// The bytes of member `name.npy`, within the limit.
    fn member(&mut self, name: &str) -> Result<Vec<u8>> {
        let what = || format!("array {name:?}");
        let member =
            self.zip.by_name(&format!("{name}.npy")).map_err(|e| Error::value(format!("array {name:?}: {e}")))?;
        let (size, compressed) = (member.size(), member.compressed_size());
        if size > compressed.saturating_mul(MAX_DEFLATE_RATIO).saturating_add(4096) {
            return Err(Error::value(format!(
                "array {name:?} claims {size} bytes from {compressed} compressed, more than its data can hold"
            )));
        }
        drop(member);
        self.charge(size, &what)?;
        let mut member =
            self.zip.by_name(&format!("{name}.npy")).map_err(|e| Error::value(format!("{}: {e}", what())))?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(size as usize)
            .map_err(|_| Error::alloc(size.into(), format!("{}: out of memory", what())))?;
        // One byte more than declared: data longer than its entry says is an error, not read.
        member
            .by_ref()
            .take(size.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| Error::value(format!("{}: {e}", what())))?;
        if bytes.len() as u64 != size {
            // Only one byte past the declared size is read: longer data shows as `size + 1`.
            let holds = match bytes.len() as u64 > size {
                true => format!("more than {size}"),
                false => bytes.len().to_string(),
            };
            return Err(Error::value(format!("array {name:?} holds {holds} bytes, its zip entry says {size}")));
        }
        Ok(bytes)
    }

    /// The array `name` (read and checked once, then shared).
    fn array(&mut self, name: &str) -> Result<Tensor> {
        if let Some(t) = self.arrays.get(name) {
            return Ok(t.clone());
        }
        let bytes = self.member(name)?;
        let t = npy::from_bytes(&bytes).map_err(|e| Error::value(format!("array {name:?}: {e}")))?;
        self.arrays.insert(name.to_string(), t.clone());
        Ok(t)
    }
}

fn read_trace(archive: &mut Archive) -> Result<Trace> {
    let json = archive.array(META)?;
    // The JSON is only parsed: its array need not stay.
    archive.arrays.remove(META);
    if json.dtype() != DataType::U8 || json.ndim() != 1 {
        return Err(Error::value(format!("{META} must be a 1-D uint8 array, found {}{}", json.dtype(), json.shape())));
    }
    let json = json.contiguous_bytes()?;
    let shape = json_shape(&json);
    if shape.depth > MAX_JSON_DEPTH {
        return Err(Error::value(format!(
            "{META}: the JSON nests {} deep at byte {}, more than the {MAX_JSON_DEPTH} a trace needs",
            shape.depth, shape.deepest_at
        )));
    }
    archive.charge(shape.entries.saturating_mul(ENTRY_COST), &|| {
        format!("{META}: the JSON's {} entries (at {ENTRY_COST} bytes each)", shape.entries)
    })?;
    let meta: Meta = serde_json::from_slice(&json).map_err(|e| Error::value(format!("{META}: {e}")))?;
    drop(json);
    if meta.format != FORMAT || !(1..=VERSION).contains(&meta.version) {
        return Err(Error::value(format!(
            "{META}: expected format {FORMAT:?} version 1 to {VERSION}, found {:?} version {}",
            meta.format, meta.version
        )));
    }
    let mut decoder = Decoder { archive, tuples: HashMap::new() };
    let mut steps = Vec::new();
    steps.try_reserve_exact(meta.steps.len()).map_err(|_| {
        let bytes = (meta.steps.len() as u128).saturating_mul(std::mem::size_of::<TraceStep>() as u128);
        Error::alloc(bytes, format!("{META}: too many steps"))
    })?;
    for s in meta.steps {
        let at = |what: &str| format!("step{}.{what}", s.index);
        let values = match s.values {
            None => None,
            Some(v) => Some(StepValues {
                args: v
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| decoder.value(a, &at(&format!("args.{i}")), 0))
                    .collect::<Result<_>>()?,
                result: decoder.value(&v.result, &at("result"), 0)?,
                outputs: v
                    .outputs
                    .iter()
                    .map(|(i, o)| Ok((*i, decoder.value(o, &at(&format!("outputs.{i}")), 0)?)))
                    .collect::<Result<_>>()?,
            }),
        };
        steps.push(TraceStep {
            index: s.index,
            function: ArcString::from(s.function),
            pc: s.pc,
            callee: ArcString::from(s.callee),
            depth: s.depth,
            end: s.end,
            failed: s.failed,
            values,
        });
    }
    let result = decoder.value(&meta.result, "result", 0)?;
    let trace = Trace { function: meta.function, steps, skipped: meta.skipped, max_bytes: meta.max_bytes, result };
    trace.check().map_err(|e| Error::value(format!("{META}: {e}")))?;
    Ok(trace)
}

/// An upper bound on the number of entries of a JSON text (one per `[`, `{`, `,` and `:`
/// outside strings, plus one) and its deepest nesting, found in one pass without parsing.
struct JsonShape {
    entries: u64,
    depth: usize,
    deepest_at: usize,
}

fn json_shape(text: &[u8]) -> JsonShape {
    let mut shape = JsonShape { entries: 1, depth: 0, deepest_at: 0 };
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (at, &c) in text.iter().enumerate() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'[' | b'{' => {
                shape.entries += 1;
                depth += 1;
                if depth > shape.depth {
                    (shape.depth, shape.deepest_at) = (depth, at);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' | b':' => shape.entries += 1,
            _ => {}
        }
    }
    shape
}

/// Decodes the JSON's values, reading their arrays from the archive.
struct Decoder<'a> {
    archive: &'a mut Archive,
    /// The tuples decoded so far, by the name of their place: what `same` refers to.
    tuples: HashMap<String, Value>,
}

impl Decoder<'_> {
    /// The value `e` stored at place `name` (`step3.args.0`, `result.1`), for errors and
    /// `same` references.
    fn value(&mut self, e: &Encoded, name: &str, depth: usize) -> Result<Value> {
        let bad = |what: String| Error::value(format!("value {name}: {what}"));
        Ok(match e {
            Encoded::Null => Value::Null,
            Encoded::Int(x) => Value::Int(*x),
            Encoded::Float(s) => Value::Float(s.parse().map_err(|_| bad(format!("invalid float {s:?}")))?),
            Encoded::Bool(x) => Value::Bool(*x),
            Encoded::Str(s) => Value::str(s),
            Encoded::Dtype(d) => Value::DType(d.parse().map_err(|e| bad(format!("{e}")))?),
            Encoded::Device(d) => Value::Device(d.parse().map_err(|e| bad(format!("{e}")))?),
            Encoded::Shape(dims) => Value::Shape(Shape::new(dims.clone())),
            Encoded::Tensor { array, dtype, shape } => {
                let dtype: DataType = dtype.parse().map_err(|e| bad(format!("{e}")))?;
                let stored = self.archive.array(array)?;
                let expected = if dtype == DataType::BF16 { DataType::U16 } else { dtype };
                if stored.dtype() != expected || stored.shape().dims() != shape.as_slice() {
                    return Err(Error::value(format!(
                        "array {array:?} is {}{}, the trace says {dtype}{} (value {name})",
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
                let mut values = Vec::new();
                values.try_reserve_exact(items.len()).map_err(|_| bad("too many items".into()))?;
                for (k, x) in items.iter().enumerate() {
                    values.push(self.value(x, &format!("{name}.{k}"), depth + 1)?);
                }
                let v = Value::Tuple(Arc::new(values));
                self.tuples.insert(name.to_string(), v.clone());
                v
            }
            Encoded::Tuple(_) => return Err(bad(format!("tuples nest deeper than {MAX_COPY_DEPTH}"))),
            Encoded::Same(first) => match self.tuples.get(first) {
                Some(v) => v.clone(),
                None => return Err(bad(format!("refers to tuple {first:?}, which is not stored before it"))),
            },
            Encoded::Opaque { kind, text } => {
                Value::Object(Arc::new(Box::new(super::Opaque { kind: kind.clone(), text: text.clone() })))
            }
        })
    }
}
