//! `as_python()`: Python source that rebuilds the executable through the `relaxvm` package.

use crate::bytecode::{Arg, Instruction};
use crate::executable::{Executable, FuncKind};
use crate::location::{write_quoted, Location};
use crate::value::Value;
use std::fmt::Write;

fn py_str(s: &str) -> String {
    let mut out = String::new();
    write_quoted(&mut out, s).expect("writing to a String");
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
            let hex: String = t.contiguous_bytes().iter().map(|b| format!("{b:02x}")).collect();
            format!("rx.tensor_from_bytes(bytes.fromhex({hex:?}), {:?}, {:?})", t.shape().dims(), t.dtype().name())
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
}
