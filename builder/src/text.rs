//! Instructions as text before an executable exists (for check errors), in exactly the form
//! `relaxvm::text::instr_to_text` prints them.

use relaxvm::text::write_name;
use relaxvm::{Arg, Instruction};
use std::fmt::Write;

/// Prints `instr`, looking function names up with `name_of` (unknown indices print as `#N`).
pub(crate) fn instr_text<'a>(instr: &Instruction, name_of: &dyn Fn(u32) -> Option<&'a str>) -> String {
    let mut out = String::new();
    let func = |out: &mut String, i: u32| match name_of(i) {
        Some(n) => write_name(out, n),
        None => write!(out, "#{i}").expect("writing to a String"),
    };
    match instr {
        Instruction::Call { func: callee, args, dst } => {
            out.push_str("call  ");
            func(&mut out, *callee);
            for (i, a) in args.iter().enumerate() {
                out.push_str(if i == 0 { "  in: " } else { ", " });
                match a {
                    Arg::Reg(r) => write!(out, "%{r}").expect("writing to a String"),
                    Arg::Void => out.push_str("%void"),
                    Arg::VmState => out.push_str("%vm"),
                    Arg::Imm(v) => write!(out, "i{v}").expect("writing to a String"),
                    Arg::Const(c) => write!(out, "c[{c}]").expect("writing to a String"),
                    Arg::Func(f) => {
                        out.push_str("f[");
                        func(&mut out, *f);
                        out.push(']');
                    }
                }
            }
            match dst {
                Some(d) => write!(out, "  dst: %{d}").expect("writing to a String"),
                None => out.push_str("  dst: void"),
            }
        }
        Instruction::Ret { result } => write!(out, "ret  %{result}").expect("writing to a String"),
        Instruction::Goto { offset } => write!(out, "goto  {offset}").expect("writing to a String"),
        Instruction::If { cond, false_offset } => {
            write!(out, "if  %{cond}  {false_offset}").expect("writing to a String")
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{Executable, ExecutableParts, FuncInfo, FuncKind, Value};

    #[test]
    fn matches_the_vm_printer() {
        let instrs = vec![
            Instruction::Call {
                func: 1,
                args: vec![Arg::Reg(0), Arg::Void, Arg::VmState, Arg::Imm(-3), Arg::Const(0), Arg::Func(2)],
                dst: Some(1),
            },
            Instruction::Call { func: 2, args: vec![], dst: None },
            Instruction::If { cond: 1, false_offset: 2 },
            Instruction::Goto { offset: -1 },
            Instruction::Ret { result: 1 },
        ];
        let main = FuncInfo {
            name: "main".into(),
            kind: FuncKind::Bytecode,
            start_instr: 0,
            end_instr: 5,
            num_args: 1,
            register_file_size: 2,
            param_names: vec![],
        };
        let exe = Executable::from_parts(ExecutableParts {
            funcs: vec![main, FuncInfo::packed("vm.op.add"), FuncInfo::packed("odd name")],
            constants: vec![Value::Int(1)],
            instrs: instrs.clone(),
            locations: vec![],
        })
        .unwrap();
        let names = |i: u32| exe.funcs().get(i as usize).map(|f| f.name.as_str());
        for (pc, instr) in instrs.iter().enumerate() {
            assert_eq!(instr_text(instr, &names), exe.instr_text(pc));
        }
        assert_eq!(instr_text(&Instruction::Call { func: 9, args: vec![], dst: None }, &names), "call  #9  dst: void");
    }
}
