//! The text form of an executable (`as_text()`), which the assembler parses back.
//!
//! ```text
//! .entry main
//! .const c[0] = shape (32, 16)
//! .packed vm.builtin.alloc_shape_heap
//!
//! @main inputs=2 regs=4 sig=(a: tensor<[n, 16], f32>, b: f32) -> tensor<*, f32>:
//!   call  vm.op.add  in: %0, %1  dst: %2  loc("model.py":3:1)
//!   if  %2  2
//!   goto  -1
//!   ret  %2
//!
//! @helper inputs=1 regs=1 params=(x):
//!   ret  %0
//! ```
//!
//! A function with a signature prints it as `sig=`, which also names the parameters; one
//! without prints its parameter names, if any, as `params=`.
//!
//! The grammar is documented in `docs/text-format.md`.

use crate::bytecode::Instruction;
use crate::executable::{Executable, FuncKind};
use crate::location::write_quoted;
use crate::value::Value;
use std::fmt::Write;

pub use crate::instr_text::instr_to_text_with;
pub use crate::names::{is_plain_name, write_name};

/// The text of a constant: `int 5`, `shape (32, 16)`, `tensor float16 (2,) [1.5, 2.0]` (a small
/// tensor whose values read back exactly), `tensor float32 (100,) hex:0000803f...`,
/// `tuple (int 1, str "a")`.
pub fn constant_to_text(v: &Value) -> String {
    let mut out = String::new();
    write_constant(&mut out, v);
    out
}

/// Appends the text of a constant to `out` (tensor bytes as hex, straight into `out`).
fn write_constant(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Int(i) => write!(out, "int {i}").unwrap(),
        Value::Float(x) => write!(out, "float {x:?}").unwrap(),
        Value::Bool(b) => write!(out, "bool {b}").unwrap(),
        Value::Str(s) => {
            out.push_str("str ");
            write_quoted(out, s).unwrap();
        }
        Value::Shape(s) => write!(out, "shape {s}").unwrap(),
        Value::DType(d) => write!(out, "dtype {d}").unwrap(),
        Value::Device(d) => write!(out, "device {d}").unwrap(),
        Value::Tensor(t) => {
            if let Some(values) = crate::tensor_text::values_text(t) {
                write!(out, "tensor {} {} {values}", t.dtype(), t.shape()).unwrap();
                return;
            }
            write!(out, "tensor {} {} hex:", t.dtype(), t.shape()).unwrap();
            const HEX: &[u8; 16] = b"0123456789abcdef";
            match t.contiguous_bytes() {
                Ok(bytes) => out.extend(
                    bytes.iter().flat_map(|b| [HEX[(b >> 4) as usize] as char, HEX[(b & 15) as usize] as char]),
                ),
                Err(e) => write!(out, "<{e}>").unwrap(),
            }
        }
        Value::Tuple(items) => {
            out.push_str("tuple (");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_constant(out, item);
            }
            out.push(')');
        }
        other => write!(out, "<{}>", other.type_name()).unwrap(),
    }
}

/// A short form for `stats()`: tensors by dtype and shape only.
pub fn constant_summary(v: &Value) -> String {
    match v {
        Value::Tensor(t) => format!("tensor {} {}", t.dtype(), t.shape()),
        other => constant_to_text(other),
    }
}

/// One instruction: `call  vm.op.add  in: %0, %1  dst: %2`, `ret  %2`, `if  %0  3`, `goto  -2`.
pub fn instr_to_text(exe: &Executable, instr: &Instruction) -> String {
    instr_to_text_with(instr, |i| exe.funcs().get(i as usize).map(|f| f.name.as_str()))
}

/// The whole executable as text; an allocation error when the text (two hex digits per byte of
/// tensor data) does not fit in memory.
pub fn try_to_text(exe: &Executable) -> crate::error::Result<String> {
    // Reserve the bulk up front, fallibly: the hex of a large constant is the one part whose
    // growth could fail, and a failed `String` growth aborts the process.
    let tensor_bytes: usize = exe
        .constants()
        .iter()
        .filter_map(|c| c.as_tensor().ok())
        .fold(0usize, |acc, t| acc.saturating_add(t.nbytes().saturating_mul(2)));
    let estimate = tensor_bytes.saturating_add(exe.instrs().len() * 64).saturating_add(4096);
    let mut out = String::new();
    out.try_reserve(estimate)
        .map_err(|_| crate::error::Error::alloc(estimate as u128, "out of memory for the text form"))?;
    write_text(exe, &mut out);
    Ok(out)
}

/// The whole executable as text (see [`try_to_text`] for the fallible form).
pub fn to_text(exe: &Executable) -> String {
    let mut out = String::new();
    write_text(exe, &mut out);
    out
}

fn write_text(exe: &Executable, out: &mut String) {
    if let Some(entry) = exe.declared_entry() {
        out.push_str(".entry ");
        write_name(out, entry);
        out.push('\n');
    }
    for (i, c) in exe.constants().iter().enumerate() {
        write!(out, ".const c[{i}] = ").unwrap();
        write_constant(out, c);
        out.push('\n');
    }
    for f in exe.funcs() {
        match f.kind {
            FuncKind::Packed => {
                out.push_str(".packed ");
                write_name(out, &f.name);
                out.push('\n');
            }
            FuncKind::Bytecode => {
                // A blank line separates a function from what comes before it, if anything does.
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push('@');
                write_name(out, &f.name);
                write!(out, " inputs={} regs={}", f.num_args, f.register_file_size).unwrap();
                if let Some(sig) = &f.signature {
                    // The signature names the parameters: no params= needed.
                    write!(out, " sig={sig}").unwrap();
                } else if !f.param_names.is_empty() {
                    out.push_str(" params=(");
                    for (i, p) in f.param_names.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        write_name(out, p);
                    }
                    out.push(')');
                }
                out.push_str(":\n");
                for pc in f.instr_range() {
                    out.push_str("  ");
                    out.push_str(&instr_to_text(exe, &exe.instrs()[pc]));
                    if let Some(loc) = exe.location(pc) {
                        write!(out, "  loc({loc})").unwrap();
                    }
                    out.push('\n');
                }
            }
        }
    }
}

impl Executable {
    /// A summary like the design document's.
    pub fn stats(&self) -> String {
        let consts: Vec<String> = self.constants().iter().map(constant_summary).collect();
        let libs: Vec<&str> = self.libraries().iter().map(|l| l.reference.path.as_str()).collect();
        let libs = if libs.is_empty() {
            String::new()
        } else {
            format!("  Native libraries (#{}): [{}]\n", libs.len(), libs.join(", "))
        };
        format!(
            "Relax VM executable statistics:\n  Constant pool (# {}): [{}]\n  Globals (#{}): [{}]\n  Packed functions (#{}): [{}]\n  Instructions (#{})\n",
            consts.len(),
            consts.join(", "),
            self.bytecode_function_names().len(),
            self.bytecode_function_names().join(", "),
            self.packed_function_names().len(),
            self.packed_function_names().join(", "),
            self.instrs().len(),
        ) + &libs
    }

    /// The instruction at `pc` of function `func`, as text, for error messages.
    pub fn instr_text(&self, index: usize) -> String {
        self.instrs().get(index).map(|i| instr_to_text(self, i)).unwrap_or_default()
    }

    /// The text form (see the module documentation).
    pub fn as_text(&self) -> String {
        to_text(self)
    }

    /// The text form, or an allocation error when it does not fit in memory.
    pub fn try_as_text(&self) -> crate::error::Result<String> {
        try_to_text(self)
    }
}
