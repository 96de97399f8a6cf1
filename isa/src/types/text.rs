//! The text form of types and signatures: printing (`Display`) and a small recursive-descent
//! parser (`FromStr`, [`Signature::parse_prefix`]).

use super::{Dim, Signature, Type, MAX_TYPE_DEPTH};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::names::{is_plain_name, write_name};
use std::fmt;

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
                // `bool` as in a scalar type (its short name `i1` reads back too).
                let dtype = match dtype {
                    None => "?",
                    Some(DataType::Bool) => "bool",
                    Some(d) => d.short_name(),
                };
                write!(f, ", {dtype}")?;
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
        let at = self.pos;
        match self.word().and_then(|w| w.parse::<u64>().ok()) {
            Some(n) if n <= i64::MAX as u64 => Ok(n),
            _ => {
                // The error points at the word, not past it.
                self.pos = at;
                self.err("a non-negative integer")
            }
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
            let at = self.pos;
            match self.word().map(str::parse::<DataType>) {
                Some(Ok(d)) => Some(d),
                _ => {
                    self.pos = at;
                    return self.err("a dtype or ?");
                }
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
}
