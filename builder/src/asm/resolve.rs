//! Names to indices, and the checks the VM's verifier would make, reported at source positions.

use super::cursor::Pos;
use super::parser::{Arg, Body, Op, Program};
use super::AsmError;
use relaxvm::verify::MAX_REGISTERS;
use relaxvm::{Executable, ExecutableParts, FuncInfo, FuncKind, Instruction};
use std::collections::HashMap;

/// Builds the executable: resolves function names, infers omitted `regs=`, and checks indices,
/// registers, arities and jumps so that the VM's verifier has nothing left to reject.
pub(super) fn resolve(program: Program) -> Result<Executable, AsmError> {
    let index: HashMap<&str, u32> =
        program.entries.iter().enumerate().map(|(i, e)| (e.name.as_str(), i as u32)).collect();
    let arity: Vec<Option<u32>> = program.entries.iter().map(|e| e.body.as_ref().map(|b| b.num_inputs.0)).collect();
    let lookup = |name: &str, pos: Pos| {
        index.get(name).copied().ok_or_else(|| {
            pos.error(format!(
                "unknown function {name:?}: declare it with `.packed {}` or define it with `@{} inputs=N:`",
                plain(name),
                plain(name)
            ))
        })
    };
    let mut parts = ExecutableParts { constants: Vec::new(), ..Default::default() };
    let num_constants = program.constants.len();
    for entry in &program.entries {
        let Some(body) = &entry.body else {
            parts.funcs.push(FuncInfo::packed(entry.name.clone()));
            continue;
        };
        if body.instrs.is_empty() {
            return Err(entry.pos.error(format!("function {:?} has no instructions (it must end in ret)", entry.name)));
        }
        let regs = register_file_size(body)?;
        let start = parts.instrs.len();
        let n = body.instrs.len();
        for (pc, instr) in body.instrs.iter().enumerate() {
            let reg = |index: u32, pos: Pos| {
                if index < regs {
                    Ok(index)
                } else {
                    Err(pos.error(format!("register %{index} is outside the register file of {regs} (regs={regs})")))
                }
            };
            let jump = |offset: i64| {
                let target = pc as i128 + i128::from(offset);
                if (0..n as i128).contains(&target) {
                    Ok(())
                } else {
                    Err(instr.pos.error(format!(
                        "jump by {offset} to instruction {target} leaves the function, which has {n} instruction(s)"
                    )))
                }
            };
            let falls_off = || {
                instr.pos.error("control runs off the end of the function (the last instruction must be ret or goto)")
            };
            let resolved = match &instr.op {
                Op::Call { func: (name, pos), args, dst } => {
                    let func = lookup(name, *pos)?;
                    if let Some(expected) = arity[func as usize] {
                        if args.len() != expected as usize {
                            return Err(instr.pos.error(format!(
                                "calls {name:?} with {} argument(s), but it takes {expected}",
                                args.len()
                            )));
                        }
                    }
                    let mut out = Vec::with_capacity(args.len());
                    for (a, pos) in args {
                        out.push(match a {
                            Arg::Reg(r) => relaxvm::Arg::Reg(reg(*r, *pos)?),
                            Arg::Void => relaxvm::Arg::Void,
                            Arg::VmState => relaxvm::Arg::VmState,
                            Arg::Imm(i) => relaxvm::Arg::Imm(*i),
                            Arg::Const(c) if (*c as usize) < num_constants => relaxvm::Arg::Const(*c),
                            Arg::Const(c) => {
                                return Err(pos.error(format!("constant c[{c}] is outside the pool of {num_constants}")))
                            }
                            Arg::Func(name) => relaxvm::Arg::Func(lookup(name, *pos)?),
                        });
                    }
                    let dst = dst.map(|d| reg(d.index, d.pos)).transpose()?;
                    if pc + 1 == n {
                        return Err(falls_off());
                    }
                    Instruction::Call { func, args: out, dst }
                }
                Op::Ret { result } => Instruction::Ret { result: reg(result.index, result.pos)? },
                Op::Goto { offset } => {
                    jump(*offset)?;
                    Instruction::Goto { offset: *offset }
                }
                Op::If { cond, false_offset } => {
                    let cond = reg(cond.index, cond.pos)?;
                    if pc + 1 == n {
                        return Err(falls_off());
                    }
                    jump(*false_offset)?;
                    Instruction::If { cond, false_offset: *false_offset }
                }
            };
            parts.instrs.push(resolved);
            parts.locations.push(instr.loc.clone());
        }
        let index = |n: usize| u32::try_from(n).map_err(|_| entry.pos.error("more than 2^32 instructions"));
        parts.funcs.push(FuncInfo {
            name: entry.name.clone(),
            kind: FuncKind::Bytecode,
            start_instr: index(start)?,
            end_instr: index(parts.instrs.len())?,
            num_args: body.num_inputs.0,
            register_file_size: regs,
            param_names: body.params.clone(),
            signature: body.sig.as_ref().map(|(s, _)| s.clone()),
        });
    }
    if let Some((name, pos)) = program.entry {
        match index.get(name.as_str()) {
            Some(&i) if arity[i as usize].is_some() => {}
            Some(_) => return Err(pos.error(format!("the entry function {name:?} is a packed function"))),
            None => {
                return Err(pos.error(format!(
                    "the entry function {name:?} is not defined: define it with `@{} inputs=N:`",
                    plain(&name)
                )))
            }
        }
        parts.entry = Some(name);
    }
    parts.constants = program.constants;
    Executable::from_parts(parts).map_err(|e| AsmError { line: 0, col: 0, message: e.to_string() })
}

/// The header's `regs=`, or when omitted the smallest register file that holds the inputs and
/// every register used; checked against the inputs and the VM's limit.
fn register_file_size(body: &Body) -> Result<u32, AsmError> {
    let (num_inputs, inputs_pos) = body.num_inputs;
    if num_inputs > MAX_REGISTERS {
        return Err(inputs_pos.error(format!("inputs={num_inputs} exceeds the limit of {MAX_REGISTERS} registers")));
    }
    if let Some((sig, pos)) = &body.sig {
        if sig.params.len() != num_inputs as usize {
            return Err(inputs_pos.error(format!("sig= has {} parameter(s) for inputs={num_inputs}", sig.params.len())));
        }
        relaxvm::verify::verify_signature(sig).map_err(|e| pos.error(format!("sig=: {e}")))?;
    }
    if !body.params.is_empty() && body.params.len() != num_inputs as usize {
        return Err(inputs_pos.error(format!("{} parameter name(s) for inputs={num_inputs}", body.params.len())));
    }
    let Some((regs, pos)) = body.regs else {
        let used = body.instrs.iter().flat_map(|i| registers(&i.op)).map(|r| u64::from(r) + 1).max().unwrap_or(0);
        let needed = used.max(u64::from(num_inputs));
        return u32::try_from(needed).ok().filter(|n| *n <= MAX_REGISTERS).ok_or_else(|| {
            inputs_pos.error(format!("the function uses {needed} registers, more than the limit of {MAX_REGISTERS}"))
        });
    };
    if regs > MAX_REGISTERS {
        return Err(pos.error(format!("regs={regs} exceeds the limit of {MAX_REGISTERS}")));
    }
    if regs < num_inputs {
        return Err(pos.error(format!("regs={regs} cannot hold inputs={num_inputs}")));
    }
    Ok(regs)
}

fn registers(op: &Op) -> Vec<u32> {
    match op {
        Op::Call { args, dst, .. } => args
            .iter()
            .filter_map(|(a, _)| if let Arg::Reg(r) = a { Some(*r) } else { None })
            .chain(dst.map(|d| d.index))
            .collect(),
        Op::Ret { result } => vec![result.index],
        Op::Goto { .. } => vec![],
        Op::If { cond, .. } => vec![cond.index],
    }
}

/// `name` as the text form writes it.
fn plain(name: &str) -> String {
    let mut out = String::new();
    relaxvm::text::write_name(&mut out, name);
    out
}
