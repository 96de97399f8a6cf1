//! Constants: `int 5`, `float 0.5`, `bool true`, `str "s"`, `shape (32, 16)`, `dtype float32`,
//! `device cpu:0`, `null`, `tensor float32 (2,) [1.0, 2.0]`, `tensor float32 (2,) hex:0000803f00000040`.

use super::cursor::Cursor;
use super::AsmError;
use relaxvm::{DataType, Device, Shape, Tensor, Value};

/// Parses the constant after `.const c[N] =`.
pub(super) fn parse_constant(c: &mut Cursor<'_>) -> Result<Value, AsmError> {
    parse_nested(c, 0)
}

/// A constant inside `depth` tuples (nesting is bounded as the binary format bounds it, so a
/// hostile text cannot exhaust the stack).
fn parse_nested(c: &mut Cursor<'_>, depth: usize) -> Result<Value, AsmError> {
    let at = c.pos();
    let kind = c.take_while(|ch| ch.is_ascii_alphabetic());
    let need_ws = |c: &mut Cursor<'_>, what: &str| c.expect_ws(&format!("{what} after '{kind}'"));
    match kind {
        "null" => Ok(Value::Null),
        "int" => {
            need_ws(c, "an integer")?;
            Ok(Value::Int(c.int("an integer")?))
        }
        "float" => {
            need_ws(c, "a float")?;
            let at = c.pos();
            let word = c.take_while(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '+'));
            word.parse::<f64>()
                .map(Value::Float)
                .map_err(|_| at.error(format!("expected a float (like 0.5, -1e-7, inf or NaN), found {:?}", word)))
        }
        "bool" => {
            need_ws(c, "true or false")?;
            if c.eat("true") {
                Ok(Value::Bool(true))
            } else if c.eat("false") {
                Ok(Value::Bool(false))
            } else {
                Err(c.expected("true or false"))
            }
        }
        "str" => {
            need_ws(c, "a quoted string")?;
            Ok(Value::str(&c.string("a quoted string")?))
        }
        "shape" => {
            need_ws(c, "a shape like (32, 16)")?;
            Ok(Value::Shape(parse_shape(c)?))
        }
        "dtype" => {
            need_ws(c, "a dtype like float32")?;
            Ok(Value::DType(parse_dtype(c)?))
        }
        "device" => {
            need_ws(c, "a device like cpu:0")?;
            let at = c.pos();
            let word = c.take_while(|ch| ch.is_ascii_alphanumeric() || ch == ':');
            word.parse::<Device>().map(Value::Device).map_err(|e| at.error(e.to_string()))
        }
        "tensor" => {
            need_ws(c, "a dtype")?;
            let dtype = parse_dtype(c)?;
            c.expect_ws("a shape after the dtype")?;
            let shape = parse_shape(c)?;
            c.expect_ws("hex: data or [values] after the shape")?;
            let at = c.pos();
            let bytes = if c.peek() == Some('[') {
                parse_values(c, dtype)?
            } else {
                c.expect("hex:", "hex: data or [values]")?;
                parse_hex(c)?
            };
            Tensor::from_bytes(dtype, shape, &bytes).map(Value::Tensor).map_err(|e| at.error(e.to_string()))
        }
        "tuple" => {
            need_ws(c, "'(' and the items")?;
            if depth >= relaxvm::format::MAX_TUPLE_DEPTH {
                return Err(at.error(format!("tuple constants nest at most {} deep", relaxvm::format::MAX_TUPLE_DEPTH)));
            }
            c.expect("(", "'(' and the items")?;
            let mut items = Vec::new();
            loop {
                c.skip_ws();
                if items.is_empty() && c.eat(")") {
                    return Ok(Value::tuple(items));
                }
                items.push(parse_nested(c, depth + 1)?);
                c.skip_ws();
                if c.eat(")") {
                    return Ok(Value::tuple(items));
                }
                c.expect(",", "',' or ')' in the tuple")?;
            }
        }
        _ if c.peek() == Some('<') && kind.is_empty() => {
            let what = c.take_while(|ch| !ch.is_whitespace());
            Err(at.error(format!("a {what} constant has no text form and cannot be assembled")))
        }
        _ => {
            let found = if kind.is_empty() { c.found() } else { format!("{kind:?}") };
            Err(at.error(format!(
                "expected a constant (null, int, float, bool, str, shape, dtype, device, tensor or tuple), found {found}"
            )))
        }
    }
}

fn parse_dtype(c: &mut Cursor<'_>) -> Result<DataType, AsmError> {
    let at = c.pos();
    let word = c.take_while(|ch| ch.is_ascii_alphanumeric() || ch == '_');
    if word.is_empty() {
        return Err(c.expected("a dtype like float32"));
    }
    word.parse::<DataType>().map_err(|e| at.error(e.to_string()))
}

/// `(32, 16)`, `(3,)` or `()`.
pub(super) fn parse_shape(c: &mut Cursor<'_>) -> Result<Shape, AsmError> {
    c.expect("(", "a shape like (32, 16)")?;
    let mut dims = Vec::new();
    loop {
        c.skip_ws();
        if c.eat(")") {
            return Ok(Shape::from(dims));
        }
        dims.push(c.int("a dimension or ')'")?);
        c.skip_ws();
        if c.eat(")") {
            return Ok(Shape::from(dims));
        }
        c.expect(",", "',' or ')' in the shape")?;
    }
}

/// `[1.5, 2.0, -0.25]`: the elements in C order, each read as the dtype reads it
/// ([`relaxvm::tensor_text::element_bytes`]); their bytes, concatenated.
fn parse_values(c: &mut Cursor<'_>, dtype: DataType) -> Result<Vec<u8>, AsmError> {
    c.expect("[", "'['")?;
    let mut bytes = Vec::new();
    loop {
        c.skip_ws();
        if bytes.is_empty() && c.eat("]") {
            return Ok(bytes);
        }
        let at = c.pos();
        let word = c.take_while(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '+'));
        if word.is_empty() {
            return Err(c.expected("a value"));
        }
        bytes.extend(relaxvm::tensor_text::element_bytes(dtype, word).map_err(|e| at.error(e))?);
        c.skip_ws();
        if c.eat("]") {
            return Ok(bytes);
        }
        c.expect(",", "',' or ']' in the values")?;
    }
}

fn parse_hex(c: &mut Cursor<'_>) -> Result<Vec<u8>, AsmError> {
    let at = c.pos();
    let digits = c.take_while(|ch| ch.is_ascii_hexdigit());
    if !digits.len().is_multiple_of(2) {
        return Err(at.error(format!("hex data has an odd number of digits ({})", digits.len())));
    }
    // Only hex digits were taken, in pairs, so decoding cannot fail; the error says where.
    hex::decode(digits).map_err(|e| at.error(format!("hex data: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::text::constant_to_text;

    fn parse(s: &str) -> Result<Value, AsmError> {
        let mut c = Cursor::new(s, 1);
        let v = parse_constant(&mut c)?;
        c.expect_end()?;
        Ok(v)
    }

    #[test]
    fn every_kind_round_trips() {
        let t = relaxvm::Tensor::from_vec([2, 2], vec![1i16, -2, 3, 4]).unwrap();
        let values = [
            Value::Null,
            Value::Int(i64::MIN),
            Value::Float(-0.0),
            Value::Float(1e300),
            Value::Float(f64::NAN),
            Value::Float(f64::NEG_INFINITY),
            Value::Float(1e-7),
            Value::Bool(true),
            Value::str("tab\there \u{1} \"q\" \\"),
            Value::Shape(Shape::from([])),
            Value::Shape(Shape::from([7])),
            Value::Shape(Shape::from([-1, 4])),
            Value::DType(DataType::BF16),
            Value::Device(Device::cpu(3)),
            Value::Tensor(t),
            Value::Tensor(relaxvm::Tensor::from_vec([0], Vec::<f64>::new()).unwrap()),
            Value::Tensor(relaxvm::Tensor::scalar(true)),
            Value::Tensor(relaxvm::Tensor::from_vec([1], vec![f32::from_bits(0x7fc0_0001)]).unwrap()),
            Value::Tensor(relaxvm::Tensor::from_vec([100], vec![0.5f32; 100]).unwrap()),
            Value::tuple(vec![]),
            Value::tuple(vec![Value::Int(1), Value::tuple(vec![Value::str("a,)"), Value::Null])]),
        ];
        for v in values {
            let text = constant_to_text(&v);
            let back = parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(constant_to_text(&back), text);
        }
    }

    #[test]
    fn tensors_as_values() {
        let t = parse("tensor float16 (2, 2) [1.5, -0.25, inf, 0.1]").unwrap();
        assert_eq!(constant_to_text(&t), "tensor float16 (2, 2) [1.5, -0.25, inf, 0.099975586]");
        assert_eq!(constant_to_text(&parse("tensor int64 (0,) []").unwrap()), "tensor int64 (0,) []");
        let payload = constant_to_text(&Value::Tensor(
            relaxvm::Tensor::from_vec([1], vec![f32::from_bits(0x7fc0_0001)]).unwrap(),
        ));
        assert_eq!(payload, "tensor float32 (1,) hex:0100c07f", "a NaN payload stays exact");
    }

    #[test]
    fn errors() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(
            e("integer 5"),
            "1:1: expected a constant (null, int, float, bool, str, shape, dtype, device, tensor or tuple), found \"integer\""
        );
        assert_eq!(e("int x"), "1:5: expected an integer, found \"x\"");
        assert_eq!(e("int5"), "1:4: expected an integer after 'int', found \"5\"");
        assert!(e("float 1.2.3").contains("expected a float"));
        assert!(e("bool yes").contains("expected true or false"));
        assert!(e("shape (1 2)").contains("',' or ')'"));
        assert!(e("dtype float7").contains("unknown dtype"));
        assert!(e("device gpu:0").contains("unknown device"));
        assert!(e("tensor float32 (2,) hex:00").contains("needs 8 bytes"));
        assert!(e("tensor float32 (2,) hex:000").contains("odd number"));
        assert!(e("tensor bool (1,) hex:07").contains("0 or 1"));
        assert!(e("tensor int8 (-1,) hex:").contains("invalid tensor shape"));
        assert_eq!(e("tensor int8 (2,) [1, 128]"), "1:22: 128 is out of range for int8");
        assert!(e("tensor float32 (3,) [1.0, 2.0]").contains("needs 12 bytes"));
        assert!(e("tensor float32 (1,) [1.0 2.0]").contains("',' or ']'"));
        assert!(e("tensor float32 (1,) [,]").contains("expected a value"));
        assert!(e("tensor bool (1,) [1]").contains("not true or false"));
        assert!(e("<function>").contains("a <function> constant has no text form"));
        assert!(e("tuple (int 1 int 2)").contains("',' or ')' in the tuple"));
        let deep = format!("{}int 1{}", "tuple (".repeat(40), ")".repeat(40));
        assert!(e(&deep).contains("tuple constants nest at most 32 deep"));
        assert!(e("int 1 2").contains("expected end of line"));
    }
}
