//! A small tensor constant's elements as readable text — `[1.5, 2.0, -0.25]`, in C order — for
//! the text form (`tensor float16 (3,) [1.5, 2.0, -0.25]`), and back. A tensor is written this
//! way only when it is small and every element reads back to the same bits (a NaN with a
//! payload does not, for instance); otherwise the text form keeps the exact hex bytes.

use crate::dispatch_dtype;
use crate::dtype::DataType;
use crate::tensor::Tensor;
use half::{bf16, f16};

/// At most this many elements are written as values; larger tensors as hex.
pub const MAX_LISTED: usize = 64;

/// The elements of `t` as `[a, b, ...]`, or `None` when `t` is too large or an element would
/// not read back to the same bits.
pub fn values_text(t: &Tensor) -> Option<String> {
    if t.numel() > MAX_LISTED {
        return None;
    }
    let bytes = t.contiguous_bytes().ok()?;
    let item = t.dtype().itemsize();
    let texts: Vec<String> = dispatch_dtype!(t.dtype(), T => {
        let view = t.view::<T>().ok()?;
        view.iter().map(|x: &T| format!("{x:?}")).collect()
    });
    for (text, want) in texts.iter().zip(bytes.chunks(item)) {
        if element_bytes(t.dtype(), text).ok()?.as_slice() != want {
            return None;
        }
    }
    Some(format!("[{}]", texts.join(", ")))
}

/// The little-endian bytes of one element of `dtype` written as `text`: `true`/`false`, an
/// integer in the dtype's range, or a float (`1.5`, `-2e-3`, `inf`, `NaN`), rounded to the
/// nearest value of the dtype.
pub fn element_bytes(dtype: DataType, text: &str) -> Result<Vec<u8>, String> {
    let int = |lo: i128, hi: i128| -> Result<i128, String> {
        let v: i128 = text.parse().map_err(|_| format!("{text:?} is not an integer"))?;
        if v < lo || v > hi {
            return Err(format!("{text} is out of range for {dtype}"));
        }
        Ok(v)
    };
    let float = || -> Result<f64, String> { text.parse().map_err(|_| format!("{text:?} is not a number")) };
    Ok(match dtype {
        DataType::Bool => match text {
            "true" => vec![1],
            "false" => vec![0],
            _ => return Err(format!("{text:?} is not true or false")),
        },
        DataType::I8 => (int(i8::MIN.into(), i8::MAX.into())? as i8).to_le_bytes().to_vec(),
        DataType::I16 => (int(i16::MIN.into(), i16::MAX.into())? as i16).to_le_bytes().to_vec(),
        DataType::I32 => (int(i32::MIN.into(), i32::MAX.into())? as i32).to_le_bytes().to_vec(),
        DataType::I64 => (int(i64::MIN.into(), i64::MAX.into())? as i64).to_le_bytes().to_vec(),
        DataType::U8 => (int(0, u8::MAX.into())? as u8).to_le_bytes().to_vec(),
        DataType::U16 => (int(0, u16::MAX.into())? as u16).to_le_bytes().to_vec(),
        DataType::U32 => (int(0, u32::MAX.into())? as u32).to_le_bytes().to_vec(),
        DataType::U64 => (int(0, u64::MAX.into())? as u64).to_le_bytes().to_vec(),
        // Through f32: the shortest text of a half-precision value is an f32's (its Debug).
        DataType::F16 => {
            f16::from_f32(text.parse().map_err(|_| format!("{text:?} is not a number"))?).to_le_bytes().to_vec()
        }
        DataType::BF16 => {
            bf16::from_f32(text.parse().map_err(|_| format!("{text:?} is not a number"))?).to_le_bytes().to_vec()
        }
        DataType::F32 => text.parse::<f32>().map_err(|_| format!("{text:?} is not a number"))?.to_le_bytes().to_vec(),
        DataType::F64 => float()?.to_le_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_tensors_read_as_values_and_back() {
        let h = Tensor::from_vec([3], vec![f16::from_f32(1.5), f16::from_f32(2.0), f16::from_f32(-0.25)]).unwrap();
        assert_eq!(values_text(&h).unwrap(), "[1.5, 2.0, -0.25]");
        let f = Tensor::from_vec([2], vec![0.1f32, f32::NEG_INFINITY]).unwrap();
        assert_eq!(values_text(&f).unwrap(), "[0.1, -inf]");
        let i = Tensor::from_vec([2], vec![u64::MAX, 0]).unwrap();
        assert_eq!(values_text(&i).unwrap(), "[18446744073709551615, 0]");
        assert_eq!(values_text(&Tensor::from_vec([2], vec![true, false]).unwrap()).unwrap(), "[true, false]");
        assert_eq!(values_text(&Tensor::scalar(3i8)).unwrap(), "[3]");
    }

    #[test]
    fn what_would_not_read_back_stays_hex() {
        let payload = f32::from_bits(0x7fc0_0001); // a NaN whose payload the text loses
        assert!(values_text(&Tensor::from_vec([1], vec![payload]).unwrap()).is_none());
        assert!(values_text(&Tensor::from_vec([1], vec![f32::NAN]).unwrap()).is_some());
        let big = Tensor::from_vec([MAX_LISTED as i64 + 1], vec![0u8; MAX_LISTED + 1]).unwrap();
        assert!(values_text(&big).is_none());
    }

    #[test]
    fn elements_are_checked_against_their_dtype() {
        assert_eq!(element_bytes(DataType::I8, "-128").unwrap(), vec![0x80]);
        assert!(element_bytes(DataType::I8, "128").unwrap_err().contains("out of range for int8"));
        assert!(element_bytes(DataType::U8, "-1").unwrap_err().contains("out of range"));
        assert!(element_bytes(DataType::F32, "x").unwrap_err().contains("not a number"));
        assert!(element_bytes(DataType::Bool, "1").unwrap_err().contains("true or false"));
        assert_eq!(element_bytes(DataType::F16, "0.1").unwrap(), f16::from_f32(0.1).to_le_bytes().to_vec());
    }
}
