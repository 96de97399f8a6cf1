//! Tensors from raw little-endian element bytes (the text form's `hex:` and `.npy` data).

use relaxvm::storage::Storage;
use relaxvm::{DataType, Device, Shape, Tensor};

/// A contiguous tensor of `dtype` and `shape` holding `bytes` (native byte order). Fails,
/// with a message, when the byte count does not match or a `bool` byte is not 0 or 1.
pub(crate) fn tensor_from_bytes(dtype: DataType, shape: Shape, bytes: &[u8]) -> Result<Tensor, String> {
    let numel = shape
        .numel()
        .ok_or_else(|| format!("invalid tensor shape {shape}: dimensions must be non-negative and fit in memory"))?;
    let expected =
        numel.checked_mul(dtype.itemsize()).ok_or_else(|| format!("tensor of shape {shape} is too large"))?;
    if bytes.len() != expected {
        return Err(format!("a {dtype} tensor of shape {shape} needs {expected} bytes of data, found {}", bytes.len()));
    }
    if dtype == DataType::Bool {
        if let Some(b) = bytes.iter().find(|b| **b > 1) {
            return Err(format!("bool tensor data must be 0 or 1 bytes, found {b}"));
        }
    }
    let storage = Storage::alloc(bytes.len(), Device::cpu(0)).map_err(|e| e.to_string())?;
    storage.write(0, bytes).map_err(|e| e.to_string())?;
    Tensor::from_parts(storage, 0, shape, None, dtype).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_checks() {
        let t = tensor_from_bytes(DataType::F32, Shape::from([2]), &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        assert!(tensor_from_bytes(DataType::F32, Shape::from([2]), &[0; 7]).unwrap_err().contains("needs 8 bytes"));
        assert!(tensor_from_bytes(DataType::Bool, Shape::from([1]), &[2]).is_err());
        assert!(tensor_from_bytes(DataType::I8, Shape::from([-1]), &[]).is_err());
        assert!(tensor_from_bytes(DataType::I64, Shape::from([i64::MAX, 2]), &[]).is_err());
        let empty = tensor_from_bytes(DataType::I32, Shape::from([0, 3]), &[]).unwrap();
        assert_eq!(empty.numel(), 0);
    }
}
