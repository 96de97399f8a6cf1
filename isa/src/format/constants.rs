//! The constant pool and tensor records.
//!
//! ```text
//! constants ::= count:varint constant[count]
//! constant  ::= 0x00                                      null
//!             | 0x01 value:svarint                        int
//!             | 0x02 bits:fixed64                         float (IEEE 754, little-endian)
//!             | 0x03 | 0x04                               bool false | true
//!             | 0x05 string:varint                        str
//!             | 0x06 ndim:varint dim:svarint[ndim]        shape
//!             | 0x07 dtype:byte                           dtype
//!             | 0x08 type:varint id:svarint               device (DLPack type code)
//!             | 0x09 dtype:byte ndim:varint dim:varint[ndim] offset:varint nbytes:varint
//!                                                         tensor (bytes in the tensor data)
//!             | 0x0A count:varint constant[count]         tuple
//! ```

use super::cursor::Cursor;
use super::sections::TENSOR_ALIGNMENT;
use super::strings::{Budget, StringTable, Strings};
use super::varint;
use crate::device::{Device, DeviceType};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::Value;

const NULL: u8 = 0;
const INT: u8 = 1;
const FLOAT: u8 = 2;
const FALSE: u8 = 3;
const TRUE: u8 = 4;
const STR: u8 = 5;
const SHAPE: u8 = 6;
const DTYPE: u8 = 7;
const DEVICE: u8 = 8;
const TENSOR: u8 = 9;
const TUPLE: u8 = 10;

/// How deeply tuple constants may nest (the decoder recurses once per level).
pub const MAX_TUPLE_DEPTH: usize = 32;

/// The refusal of a tuple deeper than [`MAX_TUPLE_DEPTH`], saved or loaded.
fn tuples_too_deep() -> String {
    format!("tuples nest deeper than {MAX_TUPLE_DEPTH} levels")
}

/// Where each tensor constant's bytes go in the tensor data section.
#[derive(Default)]
pub struct BlobPlan<'a> {
    /// The tensors with their offsets, in order.
    pub tensors: Vec<(&'a Tensor, u64)>,
    /// The section's length.
    pub len: u64,
}

impl<'a> BlobPlan<'a> {
    fn place(&mut self, t: &'a Tensor) -> u64 {
        let offset = self.len.next_multiple_of(TENSOR_ALIGNMENT);
        self.len = offset + t.nbytes() as u64;
        self.tensors.push((t, offset));
        offset
    }
}

/// Encodes the constant pool, interning strings and placing tensors.
pub fn encode<'a>(consts: &'a [Value], strings: &mut StringTable<'a>, blob: &mut BlobPlan<'a>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    varint::put(&mut out, consts.len() as u64);
    for (i, v) in consts.iter().enumerate() {
        encode_value(v, &mut out, strings, blob, 0).map_err(|e| Error::format(format!("constant c[{i}]: {e}")))?;
    }
    Ok(out)
}

fn encode_value<'a>(
    v: &'a Value,
    out: &mut Vec<u8>,
    strings: &mut StringTable<'a>,
    blob: &mut BlobPlan<'a>,
    depth: usize,
) -> std::result::Result<(), String> {
    match v {
        Value::Null => out.push(NULL),
        Value::Int(i) => {
            out.push(INT);
            varint::put_signed(out, *i);
        }
        Value::Float(x) => {
            out.push(FLOAT);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Value::Bool(b) => out.push(if *b { TRUE } else { FALSE }),
        Value::Str(s) => {
            out.push(STR);
            varint::put(out, strings.intern(s));
        }
        Value::Shape(s) => {
            out.push(SHAPE);
            varint::put(out, s.len() as u64);
            for d in s.iter() {
                varint::put_signed(out, *d);
            }
        }
        Value::DType(d) => out.extend_from_slice(&[DTYPE, d.tag()]),
        Value::Device(d) => {
            out.push(DEVICE);
            varint::put(out, d.device_type.code() as u64);
            varint::put_signed(out, i64::from(d.device_id));
        }
        Value::Tensor(t) => {
            out.extend_from_slice(&[TENSOR, t.dtype().tag()]);
            varint::put(out, t.ndim() as u64);
            for d in t.shape().iter() {
                varint::put(out, *d as u64);
            }
            let offset = blob.place(t);
            varint::put(out, offset);
            varint::put(out, t.nbytes() as u64);
        }
        Value::Tuple(items) => {
            if depth >= MAX_TUPLE_DEPTH {
                return Err(tuples_too_deep());
            }
            out.push(TUPLE);
            varint::put(out, items.len() as u64);
            for item in items.iter() {
                encode_value(item, out, strings, blob, depth + 1)?;
            }
        }
        // Functions, storage, the VM state and objects; and, `Value` being non-exhaustive, a kind
        // the data model gains later, until this writer learns it.
        _ => return Err(format!("a {} cannot be saved in an executable file", v.type_name())),
    }
    Ok(())
}

/// The tensor data section as the decoder sees it: one storage holding all of it.
pub struct Blob {
    /// The storage (copied or mapped), or `None` when the file has no tensor data.
    pub storage: Option<Storage>,
}

/// Decodes the constant pool.
pub fn decode(mut c: Cursor<'_>, strings: &mut Strings<'_>, budget: &mut Budget, blob: &Blob) -> Result<Vec<Value>> {
    let n = c.count("constant", 1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(decode_value(&mut c, strings, budget, blob, 0)?);
    }
    c.finish()?;
    Ok(out)
}

fn decode_value(
    c: &mut Cursor<'_>,
    strings: &mut Strings<'_>,
    budget: &mut Budget,
    blob: &Blob,
    depth: usize,
) -> Result<Value> {
    let at = c.pos();
    Ok(match c.byte()? {
        NULL => Value::Null,
        INT => Value::Int(c.signed()?),
        FLOAT => Value::Float(f64::from_bits(c.fixed64()?)),
        FALSE => Value::Bool(false),
        TRUE => Value::Bool(true),
        STR => strings.read_value(c, budget)?,
        SHAPE => {
            let n = c.count("shape constant dimension", 1)?;
            let mut dims = Vec::with_capacity(n);
            for _ in 0..n {
                dims.push(c.signed()?);
            }
            Value::Shape(Shape::from(dims))
        }
        DTYPE => Value::DType(c.dtype()?),
        DEVICE => {
            let code_at = c.pos();
            let code = i32::try_from(c.varint()?).map_err(|_| c.err_at(code_at, "device type code out of range"))?;
            let device_type = DeviceType::from_code(code).map_err(|e| c.err_at(code_at, e))?;
            let id_at = c.pos();
            let device_id = i32::try_from(c.signed()?).map_err(|_| c.err_at(id_at, "device id out of range"))?;
            Value::Device(Device { device_type, device_id })
        }
        TENSOR => Value::Tensor(tensor(c, blob, at)?),
        TUPLE => {
            if depth >= MAX_TUPLE_DEPTH {
                return Err(c.err_at(at, tuples_too_deep()));
            }
            let n = c.count("tuple item", 1)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(decode_value(c, strings, budget, blob, depth + 1)?);
            }
            Value::tuple(items)
        }
        tag => return Err(c.err_at(at, format!("unknown constant tag {tag:#04x}"))),
    })
}

fn tensor(c: &mut Cursor<'_>, blob: &Blob, at: usize) -> Result<Tensor> {
    let dtype = c.dtype()?;
    let ndim = c.count("tensor dimension", 1)?;
    let mut dims = Vec::with_capacity(ndim);
    let mut numel: u128 = 1;
    for _ in 0..ndim {
        let d_at = c.pos();
        let d = i64::try_from(c.varint()?).map_err(|_| c.err_at(d_at, "tensor dimension exceeds 2^63"))?;
        numel = numel.saturating_mul(d as u128);
        dims.push(d);
    }
    let offset_at = c.pos();
    let offset = c.varint()?;
    let len_at = c.pos();
    let nbytes = c.varint()?;
    let expected = numel.saturating_mul(dtype.itemsize() as u128);
    if u128::from(nbytes) != expected {
        return Err(c.err_at(len_at, format!("tensor of {numel} {dtype} elements with {nbytes} bytes of data")));
    }
    if offset % TENSOR_ALIGNMENT != 0 {
        return Err(c.err_at(offset_at, format!("tensor data offset {offset} is not a multiple of {TENSOR_ALIGNMENT}")));
    }
    let storage = match &blob.storage {
        Some(s) => s.clone(),
        None if nbytes == 0 => Storage::alloc(0, Device::cpu(0))?,
        None => return Err(c.err_at(at, "tensor constant but the file has no tensor data section")),
    };
    let blob_len = storage.len() as u64;
    if offset.checked_add(nbytes).is_none_or(|end| end > blob_len) {
        return Err(c.err_at(
            offset_at,
            format!("tensor data {offset}..+{nbytes} outside the {blob_len} bytes of the tensor data section"),
        ));
    }
    if dtype == DataType::Bool {
        // A byte other than 0 or 1 is no bool: refused here, so that no constant holds one (and
        // the text form of every loaded constant assembles again).
        let bytes = storage.bytes();
        let data = &bytes[offset as usize..(offset + nbytes) as usize];
        if let Some(i) = data.iter().position(|b| *b > 1) {
            return Err(c.err_at(
                at,
                format!(
                    "bool tensor constant holds the byte {} at data offset {}: bool bytes must be 0 or 1",
                    data[i],
                    offset as usize + i
                ),
            ));
        }
    }
    // Both fit in the storage's usize length (checked above).
    Tensor::from_parts(storage, offset as usize, Shape::from(dims), None, dtype).map_err(|e| c.err_at(at, e))
}
