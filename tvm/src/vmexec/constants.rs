//! The constant section: a tvm-ffi type index, then the payload of that type.
//!
//! | index | type | payload |
//! |---|---|---|
//! | 1 | Int | `i64` |
//! | 3 | Float | `f64` |
//! | 5 | DataType | `u8 code, u8 bits, u16 lanes` |
//! | 65 | String | `string` |
//! | 69 | Shape | `vec<i64>` |
//! | 70 | Tensor | `u64 magic, u64 reserved, i32 device_type, i32 device_id, i32 ndim, DLDataType, i64 shape[ndim], i64 nbytes, data` |

use super::bytes::Bytes;
use relaxvm::{DataType, Error, Result, Shape, Tensor, Value};

const TYPE_INT: i32 = 1;
const TYPE_FLOAT: i32 = 3;
const TYPE_DTYPE: i32 = 5;
const TYPE_STRING: i32 = 65;
const TYPE_SHAPE: i32 = 69;
const TYPE_TENSOR: i32 = 70;

/// The magic number before each serialized tensor (TVM's `kTVMTensorMagic`).
const TENSOR_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;

/// The constants, in pool order.
pub fn read(b: &mut Bytes<'_>) -> Result<Vec<Value>> {
    let n = b.count("constant pool", 4)?;
    let mut out = b.vec_with_capacity(n, "constant pool")?;
    for i in 0..n {
        let at = b.pos();
        let type_index = b.i32("constant type index")?;
        let v = match type_index {
            TYPE_INT => Value::Int(b.i64("int constant")?),
            TYPE_FLOAT => Value::Float(b.f64("float constant")?),
            TYPE_DTYPE => Value::DType(read_dtype(b)?),
            TYPE_STRING => Value::Str(b.string("string constant")?.into()),
            TYPE_SHAPE => Value::Shape(read_shape(b)?),
            TYPE_TENSOR => Value::Tensor(read_tensor(b)?),
            other => {
                return Err(Error::format(format!(
                    "relax.VMExecutable at byte {at}: constant {i} has tvm-ffi type index {other}; supported: 1 (int), 3 (float), 5 (dtype), 65 (string), 69 (shape), 70 (tensor)"
                )))
            }
        };
        out.push(v);
    }
    Ok(out)
}

/// A DLDataType as TVM writes it. TVM's `bool` is `uint1`; DLPack's is code 6 with 8 bits.
pub fn dtype_of(code: u8, bits: u8, lanes: u16) -> Result<DataType> {
    if lanes != 1 {
        return Err(Error::value(format!(
            "vector dtype with {lanes} lanes is not supported (code {code}, {bits} bits)"
        )));
    }
    if code == 1 && bits == 1 {
        return Ok(DataType::Bool);
    }
    DataType::from_dlpack(code, bits)
}

fn read_dtype(b: &mut Bytes<'_>) -> Result<DataType> {
    let code = b.u8("dtype code")?;
    let bits = b.u8("dtype bits")?;
    let lanes = b.u16("dtype lanes")?;
    dtype_of(code, bits, lanes).map_err(|e| b.err(e))
}

fn read_shape(b: &mut Bytes<'_>) -> Result<Shape> {
    let dims = b.vec_i64("shape constant")?;
    if let Some(d) = dims.iter().find(|d| **d < 0) {
        return Err(b.err(format!("shape constant has negative dimension {d}")));
    }
    Ok(Shape::new(dims))
}

fn read_tensor(b: &mut Bytes<'_>) -> Result<Tensor> {
    let magic = b.u64("tensor magic")?;
    if magic != TENSOR_MAGIC {
        return Err(b.err(format!("tensor magic number {magic:#018x}, expected {TENSOR_MAGIC:#018x}")));
    }
    b.u64("tensor reserved field")?;
    let device_type = b.i32("tensor device type")?;
    let _device_id = b.i32("tensor device id")?;
    if device_type != 1 {
        return Err(
            b.err(format!("tensor constant on device type {device_type}; relaxvm runs CPU (device type 1) programs"))
        );
    }
    let ndim = b.i32("tensor ndim")?;
    let ndim = usize::try_from(ndim)
        .ok()
        .filter(|n| *n <= 64)
        .ok_or_else(|| b.err(format!("tensor ndim {ndim} (expected 0..=64)")))?;
    let dtype = read_dtype(b)?;
    let mut dims = Vec::with_capacity(ndim); // at most 64
    for _ in 0..ndim {
        dims.push(b.i64("tensor shape")?);
    }
    let nbytes = b.i64("tensor nbytes")?;
    let expected = relaxvm::shape::numel(&dims)
        .and_then(|n| n.checked_mul(dtype.itemsize()))
        .ok_or_else(|| b.err(format!("tensor shape {dims:?} is invalid or too large")))?;
    if usize::try_from(nbytes) != Ok(expected) {
        return Err(
            b.err(format!("tensor of shape {dims:?} and dtype {dtype} declares {nbytes} bytes, expected {expected}"))
        );
    }
    let data = b.take(expected, "tensor data")?;
    Tensor::from_bytes(dtype, dims, data).map_err(|e| b.err(e))
}
