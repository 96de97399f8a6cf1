//! Function signatures and the entry function (version 3).
//!
//! ```text
//! signatures ::= count:varint (func:varint nparams:varint (name:string type)[nparams] result:type)[count]
//!                func indices strictly increasing
//! type       ::= 0x00                                          any
//!              | 0x01 dtype:byte                               scalar
//!              | 0x02                                          str
//!              | 0x03                                          object
//!              | 0x04 flags:byte [dtype:byte] [ndim:varint dim[ndim]]
//!                                                              tensor; flags: 1 dtype, 2 rank, 4 contiguous
//!              | 0x05 rank:varint                              shape (0: any, else ndim + 1)
//!              | 0x06 n:varint type[n]                         tuple
//!              | 0x07 type                                     list
//!              | 0x08 n:varint (key:string type)[n]            dict
//! dim        ::= varint                                        0 unknown, 2n + 1 static n, 2s + 2 symbol (string s)
//! entry      ::= func:varint
//! ```
//!
//! Types nest at most [`MAX_TYPE_DEPTH`] deep, so decoding recurses a bounded number of times.

use super::cursor::Cursor;
use super::strings::{Budget, StringTable, Strings};
use super::varint;
use crate::error::{Error, Result};
use crate::executable::{Executable, FuncInfo};
use crate::types::{negative_dimension, types_too_deep, Dim, Signature, Type, MAX_TYPE_DEPTH};

const ANY: u8 = 0;
const SCALAR: u8 = 1;
const STR: u8 = 2;
const OBJECT: u8 = 3;
const TENSOR: u8 = 4;
const SHAPE: u8 = 5;
const TUPLE: u8 = 6;
const LIST: u8 = 7;
const DICT: u8 = 8;

const HAS_DTYPE: u8 = 1;
const HAS_RANK: u8 = 2;
const CONTIGUOUS: u8 = 4;

/// What a decoded type node is charged against the memory budget (its size in memory, roughly).
const NODE_COST: u64 = 48;

/// Encodes the signatures of every function that has one, or `None` if none has.
pub fn encode<'a>(funcs: &'a [FuncInfo], strings: &mut StringTable<'a>) -> Result<Option<Vec<u8>>> {
    let signed: Vec<(usize, &Signature)> =
        funcs.iter().enumerate().filter_map(|(i, f)| f.signature.as_ref().map(|s| (i, s))).collect();
    if signed.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    varint::put(&mut out, signed.len() as u64);
    for (i, sig) in signed {
        varint::put(&mut out, i as u64);
        varint::put(&mut out, sig.params.len() as u64);
        for (name, t) in &sig.params {
            varint::put(&mut out, strings.intern(name));
            encode_type(t, &mut out, strings, 1)
                .map_err(|e| Error::value(format!("function {:?}: {e}", funcs[i].name)))?;
        }
        encode_type(&sig.result, &mut out, strings, 1)
            .map_err(|e| Error::value(format!("function {:?}: {e}", funcs[i].name)))?;
    }
    Ok(Some(out))
}

fn encode_type<'a>(t: &'a Type, out: &mut Vec<u8>, strings: &mut StringTable<'a>, depth: usize) -> Result<()> {
    if depth > MAX_TYPE_DEPTH {
        return Err(Error::value(format!("the signature nests types more than {MAX_TYPE_DEPTH} deep")));
    }
    match t {
        Type::Any => out.push(ANY),
        Type::Scalar(d) => out.extend_from_slice(&[SCALAR, d.tag()]),
        Type::Str => out.push(STR),
        Type::Object => out.push(OBJECT),
        Type::Tensor { dtype, dims, contiguous } => {
            let mut flags = 0;
            for (set, flag) in [(dtype.is_some(), HAS_DTYPE), (dims.is_some(), HAS_RANK), (*contiguous, CONTIGUOUS)] {
                if set {
                    flags |= flag;
                }
            }
            out.extend_from_slice(&[TENSOR, flags]);
            if let Some(d) = dtype {
                out.push(d.tag());
            }
            if let Some(dims) = dims {
                varint::put(out, dims.len() as u64);
                for d in dims {
                    match d {
                        Dim::Unknown => varint::put(out, 0),
                        Dim::Static(n) => {
                            let n = u64::try_from(*n).map_err(|_| Error::value(negative_dimension(*n)))?;
                            // n <= i64::MAX, so 2n + 1 fits in u64.
                            varint::put(out, 2 * n + 1);
                        }
                        Dim::Symbolic(s) => varint::put(out, 2 * strings.intern(s) + 2),
                    }
                }
            }
        }
        Type::Shape(n) => {
            out.push(SHAPE);
            varint::put(out, n.map_or(0, |n| u64::from(n) + 1));
        }
        Type::Tuple(items) => {
            out.push(TUPLE);
            varint::put(out, items.len() as u64);
            for t in items {
                encode_type(t, out, strings, depth + 1)?;
            }
        }
        Type::List(item) => {
            out.push(LIST);
            encode_type(item, out, strings, depth + 1)?;
        }
        Type::Dict(slots) => {
            out.push(DICT);
            varint::put(out, slots.len() as u64);
            for (k, t) in slots {
                varint::put(out, strings.intern(k));
                encode_type(t, out, strings, depth + 1)?;
            }
        }
    }
    Ok(())
}

/// Decodes signatures into `funcs` (the verifier then checks them against each function).
pub fn decode(mut c: Cursor<'_>, funcs: &mut [FuncInfo], strings: &Strings<'_>, budget: &mut Budget) -> Result<()> {
    let n = c.count("signature", 3)?;
    let mut next = 0;
    for _ in 0..n {
        let i = c.increasing_function_index(&mut next, funcs.len())?;
        let k = c.count("parameter", 2)?;
        let mut params = Vec::with_capacity(k);
        for _ in 0..k {
            let name = strings.read_owned(&mut c, budget)?;
            params.push((name, decode_type(&mut c, strings, budget, 1)?));
        }
        let result = decode_type(&mut c, strings, budget, 1)?;
        funcs[i].signature = Some(Signature { params, result });
    }
    c.finish()
}

fn decode_type(c: &mut Cursor<'_>, strings: &Strings<'_>, budget: &mut Budget, depth: usize) -> Result<Type> {
    let at = c.pos();
    if depth > MAX_TYPE_DEPTH {
        return Err(c.err_at(at, types_too_deep()));
    }
    budget.charge(NODE_COST, c, at)?;
    let tag = c.byte()?;
    Ok(match tag {
        ANY => Type::Any,
        SCALAR => Type::Scalar(c.dtype()?),
        STR => Type::Str,
        OBJECT => Type::Object,
        TENSOR => {
            let flags_at = c.pos();
            let flags = c.byte()?;
            if flags & !(HAS_DTYPE | HAS_RANK | CONTIGUOUS) != 0 {
                return Err(c.err_at(flags_at, format!("unknown tensor type flags {flags:#04x}")));
            }
            let dtype = if flags & HAS_DTYPE != 0 { Some(c.dtype()?) } else { None };
            let dims = if flags & HAS_RANK != 0 {
                let n = c.count("type dimension", 1)?;
                budget.charge(n as u64 * 24, c, flags_at)?;
                let mut dims = Vec::with_capacity(n);
                for _ in 0..n {
                    let dim_at = c.pos();
                    let v = c.varint()?;
                    dims.push(match v {
                        0 => Dim::Unknown,
                        v if v & 1 == 1 => Dim::Static((v >> 1) as i64),
                        v => {
                            let s =
                                usize::try_from((v - 2) >> 1).ok().filter(|s| *s < strings.len()).ok_or_else(|| {
                                    c.err_at(dim_at, format!("string index {} out of range", (v - 2) >> 1))
                                })?;
                            let name = strings.get(s);
                            budget.charge(name.len() as u64, c, dim_at)?;
                            Dim::Symbolic(name.to_string())
                        }
                    });
                }
                Some(dims)
            } else {
                None
            };
            Type::Tensor { dtype, dims, contiguous: flags & CONTIGUOUS != 0 }
        }
        SHAPE => {
            let v_at = c.pos();
            match c.varint()? {
                0 => Type::Shape(None),
                v => Type::Shape(Some(
                    u32::try_from(v - 1).map_err(|_| c.err_at(v_at, format!("shape rank {} exceeds 2^32", v - 1)))?,
                )),
            }
        }
        TUPLE => {
            let n = c.count("tuple slot", 1)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(decode_type(c, strings, budget, depth + 1)?);
            }
            Type::Tuple(items)
        }
        LIST => Type::List(Box::new(decode_type(c, strings, budget, depth + 1)?)),
        DICT => {
            let n = c.count("dict slot", 2)?;
            let mut slots = Vec::with_capacity(n);
            for _ in 0..n {
                let k = strings.read_owned(c, budget)?;
                slots.push((k, decode_type(c, strings, budget, depth + 1)?));
            }
            Type::Dict(slots)
        }
        other => return Err(c.err_at(at, format!("unknown type tag {other:#04x}"))),
    })
}

/// Encodes the entry function, or `None` when none is set.
pub fn encode_entry(exe: &Executable) -> Option<Vec<u8>> {
    let index = exe.declared_entry().and_then(|e| exe.func_index(e))?;
    let mut out = Vec::new();
    varint::put(&mut out, index.into());
    Some(out)
}

/// Decodes the entry function's name.
pub fn decode_entry(mut c: Cursor<'_>, funcs: &[FuncInfo]) -> Result<String> {
    let i = c.index("entry function index", funcs.len())?;
    c.finish()?;
    Ok(funcs[i].name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(t: &Type) -> Type {
        let mut strings = StringTable::default();
        let mut out = Vec::new();
        encode_type(t, &mut out, &mut strings, 1).unwrap();
        let table = strings.encode();
        let s = Strings::decode(Cursor::new(&table, 0, "strings")).unwrap();
        let mut c = Cursor::new(&out, 0, "signatures");
        let back = decode_type(&mut c, &s, &mut Budget::for_metadata(out.len()), 1).unwrap();
        c.finish().unwrap();
        back
    }

    #[test]
    fn every_type_node_round_trips() {
        for text in [
            "any",
            "bool",
            "bf16",
            "str",
            "object",
            "tensor<*, ?>",
            "tensor<[], i8>",
            "tensor<[n, ?, 16, 0], f32, contiguous>",
            "shape<?>",
            "shape<0>",
            "shape<3>",
            "tuple<>",
            "tuple<i64, tuple<str>>",
            "list<list<f64>>",
            "dict<{}>",
            "dict<{\"a b\": i32, c: tensor<[n], u8>}>",
        ] {
            let t: Type = text.parse().unwrap();
            assert_eq!(round_trip(&t), t, "{text}");
        }
    }

    #[test]
    fn too_deep_types_are_rejected_both_ways() {
        let mut t = Type::Any;
        for _ in 0..MAX_TYPE_DEPTH {
            t = Type::List(Box::new(t));
        }
        let mut strings = StringTable::default();
        assert_eq!(
            format!("{:?}", encode_type(&t, &mut Vec::new(), &mut strings, 1).expect_err("an error")),
            r#"Value("the signature nests types more than 64 deep")"#
        );
        // 65 list tags then any: the decoder stops at the limit.
        let mut bytes = vec![LIST; MAX_TYPE_DEPTH];
        bytes.push(ANY);
        let s = Strings::decode(Cursor::new(&[1], 0, "strings")).unwrap();
        let e = decode_type(&mut Cursor::new(&bytes, 0, "signatures"), &s, &mut Budget::for_metadata(100), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nest more than"), "{e}");
    }

    #[test]
    fn malformed_types_are_errors() {
        let s = Strings::decode(Cursor::new(&[1], 0, "strings")).unwrap();
        let err = |bytes: &[u8]| {
            decode_type(&mut Cursor::new(bytes, 0, "signatures"), &s, &mut Budget::for_metadata(100), 1)
                .unwrap_err()
                .to_string()
        };
        assert!(err(&[0x55]).contains("unknown type tag 0x55"));
        assert!(err(&[SCALAR, 99]).contains("unknown dtype tag 99"));
        assert!(err(&[TENSOR, 0x08]).contains("unknown tensor type flags"));
        assert!(err(&[TENSOR, HAS_RANK, 0x03, 0x09]).contains("string index 1 out of range"));
        assert!(err(&[TUPLE, 0x7f]).contains("cannot fit"));
        assert!(err(&[SHAPE]).contains("truncated"));
        assert!(err(&[]).contains("end of section"));
    }
}
