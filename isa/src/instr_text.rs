//! One instruction as text (`call  vm.op.add  in: %0, %1  dst: %2`), usable before an
//! executable exists (the verifier and the builder print instructions of programs still being
//! checked).

use crate::bytecode::{Arg, Instruction, Opcode};
use crate::names::write_name;
use std::fmt::Write;

/// One instruction, with function names looked up by `name_of` (unknown indices print as `#N`):
/// usable before an executable exists.
pub fn instr_to_text_with<'a>(instr: &Instruction, name_of: impl Fn(u32) -> Option<&'a str>) -> String {
    let mut out = String::new();
    let func = |out: &mut String, i: u32| match name_of(i) {
        Some(n) => write_name(out, n),
        None => write!(out, "#{i}").unwrap(),
    };
    match instr {
        Instruction::Call { func: callee, args, dst } => {
            out.push_str(Opcode::Call.mnemonic());
            out.push_str("  ");
            func(&mut out, *callee);
            for (i, a) in args.iter().enumerate() {
                out.push_str(if i == 0 { "  in: " } else { ", " });
                match a {
                    Arg::Reg(r) => write!(out, "%{r}").unwrap(),
                    Arg::Void => out.push_str("%void"),
                    Arg::VmState => out.push_str("%vm"),
                    Arg::Imm(v) => write!(out, "i{v}").unwrap(),
                    Arg::Const(c) => write!(out, "c[{c}]").unwrap(),
                    Arg::Func(f) => {
                        out.push_str("f[");
                        func(&mut out, *f);
                        out.push(']');
                    }
                }
            }
            match dst {
                Some(d) => write!(out, "  dst: %{d}").unwrap(),
                None => out.push_str("  dst: void"),
            }
        }
        Instruction::Ret { result } => write!(out, "{}  %{result}", Opcode::Ret.mnemonic()).unwrap(),
        Instruction::Goto { offset } => write!(out, "{}  {offset}", Opcode::Goto.mnemonic()).unwrap(),
        Instruction::If { cond, false_offset } => {
            write!(out, "{}  %{cond}  {false_offset}", Opcode::If.mnemonic()).unwrap()
        }
    }
    out
}
