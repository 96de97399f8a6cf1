//! The function table.
//!
//! ```text
//! functions ::= count:varint func[count]
//! func      ::= name_and_kind:varint                  (string index << 1) | is_bytecode
//!               [start:varint len:varint num_args:varint registers:varint]   (bytecode only)
//! ```
//!
//! A bytecode function owns instructions `start .. start + len`. Packed entries carry only their
//! name; parameter names live in the debug section `param_names`.

use super::cursor::Cursor;
use super::strings::{Budget, StringTable, Strings};
use super::varint;
use crate::error::Result;
use crate::executable::{FuncInfo, FuncKind};

/// Encodes the table, interning names.
pub fn encode<'a>(funcs: &'a [FuncInfo], strings: &mut StringTable<'a>) -> Vec<u8> {
    let mut out = Vec::new();
    varint::put(&mut out, funcs.len() as u64);
    for f in funcs {
        let name = strings.intern(&f.name);
        match f.kind {
            FuncKind::Packed => varint::put(&mut out, name << 1),
            FuncKind::Bytecode => {
                varint::put(&mut out, name << 1 | 1);
                varint::put(&mut out, f.start_instr.into());
                varint::put(&mut out, f.end_instr.saturating_sub(f.start_instr).into());
                varint::put(&mut out, f.num_args.into());
                varint::put(&mut out, f.register_file_size.into());
            }
        }
    }
    out
}

/// Decodes the table (parameter names are filled in later from their own section).
pub fn decode(mut c: Cursor<'_>, strings: &Strings<'_>, budget: &mut Budget) -> Result<Vec<FuncInfo>> {
    let n = c.count("function", 1)?;
    if u32::try_from(n).is_err() {
        return Err(c.err_at(0, format!("{n} functions: function indices must fit in 32 bits")));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.pos();
        let tagged = c.varint()?;
        let name_idx = usize::try_from(tagged >> 1).ok().filter(|i| *i < strings.len()).ok_or_else(|| {
            c.err_at(at, format!("string index {} out of range (there are {})", tagged >> 1, strings.len()))
        })?;
        let name = strings.get(name_idx);
        budget.charge(name.len() as u64 + 24, &c, at)?;
        let mut f = FuncInfo::packed(name);
        if tagged & 1 == 1 {
            let start_at = c.pos();
            f.kind = FuncKind::Bytecode;
            f.start_instr = c.u32("start instruction")?;
            let len = c.u32("instruction count")?;
            f.end_instr =
                f.start_instr.checked_add(len).ok_or_else(|| c.err_at(start_at, "instruction range ends past 2^32"))?;
            f.num_args = c.u32("argument count")?;
            f.register_file_size = c.u32("register count")?;
        }
        out.push(f);
    }
    c.finish()?;
    Ok(out)
}
