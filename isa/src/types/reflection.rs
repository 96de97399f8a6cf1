//! The IREE reflection records of types and signatures (`{"a": [...], "r": [...]}`), as JSON
//! text written by serde_json.

use super::{Dim, Signature, Type};
use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};
use serde_json::{json, Value as Json};
use std::io::{self, Write};

impl Type {
    /// The IREE reflection record of this type, as JSON text.
    pub fn reflection(&self) -> String {
        to_text(&self.reflection_json())
    }

    fn reflection_json(&self) -> Json {
        let tagged = |tag: &str, items: &mut dyn Iterator<Item = Json>| {
            Json::Array(std::iter::once(Json::from(tag)).chain(items).collect())
        };
        match self {
            Type::Any => json!("unknown"),
            Type::Scalar(d) => json!(d.short_name()),
            Type::Str => json!("str"),
            Type::Object => json!("object"),
            Type::Tensor { dtype, dims, .. } => {
                let mut record = vec![json!("ndarray"), json!(dtype.map(|d| d.short_name()))];
                match dims {
                    None => record.push(Json::Null),
                    Some(dims) => {
                        record.push(json!(dims.len()));
                        record.extend(dims.iter().map(|d| match d {
                            Dim::Static(n) => json!(n),
                            Dim::Symbolic(s) => json!(s),
                            Dim::Unknown => Json::Null,
                        }));
                    }
                }
                Json::Array(record)
            }
            Type::Shape(n) => json!(["shape", n]),
            Type::Tuple(items) => tagged("stuple", &mut items.iter().map(Type::reflection_json)),
            Type::List(item) => tagged("slist", &mut std::iter::once(item.reflection_json())),
            Type::Dict(slots) => tagged("sdict", &mut slots.iter().map(|(k, t)| json!([k, t.reflection_json()]))),
        }
    }
}

impl Signature {
    /// The IREE reflection object `{"a": [...], "r": [...]}` as JSON text.
    pub fn reflection(&self) -> String {
        let args: Vec<Json> = self.params.iter().map(|(_, t)| t.reflection_json()).collect();
        to_text(&json!({"a": args, "r": [self.result.reflection_json()]}))
    }
}

/// `v` as JSON text in the spacing IREE's records use (`", "` between items, `": "` after
/// keys) and with control characters as `\u00XX`, as this format has always been written.
fn to_text(v: &Json) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Spaced);
    // Writing a JSON value into a Vec cannot fail.
    v.serialize(&mut ser).expect("serializing JSON into memory");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// serde_json's compact layout with a space after each separator.
struct Spaced;

impl Formatter for Spaced {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_char_escape<W: ?Sized + Write>(&mut self, w: &mut W, escape: CharEscape) -> io::Result<()> {
        let control = |w: &mut W, byte: u8| write!(w, "\\u{byte:04x}");
        match escape {
            CharEscape::Quote => w.write_all(b"\\\""),
            CharEscape::ReverseSolidus => w.write_all(b"\\\\"),
            CharEscape::Solidus => w.write_all(b"/"),
            CharEscape::Backspace => control(w, 0x08),
            CharEscape::FormFeed => control(w, 0x0c),
            CharEscape::LineFeed => control(w, b'\n'),
            CharEscape::CarriageReturn => control(w, b'\r'),
            CharEscape::Tab => control(w, b'\t'),
            CharEscape::AsciiControl(byte) => control(w, byte),
        }
    }
}
