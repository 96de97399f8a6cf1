//! Function signatures (the IREE ABI): parameter and result types, their text form, the JSON
//! reflection records, and the checks made at the call boundary before any instruction runs.
//!
//! Text form (also in `as_text()` and `docs/text-format.md`):
//!
//! ```text
//! (x: tensor<[n, 16], f32>, k: f32, cfg: dict<{depth: i64, name: str}>) -> tuple<tensor<*, f32>, i64>
//! ```

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::names::{is_plain_name, write_name};
use crate::value::Value;
use std::collections::HashMap;
use std::fmt::{self, Write};

/// One dimension of a tensor type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed size.
    Static(i64),
    /// A size named by a symbol: every dimension with the same name must agree in one call.
    Symbolic(String),
    /// Any size.
    Unknown,
}

/// The type of a parameter or result.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// Anything.
    Any,
    /// A scalar: `bool`, `i8`..`i64`, `u8`..`u64`, `f16`, `bf16`, `f32`, `f64`.
    Scalar(DataType),
    /// A string.
    Str,
    /// A tensor.
    Tensor {
        /// The element type; `None` accepts any.
        dtype: Option<DataType>,
        /// The dimensions; `None` is an unknown rank.
        dims: Option<Vec<Dim>>,
        /// True when the callee needs C-contiguous data (strided arguments are copied).
        contiguous: bool,
    },
    /// A shape with `ndim` dimensions (`None`: any).
    Shape(Option<u32>),
    /// A tuple with one type per slot.
    Tuple(Vec<Type>),
    /// A list of any length whose items share one type (passed as a tuple).
    List(Box<Type>),
    /// A structure with named slots, passed as a tuple in sorted key order.
    Dict(Vec<(String, Type)>),
    /// An opaque object.
    Object,
}

/// A function's parameters (names and types) and result type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The parameters in order.
    pub params: Vec<(String, Type)>,
    /// The result.
    pub result: Type,
}

impl Type {
    /// A tensor type; `dims` of `None` is an unknown rank.
    pub fn tensor(dims: Option<Vec<Dim>>, dtype: Option<DataType>) -> Type {
        Type::Tensor { dtype, dims, contiguous: false }
    }

    /// A dict type; slots are sorted by key, as they are passed.
    pub fn dict(mut slots: Vec<(String, Type)>) -> Type {
        slots.sort_by(|a, b| a.0.cmp(&b.0));
        Type::Dict(slots)
    }

    /// The IREE reflection record of this type, as JSON text.
    pub fn reflection(&self) -> String {
        let mut out = String::new();
        self.write_reflection(&mut out);
        out
    }

    fn write_reflection(&self, out: &mut String) {
        let list = |out: &mut String, tag: &str, items: &[Type]| {
            write!(out, "[\"{tag}\"").unwrap();
            for t in items {
                out.push_str(", ");
                t.write_reflection(out);
            }
            out.push(']');
        };
        match self {
            Type::Any => out.push_str("\"unknown\""),
            Type::Scalar(d) => write!(out, "\"{}\"", d.short_name()).unwrap(),
            Type::Str => out.push_str("\"str\""),
            Type::Object => out.push_str("\"object\""),
            Type::Tensor { dtype, dims, .. } => {
                out.push_str("[\"ndarray\", ");
                match dtype {
                    Some(d) => write!(out, "\"{}\"", d.short_name()).unwrap(),
                    None => out.push_str("null"),
                }
                match dims {
                    None => out.push_str(", null"),
                    Some(dims) => {
                        write!(out, ", {}", dims.len()).unwrap();
                        for d in dims {
                            match d {
                                Dim::Static(n) => write!(out, ", {n}").unwrap(),
                                Dim::Symbolic(s) => write!(out, ", {}", json_string(s)).unwrap(),
                                Dim::Unknown => out.push_str(", null"),
                            }
                        }
                    }
                }
                out.push(']');
            }
            Type::Shape(n) => match n {
                Some(n) => write!(out, "[\"shape\", {n}]").unwrap(),
                None => out.push_str("[\"shape\", null]"),
            },
            Type::Tuple(items) => list(out, "stuple", items),
            Type::List(item) => list(out, "slist", std::slice::from_ref(item)),
            Type::Dict(slots) => {
                out.push_str("[\"sdict\"");
                for (k, t) in slots {
                    write!(out, ", [{}, ", json_string(k)).unwrap();
                    t.write_reflection(out);
                    out.push(']');
                }
                out.push(']');
            }
        }
    }

    /// Checks `v` against this type, binding symbolic dimensions in `dims`; `path` names the
    /// parameter (and slot) in errors. Type and dtype mismatches are type errors; rank and
    /// dimension mismatches are value errors.
    pub fn check(&self, v: &Value, path: &str, dims: &mut HashMap<String, (i64, String)>) -> Result<()> {
        let wrong = |expected: &str| Err(Error::type_mismatch(format!("{expected} for {path}"), v.describe()));
        match (self, v) {
            (Type::Any, _) | (Type::Object, _) => Ok(()),
            (Type::Scalar(DataType::Bool), Value::Bool(_)) => Ok(()),
            (Type::Scalar(d), Value::Int(i)) if !d.is_float() && *d != DataType::Bool => check_int_range(*d, *i, path),
            (Type::Scalar(d), Value::Float(_) | Value::Int(_)) if d.is_float() => Ok(()),
            (Type::Scalar(d), _) => wrong(d.name()),
            (Type::Str, Value::Str(_)) => Ok(()),
            (Type::Str, _) => wrong("str"),
            (Type::Tensor { dtype, dims: want, .. }, Value::Tensor(t)) => {
                if let Some(d) = dtype {
                    if *d != t.dtype() {
                        return Err(Error::type_mismatch(
                            format!("tensor of {d} for {path}"),
                            format!("tensor of {}", t.dtype()),
                        ));
                    }
                }
                match want {
                    None => Ok(()),
                    Some(want) => check_dims(want, t.shape(), path, dims),
                }
            }
            (Type::Tensor { .. }, _) => wrong("tensor"),
            (Type::Shape(n), Value::Shape(s)) => match n {
                Some(n) if *n as usize != s.len() => {
                    Err(Error::value(format!("{path}: expected a shape of {n} dimensions, got {s}")))
                }
                _ => Ok(()),
            },
            (Type::Shape(_), _) => wrong("shape"),
            (Type::Tuple(slots), Value::Tuple(items)) => {
                if slots.len() != items.len() {
                    return Err(Error::value(format!(
                        "{path}: expected a tuple of {} items, got {}",
                        slots.len(),
                        items.len()
                    )));
                }
                slots
                    .iter()
                    .zip(items.iter())
                    .enumerate()
                    .try_for_each(|(i, (t, v))| t.check(v, &format!("{path}[{i}]"), dims))
            }
            (Type::List(item), Value::Tuple(items)) => {
                items.iter().enumerate().try_for_each(|(i, v)| item.check(v, &format!("{path}[{i}]"), dims))
            }
            (Type::Dict(slots), Value::Tuple(items)) => {
                if slots.len() != items.len() {
                    return Err(Error::value(format!(
                        "{path}: expected a structure of {} slots, got {}",
                        slots.len(),
                        items.len()
                    )));
                }
                slots.iter().zip(items.iter()).try_for_each(|((k, t), v)| t.check(v, &format!("{path}[{k:?}]"), dims))
            }
            (Type::Tuple(_), _) => wrong("tuple"),
            (Type::List(_), _) => wrong("list"),
            (Type::Dict(_), _) => wrong("dict"),
        }
    }

    /// Converts `v` to what the callee expects once it has passed [`Type::check`]: ints become
    /// floats for float scalars, strided tensors become contiguous where that is declared (an
    /// allocation error when the copy does not fit in memory).
    pub fn coerce(&self, v: Value) -> Result<Value> {
        Ok(match (self, &v) {
            (Type::Scalar(d), Value::Int(i)) if d.is_float() => Value::Float(*i as f64),
            (Type::Tensor { contiguous: true, .. }, Value::Tensor(t)) => Value::Tensor(t.contiguous()?),
            (Type::Tuple(slots), Value::Tuple(items)) => Value::tuple(
                slots.iter().zip(items.iter()).map(|(t, v)| t.coerce(v.clone())).collect::<Result<Vec<_>>>()?,
            ),
            (Type::Dict(slots), Value::Tuple(items)) => Value::tuple(
                slots.iter().zip(items.iter()).map(|((_, t), v)| t.coerce(v.clone())).collect::<Result<Vec<_>>>()?,
            ),
            (Type::List(item), Value::Tuple(items)) => {
                Value::tuple(items.iter().map(|v| item.coerce(v.clone())).collect::<Result<Vec<_>>>()?)
            }
            _ => v,
        })
    }
}

fn check_int_range(d: DataType, i: i64, path: &str) -> Result<()> {
    let bits = u32::from(d.bits());
    let ok = match d.class() {
        crate::dtype::TypeClass::UInt => i >= 0 && (bits >= 64 || i < (1i64 << bits)),
        _ => bits >= 64 || (i >= -(1i64 << (bits - 1)) && i < (1i64 << (bits - 1))),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::value(format!("{path}: {i} does not fit in {d}")))
    }
}

fn check_dims(want: &[Dim], got: &[i64], path: &str, bound: &mut HashMap<String, (i64, String)>) -> Result<()> {
    if want.len() != got.len() {
        return Err(Error::value(format!(
            "{path}: expected a tensor of rank {}, got shape {:?} (rank {})",
            want.len(),
            got,
            got.len()
        )));
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        match w {
            Dim::Unknown => {}
            Dim::Static(n) if n == g => {}
            Dim::Static(n) => {
                return Err(Error::value(format!("{path}: dimension {i} must be {n}, got {g} (shape {got:?})")))
            }
            Dim::Symbolic(s) => match bound.get(s) {
                Some((v, _)) if v == g => {}
                Some((v, at)) => {
                    return Err(Error::value(format!("{path}: dimension {i} is {g}, but symbol {s} is {v} from {at}")))
                }
                None => {
                    bound.insert(s.clone(), (*g, format!("{path} dimension {i}")));
                }
            },
        }
    }
    Ok(())
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Signature {
    /// Checks arguments against the parameters: count, types, dtypes, ranks, static and symbolic
    /// dimensions. The error names the parameter, what was expected and what was given.
    pub fn check_args(&self, func: &str, args: &[Value]) -> Result<()> {
        if args.len() != self.params.len() {
            return Err(Error::arity(func, self.params.len().to_string(), args.len()));
        }
        let mut dims = HashMap::new();
        for ((name, t), v) in self.params.iter().zip(args) {
            t.check(v, &format!("parameter {name:?} of {func}"), &mut dims)?;
        }
        Ok(())
    }

    /// Checks and converts arguments (see [`Type::coerce`]).
    pub fn prepare_args(&self, func: &str, args: &[Value]) -> Result<Vec<Value>> {
        self.check_args(func, args)?;
        self.params.iter().zip(args).map(|((_, t), v)| t.coerce(v.clone())).collect()
    }

    /// The IREE reflection object `{"a": [...], "r": [...]}` as JSON text.
    pub fn reflection(&self) -> String {
        let args: Vec<String> = self.params.iter().map(|(_, t)| t.reflection()).collect();
        format!("{{\"a\": [{}], \"r\": [{}]}}", args.join(", "), self.result.reflection())
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = |f: &mut fmt::Formatter<'_>, items: &[Type]| -> fmt::Result {
            for (i, t) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{t}")?;
            }
            Ok(())
        };
        match self {
            Type::Any => f.write_str("any"),
            Type::Scalar(DataType::Bool) => f.write_str("bool"),
            Type::Scalar(d) => f.write_str(d.short_name()),
            Type::Str => f.write_str("str"),
            Type::Object => f.write_str("object"),
            Type::Tensor { dtype, dims, contiguous } => {
                f.write_str("tensor<")?;
                match dims {
                    None => f.write_str("*")?,
                    Some(dims) => {
                        f.write_str("[")?;
                        for (i, d) in dims.iter().enumerate() {
                            if i > 0 {
                                f.write_str(", ")?;
                            }
                            match d {
                                Dim::Static(n) => write!(f, "{n}")?,
                                Dim::Symbolic(s) => f.write_str(s)?,
                                Dim::Unknown => f.write_str("?")?,
                            }
                        }
                        f.write_str("]")?;
                    }
                }
                write!(f, ", {}", dtype.map_or("?", |d| d.short_name()))?;
                if *contiguous {
                    f.write_str(", contiguous")?;
                }
                f.write_str(">")
            }
            Type::Shape(n) => match n {
                Some(n) => write!(f, "shape<{n}>"),
                None => f.write_str("shape<?>"),
            },
            Type::Tuple(items) => {
                f.write_str("tuple<")?;
                seq(f, items)?;
                f.write_str(">")
            }
            Type::List(item) => write!(f, "list<{item}>"),
            Type::Dict(slots) => {
                f.write_str("dict<{")?;
                for (i, (k, t)) in slots.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    let mut key = String::new();
                    write_name(&mut key, k);
                    write!(f, "{key}: {t}")?;
                }
                f.write_str("}>")
            }
        }
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, (name, t)) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            let mut n = String::new();
            write_name(&mut n, name);
            write!(f, "{n}: {t}")?;
        }
        write!(f, ") -> {}", self.result)
    }
}

/// A small recursive-descent parser for the text form.
struct Parser<'a> {
    s: &'a str,
    pos: usize,
    depth: usize,
}

/// How deeply types may nest (bounds the recursion of the parser, the binary decoder, printing
/// and checking on hostile input); the verifier rejects deeper types.
pub const MAX_TYPE_DEPTH: usize = 64;

/// A syntax error in the text form of a type or signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The byte offset in the parsed text where the error is.
    pub offset: usize,
    /// What the parser expected there.
    pub expected: String,
    /// What it found (quoted), or `end of input`.
    pub found: String,
}

impl fmt::Display for ParseError {
    /// `expected a type at column 5, found "tensr<*, f3"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {} at column {}, found {}", self.expected, self.offset + 1, self.found)
    }
}

impl std::error::Error for ParseError {}

impl From<ParseError> for Error {
    fn from(e: ParseError) -> Error {
        Error::value(format!("signature: {e}"))
    }
}

type PResult<T> = std::result::Result<T, ParseError>;

impl<'a> Parser<'a> {
    fn err<T>(&self, expected: &str) -> PResult<T> {
        let found: String = self.s[self.pos..].chars().take(12).collect();
        let found = if found.is_empty() { "end of input".to_string() } else { format!("{found:?}") };
        Err(ParseError { offset: self.pos, expected: expected.to_string(), found })
    }

    fn skip_ws(&mut self) {
        while self.s[self.pos..].starts_with(char::is_whitespace) {
            self.pos += self.s[self.pos..].chars().next().map_or(1, char::len_utf8);
        }
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.s[self.pos..].starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &str) -> PResult<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            self.err(&format!("{tok:?}"))
        }
    }

    fn word(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let rest = &self.s[self.pos..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '-')))
            .unwrap_or(rest.len());
        if len == 0 {
            return None;
        }
        self.pos += len;
        Some(&rest[..len])
    }

    fn name(&mut self) -> PResult<String> {
        self.skip_ws();
        if self.s[self.pos..].starts_with('"') {
            return self.quoted();
        }
        match self.word() {
            Some(w) if is_plain_name(w) => Ok(w.to_string()),
            _ => self.err("a name"),
        }
    }

    fn quoted(&mut self) -> PResult<String> {
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.s[self.pos..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, c @ ('"' | '\\'))) => out.push(c),
                    // \u{HEX}, as `write_name` writes control characters.
                    Some((j, 'u')) => {
                        let rest = &self.s[self.pos + j + 1..];
                        let hex = rest.strip_prefix('{').and_then(|r| r.split_once('}')).map(|(h, _)| h);
                        let c = hex
                            .filter(|h| (1..=6).contains(&h.len()) && h.chars().all(|c| c.is_ascii_hexdigit()))
                            .and_then(|h| u32::from_str_radix(h, 16).ok())
                            .and_then(char::from_u32);
                        match (c, hex) {
                            (Some(c), Some(h)) => {
                                out.push(c);
                                // Skip `{HEX}`: all ASCII, one char per byte.
                                for _ in 0..h.len() + 2 {
                                    chars.next();
                                }
                            }
                            _ => {
                                self.pos += i;
                                return self.err("a valid escape (\\u{HEX} with 1 to 6 hex digits)");
                            }
                        }
                    }
                    _ => {
                        self.pos += i;
                        return self.err("a valid escape (\\\", \\\\, \\n, \\t, \\r or \\u{HEX})");
                    }
                },
                c => out.push(c),
            }
        }
        self.err("a closing quote")
    }

    fn ty(&mut self) -> PResult<Type> {
        self.depth += 1;
        self.skip_ws();
        if self.depth > MAX_TYPE_DEPTH {
            return self.err(&format!("types nested at most {MAX_TYPE_DEPTH} deep"));
        }
        let start = self.pos;
        let t = match self.word() {
            Some("any") => Type::Any,
            Some("str") => Type::Str,
            Some("object") => Type::Object,
            Some("bool") => Type::Scalar(DataType::Bool),
            Some("tensor") => self.tensor()?,
            Some("shape") => {
                self.expect("<")?;
                let n = if self.eat("?") {
                    None
                } else {
                    let at = self.pos;
                    match u32::try_from(self.uint()?) {
                        Ok(n) => Some(n),
                        Err(_) => {
                            self.pos = at;
                            return self.err("a rank below 2^32");
                        }
                    }
                };
                self.expect(">")?;
                Type::Shape(n)
            }
            Some("tuple") => {
                self.expect("<")?;
                let items = if self.eat(">") { Vec::new() } else { self.list_until(">")? };
                Type::Tuple(items)
            }
            Some("list") => {
                self.expect("<")?;
                let t = self.ty()?;
                self.expect(">")?;
                Type::List(Box::new(t))
            }
            Some("dict") => self.dict()?,
            Some(w) => match w.parse::<DataType>() {
                Ok(d) if d.short_name() == w => Type::Scalar(d),
                _ => {
                    self.pos = start;
                    return self.err("a type (any, str, object, bool, i8..i64, u8..u64, f16, bf16, f32, f64, tensor<..>, shape<..>, tuple<..>, list<..>, dict<{..}>)");
                }
            },
            None => return self.err("a type"),
        };
        self.depth -= 1;
        Ok(t)
    }

    fn list_until(&mut self, close: &str) -> PResult<Vec<Type>> {
        let mut items = vec![self.ty()?];
        while self.eat(",") {
            items.push(self.ty()?);
        }
        self.expect(close)?;
        Ok(items)
    }

    fn uint(&mut self) -> PResult<u64> {
        match self.word().and_then(|w| w.parse::<u64>().ok()) {
            Some(n) if n <= i64::MAX as u64 => Ok(n),
            _ => self.err("a non-negative integer"),
        }
    }

    fn tensor(&mut self) -> PResult<Type> {
        self.expect("<")?;
        let dims = if self.eat("*") {
            None
        } else {
            self.expect("[")?;
            let mut dims = Vec::new();
            if !self.eat("]") {
                loop {
                    dims.push(if self.eat("?") {
                        Dim::Unknown
                    } else {
                        match self.word() {
                            Some(w) if w.starts_with(|c: char| c.is_ascii_digit()) => match w.parse::<i64>() {
                                Ok(n) => Dim::Static(n),
                                Err(_) => return self.err("a dimension"),
                            },
                            Some(w) if is_plain_name(w) => Dim::Symbolic(w.to_string()),
                            _ => return self.err("a dimension (an integer, a name or ?)"),
                        }
                    });
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
            }
            Some(dims)
        };
        self.expect(",")?;
        let dtype = if self.eat("?") {
            None
        } else {
            match self.word().map(str::parse::<DataType>) {
                Some(Ok(d)) => Some(d),
                _ => return self.err("a dtype or ?"),
            }
        };
        let contiguous = self.eat(",") && {
            if self.word() != Some("contiguous") {
                return self.err("contiguous");
            }
            true
        };
        self.expect(">")?;
        Ok(Type::Tensor { dtype, dims, contiguous })
    }

    fn dict(&mut self) -> PResult<Type> {
        self.expect("<")?;
        self.expect("{")?;
        let mut slots = Vec::new();
        if !self.eat("}") {
            loop {
                let k = self.name()?;
                self.expect(":")?;
                slots.push((k, self.ty()?));
                if !self.eat(",") {
                    break;
                }
            }
            self.expect("}")?;
        }
        self.expect(">")?;
        Ok(Type::dict(slots))
    }

    fn signature(&mut self) -> PResult<Signature> {
        self.expect("(")?;
        let mut params = Vec::new();
        if !self.eat(")") {
            loop {
                let n = self.name()?;
                self.expect(":")?;
                params.push((n, self.ty()?));
                if !self.eat(",") {
                    break;
                }
            }
            if !self.eat(")") {
                return self.err("\",\" or \")\"");
            }
        }
        self.expect("->")?;
        let result = self.ty()?;
        Ok(Signature { params, result })
    }

    fn finish(&mut self) -> PResult<()> {
        self.skip_ws();
        if self.pos == self.s.len() {
            Ok(())
        } else {
            self.err("end of input")
        }
    }
}

impl std::str::FromStr for Type {
    type Err = Error;
    fn from_str(s: &str) -> Result<Type> {
        let mut p = Parser { s, pos: 0, depth: 0 };
        let t = p.ty()?;
        p.finish()?;
        Ok(t)
    }
}

impl std::str::FromStr for Signature {
    type Err = Error;
    fn from_str(s: &str) -> Result<Signature> {
        let mut p = Parser { s, pos: 0, depth: 0 };
        let sig = p.signature()?;
        p.finish()?;
        Ok(sig)
    }
}

impl Signature {
    /// Parses a signature at the start of `s` and returns it with the number of bytes it took
    /// (trailing text is left for the caller, e.g. the `:` closing a function header).
    pub fn parse_prefix(s: &str) -> std::result::Result<(Signature, usize), ParseError> {
        let mut p = Parser { s, pos: 0, depth: 0 };
        let sig = p.signature()?;
        Ok((sig, p.pos))
    }

    /// The parameter names, in order.
    pub fn param_names(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(|(n, _)| n.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    const SIG: &str = "(x: tensor<[n, 16], f32>, y: tensor<[n, ?], f32, contiguous>, k: f32, s: str, \
        t: tuple<i64, bool>, l: list<u8>, d: dict<{b: i32, a: shape<2>}>, o: object, z: any, w: tensor<*, ?>) \
        -> tuple<tensor<*, f32>, i64>";

    fn f32s(shape: &[i64]) -> Value {
        Value::Tensor(Tensor::zeros(shape, DataType::F32, Default::default()).unwrap())
    }

    #[test]
    fn text_round_trips() {
        let sig: Signature = SIG.parse().unwrap();
        let text = sig.to_string();
        assert_eq!(text.parse::<Signature>().unwrap(), sig);
        assert!(text.contains("dict<{a: shape<2>, b: i32}>"), "keys sorted: {text}");
        for t in ["any", "bf16", "u64", "tensor<[], i8>", "tuple<>", "list<list<f64>>", "dict<{}>", "shape<?>"] {
            assert_eq!(t.parse::<Type>().unwrap().to_string(), t);
        }
        // Names with control characters print with \u{..} escapes, which parse back.
        let odd: Signature = "(\"a\\u{7f}\\n\\u{1F600}\": dict<{\"\\u{0}\": i64}>) -> any".parse().unwrap();
        assert_eq!(odd.params[0].0, "a\u{7f}\n\u{1F600}");
        assert_eq!(odd.to_string().parse::<Signature>().unwrap(), odd);
        for bad in [
            "(\"\\u{}\": i64) -> any",
            "(\"\\u{110000}\": i64) -> any",
            "(\"\\u{41\": i64) -> any",
            "(x: shape<4294967296>) -> any",
        ] {
            assert!(bad.parse::<Signature>().is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_errors_say_where_and_what() {
        for bad in [
            "(x: tensr<*, f32>) -> any",
            "(x: tensor<[1], f99>) -> any",
            "(x: i64",
            "(x: i64) -> any junk",
            "(: i64) -> any",
        ] {
            let e = bad.parse::<Signature>().unwrap_err().to_string();
            assert!(e.contains("expected") && e.contains("column"), "{bad}: {e}");
        }
        let deep = format!("{}i64{}", "list<".repeat(100), ">".repeat(100));
        assert!(deep.parse::<Type>().is_err());
    }

    #[test]
    fn reflection_records() {
        let sig: Signature =
            "(a: tensor<[?, 16], f32>, b: tensor<*, i8>, c: tuple<i32, str>, d: dict<{k: f64}>) -> bf16"
                .parse()
                .unwrap();
        assert_eq!(
            sig.reflection(),
            r#"{"a": [["ndarray", "f32", 2, null, 16], ["ndarray", "i8", null], ["stuple", "i32", "str"], ["sdict", ["k", "f64"]]], "r": ["bf16"]}"#
        );
    }

    fn args() -> Vec<Value> {
        vec![
            f32s(&[3, 16]),
            f32s(&[3, 5]),
            Value::Int(2),
            Value::str("s"),
            Value::tuple(vec![Value::Int(1), Value::Bool(true)]),
            Value::tuple(vec![Value::Int(255)]),
            Value::tuple(vec![Value::Shape([1, 2].into()), Value::Int(7)]),
            Value::Null,
            Value::Null,
            Value::Tensor(Tensor::scalar(1i32)),
        ]
    }

    #[test]
    fn accepts_matching_arguments_and_coerces() {
        let sig: Signature = SIG.parse().unwrap();
        let out = sig.prepare_args("f", &args()).unwrap();
        assert!(matches!(out[2], Value::Float(x) if x == 2.0));
    }

    #[test]
    fn rejects_each_kind_of_mismatch_naming_the_parameter() {
        let sig: Signature = SIG.parse().unwrap();
        let cases: Vec<(usize, Value, &str, bool)> = vec![
            (0, Value::Int(1), "expected tensor", true),
            (
                0,
                Value::Tensor(Tensor::zeros([3, 16], DataType::F64, Default::default()).unwrap()),
                "tensor of float32",
                true,
            ),
            (0, f32s(&[3]), "rank 2", false),
            (0, f32s(&[3, 15]), "must be 16", false),
            (1, f32s(&[4, 5]), "symbol n is 3", false),
            (2, Value::str("x"), "float32", true),
            (3, Value::Int(1), "str", true),
            (4, Value::tuple(vec![Value::Int(1)]), "tuple of 2 items", false),
            (4, Value::tuple(vec![Value::Int(1), Value::Int(1)]), "bool", true),
            (5, Value::tuple(vec![Value::Int(256)]), "does not fit in uint8", false),
            (6, Value::tuple(vec![Value::Shape([1].into()), Value::Int(7)]), "shape of 2", false),
            (6, Value::Int(3), "dict", true),
        ];
        for (i, v, msg, is_type) in cases {
            let mut a = args();
            a[i] = v;
            let e = sig.check_args("f", &a).unwrap_err();
            let s = e.to_string();
            assert!(s.contains(msg) && s.contains(&format!("{:?}", sig.params[i].0)), "{i}: {s}");
            assert_eq!(matches!(e.kind(), crate::ErrorKind::Type { .. }), is_type, "{s}");
        }
        assert!(sig.check_args("f", &[]).is_err());
    }
}
