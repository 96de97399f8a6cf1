//! The verifier: the one description of a valid program, which the loader, the assembler, the
//! builder's check and the TVM importer all call.
//!
//! At [`Depth::Structure`] it proves what the interpreter relies on: every register index is
//! inside its frame, every jump and fall-through stays inside its function, every constant and
//! function index is in range, and calls to bytecode functions pass the declared number of
//! arguments. A crafted file can therefore fail to load but never make the interpreter index
//! out of bounds. [`verify`] also checks the executable around the functions: names, the entry
//! function, signatures (one parameter per input, named as the parameters, well-formed types)
//! and that functions do not share instructions and leave none outside them. At [`Depth::DataFlow`] it also proves that
//! every register is written before it is read along every path (`flow.rs`).
//!
//! Errors are one type, [`VerifyError`], naming the function, instruction, operand and source
//! location.

pub use relaxvm_core::error::verify as error;
mod flow;
mod function;
mod signature;

pub use error::{VerifyError, VerifyErrorDetail, VerifyErrorKind};
pub use function::{verify_function, Depth, FunctionCode, Tables};
pub use signature::verify_signature;

use crate::bytecode::Instruction;
use crate::location::Location;
use crate::parts::{ExecutableParts, FuncInfo, FuncKind};
use std::collections::HashSet;

/// The largest register file a function may declare (bounds the memory a frame can take).
pub const MAX_REGISTERS: u32 = 1 << 20;

/// The tables around the functions of an executable, or of its parts.
#[derive(Clone, Copy, Debug)]
pub struct FuncTable<'a> {
    /// The function table.
    pub funcs: &'a [FuncInfo],
    /// The size of the constant pool.
    pub num_constants: usize,
}

impl Tables for FuncTable<'_> {
    fn func_name(&self, index: u32) -> Option<&str> {
        self.funcs.get(index as usize).map(|f| f.name.as_str())
    }
    fn num_funcs(&self) -> usize {
        self.funcs.len()
    }
    fn bytecode_arity(&self, index: u32) -> Option<u32> {
        self.funcs.get(index as usize).filter(|f| f.kind == FuncKind::Bytecode).map(|f| f.num_args)
    }
    fn num_constants(&self) -> usize {
        self.num_constants
    }
}

impl ExecutableParts {
    /// Its function table and constant-pool size, for the verifier.
    pub fn tables(&self) -> FuncTable<'_> {
        FuncTable { funcs: &self.funcs, num_constants: self.constants.len() }
    }
}

/// Verifies `parts` to [`Depth::Structure`]; the error names the function and instruction at
/// fault.
pub fn verify(parts: &ExecutableParts) -> Result<(), VerifyError> {
    let program = |kind| Err(VerifyError::program(kind));
    let mut names = HashSet::new();
    for f in &parts.funcs {
        if f.name.is_empty() {
            return program(VerifyErrorKind::EmptyName);
        }
        if !names.insert(f.name.as_str()) {
            return program(VerifyErrorKind::DuplicateName(f.name.clone()));
        }
    }
    if !parts.locations.is_empty() && parts.locations.len() != parts.instrs.len() {
        return program(VerifyErrorKind::LocationCount {
            locations: parts.locations.len(),
            instrs: parts.instrs.len(),
        });
    }
    if let Some(entry) = &parts.entry {
        match parts.funcs.iter().find(|f| f.name == *entry) {
            Some(f) if f.kind == FuncKind::Bytecode => {}
            Some(_) => return program(VerifyErrorKind::EntryIsPacked(entry.clone())),
            None => return program(VerifyErrorKind::EntryMissing(entry.clone())),
        }
    }
    if let Some(f) = parts.funcs.iter().find(|f| f.signature.is_some() && f.kind == FuncKind::Packed) {
        return program(VerifyErrorKind::PackedWithSignature(f.name.clone()));
    }
    let mut ranges: Vec<(usize, usize, &str)> = Vec::new();
    for f in parts.funcs.iter().filter(|f| f.kind == FuncKind::Bytecode) {
        verify_header(f, parts.instrs.len()).map_err(|kind| VerifyError::function(&f.name, kind))?;
        ranges.push((f.start_instr as usize, f.end_instr as usize, &f.name));
        let range = f.instr_range();
        let code = FunctionCode {
            name: &f.name,
            num_inputs: f.num_args,
            registers: Some(f.register_file_size),
            instrs: &parts.instrs[range.clone()],
            locations: parts.locations.get(range).unwrap_or_default(),
        };
        verify_function(&parts.tables(), code, Depth::Structure)?;
    }
    ranges.sort();
    for w in ranges.windows(2) {
        if w[0].1 > w[1].0 {
            return program(VerifyErrorKind::SharedInstructions(w[0].2.to_string(), w[1].2.to_string()));
        }
    }
    // Every instruction belongs to a function: the checks above cover only those, and the
    // interpreter's decoding reads every instruction.
    let covered: usize = ranges.iter().map(|(start, end, _)| end - start).sum();
    if covered != parts.instrs.len() {
        let mut next = 0;
        let pc = ranges.iter().find_map(|&(start, end, _)| {
            (start > next).then_some(next).or_else(|| {
                next = end;
                None
            })
        });
        let pc = pc.unwrap_or(next);
        return program(VerifyErrorKind::OutsideFunctions { pc, len: parts.instrs.len(), covered });
    }
    Ok(())
}

/// Verifies the bytecode functions of `funcs` (whose structure [`verify`] already accepted)
/// to [`Depth::DataFlow`]; returns the warnings, or the first error. See
/// [`Executable::verify_data_flow`](crate::Executable::verify_data_flow).
pub fn verify_data_flow(
    tables: FuncTable<'_>,
    instrs: &[Instruction],
    locations: &[Option<Location>],
) -> Result<Vec<String>, VerifyError> {
    let mut warnings = Vec::new();
    for f in tables.funcs.iter().filter(|f| f.kind == FuncKind::Bytecode) {
        let range = f.instr_range();
        let code = FunctionCode {
            name: &f.name,
            num_inputs: f.num_args,
            registers: Some(f.register_file_size),
            instrs: instrs.get(range.clone()).unwrap_or_default(),
            locations: locations.get(range).unwrap_or_default(),
        };
        warnings.extend(verify_function(&tables, code, Depth::DataFlow)?);
    }
    Ok(warnings)
}

fn verify_header(f: &FuncInfo, n_instrs: usize) -> Result<(), VerifyErrorKind> {
    if f.start_instr >= f.end_instr || f.end_instr as usize > n_instrs {
        return Err(VerifyErrorKind::InstrRange { start: f.start_instr, end: f.end_instr, len: n_instrs });
    }
    if f.register_file_size > MAX_REGISTERS {
        return Err(VerifyErrorKind::TooManyRegisters { regs: f.register_file_size, max: MAX_REGISTERS });
    }
    if f.num_args > f.register_file_size {
        return Err(VerifyErrorKind::InputsExceedRegisters { inputs: f.num_args, regs: f.register_file_size });
    }
    if let Some(sig) = &f.signature {
        if sig.params.len() != f.num_args as usize {
            return Err(VerifyErrorKind::SignatureArity { params: sig.params.len(), inputs: f.num_args });
        }
        if !f.param_names.iter().map(String::as_str).eq(sig.param_names()) {
            return Err(VerifyErrorKind::ParamNamesDiffer {
                names: f.param_names.join(", "),
                expected: sig.param_names().collect::<Vec<_>>().join(", "),
            });
        }
        verify_signature(sig).map_err(VerifyErrorKind::Signature)?;
    }
    if !f.param_names.is_empty() && f.param_names.len() != f.num_args as usize {
        return Err(VerifyErrorKind::ParamNameCount { names: f.param_names.len(), inputs: f.num_args });
    }
    Ok(())
}
