//! The structural verifier every executable passes before a VM may run it.
//!
//! It proves what the interpreter relies on: every register index is inside its frame, every
//! jump and fall-through stays inside its function, every constant and function index is in
//! range, and calls to bytecode functions pass the declared number of arguments. A crafted file
//! can therefore fail to load but never make the interpreter index out of bounds. It also checks
//! signatures (one parameter per input, named as the parameters, well-formed types) and that the
//! entry function, when set, is a bytecode function.

use crate::bytecode::{Arg, Instruction};
use crate::error::{Error, Result};
use crate::executable::{ExecutableParts, FuncInfo, FuncKind};
use crate::text::is_plain_name;
use crate::types::{Dim, Signature, Type, MAX_TYPE_DEPTH};
use std::collections::HashSet;

/// The largest register file a function may declare (bounds the memory a frame can take).
pub const MAX_REGISTERS: u32 = 1 << 20;

/// Checks `parts`; the error names the function and instruction at fault.
pub fn verify(parts: &ExecutableParts) -> Result<()> {
    let mut names = HashSet::new();
    for f in &parts.funcs {
        if f.name.is_empty() {
            return Err(Error::invalid("a function-table entry has an empty name"));
        }
        if !names.insert(f.name.as_str()) {
            return Err(Error::invalid(format!("function {:?} appears twice in the function table", f.name)));
        }
    }
    if !parts.locations.is_empty() && parts.locations.len() != parts.instrs.len() {
        return Err(Error::invalid(format!(
            "{} locations for {} instructions",
            parts.locations.len(),
            parts.instrs.len()
        )));
    }
    if let Some(entry) = &parts.entry {
        match parts.funcs.iter().find(|f| f.name == *entry) {
            Some(f) if f.kind == FuncKind::Bytecode => {}
            Some(_) => return Err(Error::invalid(format!("the entry function {entry:?} is a packed function"))),
            None => return Err(Error::invalid(format!("the entry function {entry:?} is not in the function table"))),
        }
    }
    if let Some(f) = parts.funcs.iter().find(|f| f.signature.is_some() && f.kind == FuncKind::Packed) {
        return Err(Error::invalid(format!(
            "packed function {:?} has a signature (only bytecode functions may)",
            f.name
        )));
    }
    let mut ranges: Vec<(usize, usize, &str)> = Vec::new();
    for f in parts.funcs.iter().filter(|f| f.kind == FuncKind::Bytecode) {
        verify_header(f, parts.instrs.len())?;
        ranges.push((f.start_instr as usize, f.end_instr as usize, &f.name));
        for pc in f.instr_range() {
            verify_instr(parts, f, pc).map_err(|e| {
                Error::invalid(format!("function {:?}, instruction {}: {}", f.name, pc - f.start_instr as usize, e))
            })?;
        }
    }
    ranges.sort();
    for w in ranges.windows(2) {
        if w[0].1 > w[1].0 {
            return Err(Error::invalid(format!("functions {:?} and {:?} share instructions", w[0].2, w[1].2)));
        }
    }
    Ok(())
}

fn verify_header(f: &FuncInfo, n_instrs: usize) -> Result<()> {
    let bad = |msg: String| Err(Error::invalid(format!("function {:?}: {msg}", f.name)));
    if f.start_instr >= f.end_instr || f.end_instr as usize > n_instrs {
        return bad(format!(
            "instruction range {}..{} is empty or outside the {} instructions",
            f.start_instr, f.end_instr, n_instrs
        ));
    }
    if f.register_file_size > MAX_REGISTERS {
        return bad(format!("{} registers exceed the limit of {MAX_REGISTERS}", f.register_file_size));
    }
    if f.num_args > f.register_file_size {
        return bad(format!("{} inputs do not fit in {} registers", f.num_args, f.register_file_size));
    }
    if let Some(sig) = &f.signature {
        if sig.params.len() != f.num_args as usize {
            return bad(format!("the signature has {} parameter(s) for {} inputs", sig.params.len(), f.num_args));
        }
        if !f.param_names.iter().map(String::as_str).eq(sig.param_names()) {
            return bad(format!(
                "parameter names ({}) differ from the signature's ({})",
                f.param_names.join(", "),
                sig.param_names().collect::<Vec<_>>().join(", ")
            ));
        }
        verify_signature(sig).or_else(|e| bad(format!("signature: {e}")))?;
    }
    if !f.param_names.is_empty() && f.param_names.len() != f.num_args as usize {
        return bad(format!("{} parameter names for {} inputs", f.param_names.len(), f.num_args));
    }
    Ok(())
}

/// Checks that a signature is well formed: parameter names distinct and not empty, types nested
/// at most [`MAX_TYPE_DEPTH`] deep, dict keys distinct and sorted (the order slots are passed
/// in), static dimensions not negative and symbolic dimensions plain names (so that the text
/// form reads back). The error says what is wrong and where.
pub fn verify_signature(sig: &Signature) -> std::result::Result<(), String> {
    let mut seen = HashSet::new();
    for (name, t) in &sig.params {
        if name.is_empty() {
            return Err("a parameter has an empty name".to_string());
        }
        if !seen.insert(name.as_str()) {
            return Err(format!("two parameters are named {name:?}"));
        }
        verify_type(t, 1).map_err(|e| format!("parameter {name:?}: {e}"))?;
    }
    verify_type(&sig.result, 1).map_err(|e| format!("result: {e}"))
}

fn verify_type(t: &Type, depth: usize) -> std::result::Result<(), String> {
    if depth > MAX_TYPE_DEPTH {
        return Err(format!("types nest more than {MAX_TYPE_DEPTH} deep"));
    }
    match t {
        Type::Any | Type::Scalar(_) | Type::Str | Type::Object | Type::Shape(_) => Ok(()),
        Type::Tensor { dims, .. } => {
            for d in dims.iter().flatten() {
                match d {
                    Dim::Static(n) if *n < 0 => return Err(format!("tensor dimension {n} is negative")),
                    Dim::Symbolic(s) if !is_plain_name(s) => {
                        return Err(format!("symbolic dimension {s:?} is not a plain name"))
                    }
                    _ => {}
                }
            }
            Ok(())
        }
        Type::Tuple(items) => items.iter().try_for_each(|t| verify_type(t, depth + 1)),
        Type::List(item) => verify_type(item, depth + 1),
        Type::Dict(slots) => {
            for w in slots.windows(2) {
                if w[0].0 >= w[1].0 {
                    return Err(format!(
                        "dict keys {:?} and {:?} are not distinct and sorted (slots are passed in key order)",
                        w[0].0, w[1].0
                    ));
                }
            }
            slots.iter().try_for_each(|(_, t)| verify_type(t, depth + 1))
        }
    }
}

fn verify_instr(parts: &ExecutableParts, f: &FuncInfo, pc: usize) -> std::result::Result<(), String> {
    let instr = &parts.instrs[pc];
    let reg = |r: u32| {
        if r < f.register_file_size {
            Ok(())
        } else {
            Err(format!("register %{r} outside the register file of {}", f.register_file_size))
        }
    };
    match instr {
        Instruction::Call { func, args, dst } => {
            let callee = parts
                .funcs
                .get(*func as usize)
                .ok_or_else(|| format!("function index {func} outside the table of {}", parts.funcs.len()))?;
            if callee.kind == FuncKind::Bytecode && args.len() != callee.num_args as usize {
                return Err(format!(
                    "calls {:?} with {} arguments, it takes {}",
                    callee.name,
                    args.len(),
                    callee.num_args
                ));
            }
            for a in args {
                match *a {
                    Arg::Reg(r) => reg(r)?,
                    Arg::Const(c) if c as usize >= parts.constants.len() => {
                        return Err(format!("constant c[{c}] outside the pool of {}", parts.constants.len()))
                    }
                    Arg::Func(i) if i as usize >= parts.funcs.len() => {
                        return Err(format!("function index {i} outside the table of {}", parts.funcs.len()))
                    }
                    _ => {}
                }
            }
            if let Some(d) = dst {
                reg(*d)?;
            }
        }
        Instruction::Ret { result } => reg(*result)?,
        Instruction::If { cond, .. } => reg(*cond)?,
        Instruction::Goto { .. } => {}
    }
    for off in instr.successors() {
        let target = (pc as i128) + i128::from(off);
        if target < i128::from(f.start_instr) || target >= i128::from(f.end_instr) {
            return Err(if off == 1 {
                "control runs off the end of the function (the last instruction must be ret or goto)".to_string()
            } else {
                format!("jump by {off} leaves the function")
            });
        }
    }
    Ok(())
}
