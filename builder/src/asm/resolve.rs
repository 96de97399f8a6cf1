//! Names to indices, then the VM's verifier, with its errors reported at source positions.

use super::parser::{Body, Instr, Program};
use super::AsmError;
use relaxvm::verify::{verify_function, Depth, FunctionCode, VerifyError, VerifyErrorKind, MAX_REGISTERS};
use relaxvm::{Executable, ExecutableParts, FuncInfo, FuncKind};
use std::collections::HashMap;

/// Builds the executable: resolves function names, infers omitted `regs=`, and runs the VM's
/// verifier on each function, so that an error points at the line and column of the operand at
/// fault (the verifier names the operand; only the assembler knows where it is written).
pub(super) fn resolve(program: Program) -> Result<Executable, AsmError> {
    let mut index: HashMap<String, u32> =
        program.entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i as u32)).collect();
    let mut parts = ExecutableParts { constants: program.constants, ..Default::default() };
    // Names neither declared nor defined that the global registry holds (the builtins, once
    // registered, and the embedder's functions) are packed functions, appended to the table in
    // order of first use, as `ExecBuilder` would have numbered them.
    let mut implicit: Vec<String> = Vec::new();
    {
        let registry = relaxvm::registry::global();
        for body in program.entries.iter().filter_map(|e| e.body.as_ref()) {
            for instr in &body.instrs {
                let _ = instr.op.try_map_funcs(|_, name| {
                    if !index.contains_key(name.as_str()) && registry.contains(name) {
                        index.insert(name.clone(), (program.entries.len() + implicit.len()) as u32);
                        implicit.push(name.clone());
                    }
                    Ok::<u32, ()>(0)
                });
            }
        }
    }
    // The instructions of each bytecode function, as the source wrote them.
    let mut sources: Vec<(usize, &[Instr])> = Vec::new();
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
        for instr in &body.instrs {
            let resolved = instr.op.try_map_funcs(|slot, name| {
                index.get(name.as_str()).copied().ok_or_else(|| {
                    instr.at(Some(slot)).error(format!(
                        "unknown function {name:?}: declare it with `.packed {}`, define it with `@{} inputs=N:`, or register it before assembling",
                        plain(name),
                        plain(name)
                    ))
                })
            })?;
            parts.instrs.push(resolved);
            parts.locations.push(instr.loc.clone());
        }
        let index = |n: usize| u32::try_from(n).map_err(|_| entry.pos.error("more than 2^32 instructions"));
        sources.push((parts.funcs.len(), &body.instrs));
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
    parts.funcs.extend(implicit.into_iter().map(FuncInfo::packed));
    for (i, instrs) in sources {
        let f = &parts.funcs[i];
        let code = FunctionCode {
            name: &f.name,
            num_inputs: f.num_args,
            registers: Some(f.register_file_size),
            instrs: &parts.instrs[f.instr_range()],
            locations: &[],
        };
        verify_function(&parts.tables(), code, Depth::Structure).map_err(|e| at_source(e, instrs))?;
    }
    if let Some((name, pos)) = program.entry {
        match index.get(name.as_str()) {
            Some(&i) if parts.funcs[i as usize].kind == FuncKind::Bytecode => {}
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
    Executable::from_parts(parts).map_err(|e| AsmError { line: 0, col: 0, message: e.to_string() })
}

/// The verifier's error `e` at the position of the operand it names, in the assembler's words
/// (`regs=` is the header's name for the register-file size).
fn at_source(e: VerifyError, instrs: &[Instr]) -> AsmError {
    let Some(instr) = e.pc.and_then(|pc| instrs.get(pc)) else {
        return AsmError { line: 0, col: 0, message: e.to_string() };
    };
    let mut message = e.kind.to_string();
    if let VerifyErrorKind::RegisterOutside { size, .. } = e.kind {
        message.push_str(&format!(" (regs={size})"));
    }
    instr.at(e.slot).error(message)
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
        let used = body
            .instrs
            .iter()
            .flat_map(|i| i.op.reads().into_iter().chain(i.op.writes()))
            .map(|r| u64::from(r) + 1)
            .max()
            .unwrap_or(0);
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

/// `name` as the text form writes it.
fn plain(name: &str) -> String {
    let mut out = String::new();
    relaxvm::text::write_name(&mut out, name);
    out
}
