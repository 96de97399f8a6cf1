//! Conversions between Rust types and [`Value`]s: `From` into values, [`FromValue`] and
//! [`IntoValue`] for typed packed functions.

use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::value::Value;
use std::sync::Arc;

/// Conversion from a [`Value`] argument, for typed packed functions.
pub trait FromValue: Sized {
    /// Converts, or says what was expected.
    fn from_value(v: &Value) -> Result<Self>;
}

/// Conversion into a [`Value`] result.
pub trait IntoValue {
    /// Converts.
    fn into_value(self) -> Value;
}

macro_rules! value_conv {
    ($t:ty, $variant:ident, $expected:literal, |$v:ident| $from:expr) => {
        impl FromValue for $t {
            fn from_value($v: &Value) -> Result<Self> {
                $from.ok_or_else(|| Error::type_mismatch($expected, $v.describe()))
            }
        }
        impl From<$t> for Value {
            fn from(x: $t) -> Value {
                Value::$variant(x.into())
            }
        }
    };
}

value_conv!(i64, Int, "int", |v| match v {
    Value::Int(i) => Some(*i),
    Value::Bool(b) => Some(i64::from(*b)),
    _ => None,
});
value_conv!(f64, Float, "float", |v| match v {
    Value::Float(x) => Some(*x),
    Value::Int(i) => Some(*i as f64),
    _ => None,
});
value_conv!(bool, Bool, "bool", |v| match v {
    Value::Bool(b) => Some(*b),
    Value::Int(i) => Some(*i != 0),
    _ => None,
});
value_conv!(String, Str, "str", |v| match v {
    Value::Str(s) => Some(s.to_string()),
    _ => None,
});
value_conv!(Shape, Shape, "shape", |v| match v {
    Value::Shape(s) => Some(s.clone()),
    _ => None,
});
value_conv!(Tensor, Tensor, "tensor", |v| match v {
    Value::Tensor(t) => Some(t.clone()),
    _ => None,
});
value_conv!(DataType, DType, "dtype", |v| v.as_dtype().ok());
value_conv!(Device, Device, "device", |v| match v {
    Value::Device(d) => Some(*d),
    _ => None,
});

impl From<i32> for Value {
    fn from(x: i32) -> Value {
        Value::Int(x.into())
    }
}

impl From<&str> for Value {
    fn from(x: &str) -> Value {
        Value::Str(x.into())
    }
}

impl From<Vec<Value>> for Value {
    fn from(x: Vec<Value>) -> Value {
        Value::Tuple(Arc::new(x))
    }
}

impl From<()> for Value {
    fn from(_: ()) -> Value {
        Value::Null
    }
}

impl FromValue for Value {
    fn from_value(v: &Value) -> Result<Self> {
        Ok(v.clone())
    }
}

impl<T: Into<Value>> IntoValue for T {
    fn into_value(self) -> Value {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_arguments_convert_or_say_what_was_expected() {
        assert_eq!(<i64 as FromValue>::from_value(&Value::Int(4)).unwrap(), 4);
        assert_eq!(
            format!("{:?}", <String as FromValue>::from_value(&Value::Int(4)).expect_err("an error")),
            r#"Type { expected: "str", found: "int 4" }"#
        );
        assert!(Value::from(3i32).content_eq(&Value::Int(3)));
        assert_eq!(i64::from_value(&Value::from(7i64)).unwrap(), 7);
    }
}
