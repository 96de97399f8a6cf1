//! `as_python()`: Python source that rebuilds the executable through the `relaxvm` package.

use crate::bytecode::{Arg, Instruction};
use crate::executable::{Executable, FuncKind};
use crate::location::Location;
use crate::value::Value;
use std::fmt::Write;

/// `s` as a Python string literal that Python's parser reads back as exactly `s`. Escaped:
/// the quote and backslash, and every character a Python source file cannot hold raw inside a
/// one-line literal or that would hide in a listing — control characters (category Cc, all below
/// U+00A0) and the line and paragraph separators. Everything else is written as itself.
pub fn py_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => write!(out, "\\x{:02x}", c as u32).expect("writing to a String"),
            '\u{2028}' | '\u{2029}' => write!(out, "\\u{:04x}", c as u32).expect("writing to a String"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn py_constant(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Int(i) => format!("{i}"),
        Value::Float(x) if x.is_finite() => format!("{x:?}"),
        Value::Float(x) => format!("float({:?})", x.to_string()),
        Value::Bool(b) => (if *b { "True" } else { "False" }).into(),
        Value::Str(s) => py_str(s),
        Value::Shape(s) => format!("rx.Shape({:?})", s.dims()),
        Value::DType(d) => format!("rx.DataType({:?})", d.name()),
        Value::Device(d) => format!("rx.cpu({})", d.device_id),
        Value::Tensor(t) => {
            let hex: String = match t.contiguous_bytes() {
                Ok(bytes) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
                Err(e) => return format!("None  # {e}"),
            };
            format!("rx.tensor_from_bytes(bytes.fromhex({hex:?}), {:?}, {:?})", t.shape().dims(), t.dtype().name())
        }
        // A tuple constant (TVM's Array) is a Python tuple, which convert_constant turns back.
        Value::Tuple(items) => {
            let inner: Vec<String> = items.iter().map(py_constant).collect();
            format!("({}{})", inner.join(", "), if items.len() == 1 { "," } else { "" })
        }
        other => format!("None  # unsupported constant {}", other.type_name()),
    }
}

fn py_location(loc: &Location) -> String {
    match loc {
        Location::File { file, line, col } => format!("rx.Location.file({}, {line}, {col})", py_str(file)),
        Location::Name(n) => format!("rx.Location.name({})", py_str(n)),
        Location::CallSite { callee, caller } => {
            format!("rx.Location.callsite({}, {})", py_location(callee), py_location(caller))
        }
        Location::Fused(ls) => {
            format!("rx.Location.fused([{}])", ls.iter().map(py_location).collect::<Vec<_>>().join(", "))
        }
    }
}

fn py_arg(exe: &Executable, a: &Arg) -> String {
    match a {
        Arg::Reg(r) => format!("ib.r({r})"),
        Arg::Void => "ib.void_arg()".into(),
        Arg::VmState => "ib.vm_state()".into(),
        Arg::Imm(i) => format!("ib.imm({i})"),
        Arg::Const(c) => format!("ib.c({c})"),
        Arg::Func(f) => format!("ib.f({})", py_str(&exe.funcs()[*f as usize].name)),
    }
}

fn py_instr(exe: &Executable, instr: &Instruction, loc: Option<&Location>) -> String {
    let loc = loc.map(|l| format!(", loc={}", py_location(l))).unwrap_or_default();
    match instr {
        Instruction::Call { func, args, dst } => {
            let args: Vec<String> = args.iter().map(|a| py_arg(exe, a)).collect();
            let dst = dst.map(|d| format!(", dst=ib.r({d})")).unwrap_or_default();
            format!("ib.emit_call({}, args=[{}]{dst}{loc})", py_str(&exe.funcs()[*func as usize].name), args.join(", "))
        }
        Instruction::Ret { result } => format!("ib.emit_ret(ib.r({result}){loc})"),
        Instruction::Goto { offset } => format!("ib.emit_goto({offset}{loc})"),
        Instruction::If { cond, false_offset } => format!("ib.emit_if(ib.r({cond}), {false_offset}{loc})"),
    }
}

/// The executable as Python source using `relaxvm` (`import relaxvm as rx`).
pub fn to_python(exe: &Executable) -> String {
    let mut out = String::from("import relaxvm as rx\n\nib = rx.ExecBuilder()\n");
    for c in exe.constants() {
        writeln!(out, "ib.convert_constant({})", py_constant(c)).unwrap();
    }
    for f in exe.funcs() {
        writeln!(out, "ib.declare_function({}, kind={:?})", py_str(&f.name), f.kind.name()).unwrap();
    }
    for f in exe.funcs().iter().filter(|f| f.kind == FuncKind::Bytecode) {
        let params = if let Some(sig) = &f.signature {
            format!(", signature={}", py_str(&sig.to_string()))
        } else if f.param_names.is_empty() {
            String::new()
        } else {
            format!(", param_names=[{}]", f.param_names.iter().map(|p| py_str(p)).collect::<Vec<_>>().join(", "))
        };
        writeln!(out, "with ib.function({}, num_inputs={}{params}):", py_str(&f.name), f.num_args).unwrap();
        for pc in f.instr_range() {
            writeln!(out, "    {}", py_instr(exe, &exe.instrs()[pc], exe.location(pc))).unwrap();
        }
    }
    if let Some(entry) = exe.declared_entry() {
        writeln!(out, "ib.set_entry({})", py_str(entry)).unwrap();
    }
    out.push_str("ex = ib.get()\n");
    out
}

impl Executable {
    /// Python source that rebuilds this executable (see [`to_python`]).
    pub fn as_python(&self) -> String {
        to_python(self)
    }

    /// [`as_python`](Self::as_python), or an allocation error when the source (hex of every
    /// tensor constant, built twice over while it is assembled) does not fit in memory.
    pub fn try_as_python(&self) -> crate::error::Result<String> {
        let tensor_bytes: usize = self
            .constants()
            .iter()
            .filter_map(|c| c.as_tensor().ok())
            .fold(0usize, |acc, t| acc.saturating_add(t.nbytes().saturating_mul(4)));
        // A failed `String` growth would abort: make sure the room exists before building.
        let mut probe = String::new();
        probe
            .try_reserve(tensor_bytes.saturating_add(4096))
            .map_err(|_| crate::error::Error::alloc(tensor_bytes as u128, "out of memory for the Python source"))?;
        drop(probe);
        Ok(to_python(self))
    }
}

#[cfg(test)]
mod tests {
    use super::py_str;

    /// Reads a literal that `py_str` wrote, by Python's rules for the escapes it uses.
    fn read_back(lit: &str) -> String {
        let body = lit.strip_prefix('"').and_then(|l| l.strip_suffix('"')).expect("quoted");
        let mut out = String::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                assert!(c != '"', "an unescaped quote in {lit:?}");
                out.push(c);
                continue;
            }
            let hex = |n: usize, chars: &mut std::str::Chars<'_>| {
                let digits: String = chars.take(n).collect();
                char::from_u32(u32::from_str_radix(&digits, 16).unwrap()).unwrap()
            };
            match chars.next().unwrap() {
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'x' => out.push(hex(2, &mut chars)),
                'u' => out.push(hex(4, &mut chars)),
                e @ ('"' | '\\') => out.push(e),
                e => panic!("unknown escape \\{e}"),
            }
        }
        out
    }

    #[test]
    fn every_char_is_a_python_literal_that_reads_back() {
        for c in (0..=char::MAX as u32).filter_map(char::from_u32) {
            let s = format!("a{c}b");
            let lit = py_str(&s);
            // Nothing Python's tokenizer would stop at, or that hides in a listing, is raw.
            assert!(
                !lit.chars().any(|x| x.is_control() || x == '\u{2028}' || x == '\u{2029}'),
                "U+{:04X}: {lit:?}",
                c as u32
            );
            assert_eq!(read_back(&lit), s, "U+{:04X}", c as u32);
        }
        assert_eq!(py_str("a\u{1}\"\\\u{7f}é"), r#""a\x01\"\\\x7fé""#);
    }
}
