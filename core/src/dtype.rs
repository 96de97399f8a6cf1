//! Element data types of tensors.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The element type of a tensor, named as numpy and TVM name them (`"float32"`, `"int64"`...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataType {
    /// `bool`, one byte per element.
    Bool,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// `float16` (IEEE half).
    F16,
    /// `bfloat16`.
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

/// The broad class of a data type, as DLPack codes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeClass {
    /// Signed integers.
    Int,
    /// Unsigned integers.
    UInt,
    /// IEEE floats.
    Float,
    /// Brain floats.
    BFloat,
    /// Booleans.
    Bool,
}

impl DataType {
    /// Every data type, in declaration order.
    pub const ALL: [DataType; 13] = [
        DataType::Bool,
        DataType::I8,
        DataType::I16,
        DataType::I32,
        DataType::I64,
        DataType::U8,
        DataType::U16,
        DataType::U32,
        DataType::U64,
        DataType::F16,
        DataType::BF16,
        DataType::F32,
        DataType::F64,
    ];

    /// The canonical name, e.g. `"float32"`.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bool => "bool",
            DataType::I8 => "int8",
            DataType::I16 => "int16",
            DataType::I32 => "int32",
            DataType::I64 => "int64",
            DataType::U8 => "uint8",
            DataType::U16 => "uint16",
            DataType::U32 => "uint32",
            DataType::U64 => "uint64",
            DataType::F16 => "float16",
            DataType::BF16 => "bfloat16",
            DataType::F32 => "float32",
            DataType::F64 => "float64",
        }
    }

    /// The short name used in signatures and reflection, e.g. `"f32"`.
    pub fn short_name(self) -> &'static str {
        match self {
            DataType::Bool => "i1",
            DataType::I8 => "i8",
            DataType::I16 => "i16",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U8 => "u8",
            DataType::U16 => "u16",
            DataType::U32 => "u32",
            DataType::U64 => "u64",
            DataType::F16 => "f16",
            DataType::BF16 => "bf16",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
        }
    }

    /// Size of one element in bytes.
    pub fn itemsize(self) -> usize {
        usize::from(self.bits()).div_ceil(8)
    }

    /// Width in bits (`bool` counts as 8, as DLPack stores it).
    pub const fn bits(self) -> u8 {
        match self {
            DataType::Bool | DataType::I8 | DataType::U8 => 8,
            DataType::I16 | DataType::U16 | DataType::F16 | DataType::BF16 => 16,
            DataType::I32 | DataType::U32 | DataType::F32 => 32,
            DataType::I64 | DataType::U64 | DataType::F64 => 64,
        }
    }

    /// The broad class.
    pub const fn class(self) -> TypeClass {
        match self {
            DataType::Bool => TypeClass::Bool,
            DataType::I8 | DataType::I16 | DataType::I32 | DataType::I64 => TypeClass::Int,
            DataType::U8 | DataType::U16 | DataType::U32 | DataType::U64 => TypeClass::UInt,
            DataType::F16 | DataType::F32 | DataType::F64 => TypeClass::Float,
            DataType::BF16 => TypeClass::BFloat,
        }
    }

    /// True for float16, bfloat16, float32 and float64.
    pub fn is_float(self) -> bool {
        matches!(self.class(), TypeClass::Float | TypeClass::BFloat)
    }

    /// The DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool).
    pub const fn dlpack_code(self) -> u8 {
        match self.class() {
            TypeClass::Int => 0,
            TypeClass::UInt => 1,
            TypeClass::Float => 2,
            TypeClass::BFloat => 4,
            TypeClass::Bool => 6,
        }
    }

    /// The data type of a DLPack (code, bits) pair with one lane.
    pub fn from_dlpack(code: u8, bits: u8) -> Result<Self> {
        DataType::ALL
            .into_iter()
            .find(|d| d.dlpack_code() == code && d.bits() == bits)
            .ok_or_else(|| Error::value(format!("unsupported DLPack dtype code {code} with {bits} bits")))
    }

    /// A stable one-byte tag, used by the binary format.
    pub fn tag(self) -> u8 {
        DataType::ALL.iter().position(|d| *d == self).expect("in ALL") as u8
    }

    /// The data type of a [`DataType::tag`].
    pub fn from_tag(tag: u8) -> Result<Self> {
        DataType::ALL.get(usize::from(tag)).copied().ok_or_else(|| Error::format(format!("unknown dtype tag {tag}")))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataType {
    type Err = Error;

    /// Parses numpy/TVM names (`float32`, `int64`, `bool`...), short names (`f32`, `i64`) and
    /// numpy's one-letter aliases (`float`, `int`, `double`, `half`).
    fn from_str(s: &str) -> Result<Self> {
        let found = DataType::ALL.into_iter().find(|d| d.name() == s || d.short_name() == s);
        found
            .or(match s {
                "float" | "double" => Some(DataType::F64),
                "half" => Some(DataType::F16),
                "int" | "long" => Some(DataType::I64),
                "uint1" | "b1" => Some(DataType::Bool),
                _ => None,
            })
            .ok_or_else(|| {
                Error::value(format!(
                    "unknown dtype {s:?}: expected one of bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DataType::ALL {
            assert_eq!(d.name().parse::<DataType>().unwrap(), d);
            assert_eq!(d.short_name().parse::<DataType>().unwrap(), d);
            assert_eq!(DataType::from_tag(d.tag()).unwrap(), d);
            assert_eq!(DataType::from_dlpack(d.dlpack_code(), d.bits()).unwrap(), d);
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(DataType::Bool.itemsize(), 1);
        assert_eq!(DataType::BF16.itemsize(), 2);
        assert_eq!(DataType::F64.itemsize(), 8);
    }

    #[test]
    fn unknown_name_is_an_error() {
        let e = "float7".parse::<DataType>().unwrap_err().to_string();
        assert!(e.contains("float7") && e.contains("expected"));
        assert_eq!(
            format!("{:?}", DataType::from_tag(200).expect_err("an error")),
            r#"Format("unknown dtype tag 200")"#
        );
        assert_eq!(
            format!("{:?}", DataType::from_dlpack(2, 7).expect_err("an error")),
            r#"Value("unsupported DLPack dtype code 2 with 7 bits")"#
        );
    }
}
