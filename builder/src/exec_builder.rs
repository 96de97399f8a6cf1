//! [`ExecBuilder`]: emits functions instruction by instruction and builds an [`Executable`].

use crate::constants::ConstantPool;
use crate::error::{BuildError, CheckError, CheckErrorKind};
use crate::func_table::{check_name, Body, FuncTable};
use crate::renumber::renumber_registers;
use relaxvm::verify::{
    verify_function, verify_signature, Depth, FunctionCode, Tables, VerifyError, VerifyErrorKind, MAX_REGISTERS,
};
use relaxvm::{Arg, Executable, ExecutableParts, FuncInfo, FuncKind, Instruction, Location, RegIdx, Signature, Value};
use std::collections::HashSet;

/// Builds an [`Executable`] the way TVM's `ExecBuilder` does.
///
/// ```
/// use relaxvm::{Arg, Value};
/// use relaxvm_builder::ExecBuilder;
///
/// let mut ib = ExecBuilder::new();
/// let c = ib.convert_constant(Value::Int(10)).unwrap();
/// ib.function("main", 1, None).unwrap();
/// ib.emit_call("vm.op.add", &[Arg::Reg(0), Arg::Const(c)], Some(7)).unwrap();
/// ib.emit_ret(7).unwrap();
/// ib.end_function().unwrap();
/// let out = ib.get().unwrap();
/// assert_eq!(out.executable.as_text(), "\
/// .const c[0] = int 10
///
/// @main inputs=1 regs=2:
///   call  vm.op.add  in: %0, c[0]  dst: %1
///   ret  %1
/// .packed vm.op.add
/// ");
/// ```
///
/// * The function table lists names in the order they are first declared, defined or
///   referenced. A name that [`function`](Self::function) defines is a bytecode function; any
///   other is a packed function, resolved by name when a VM is built. Forward references work.
/// * Each function is checked when its scope closes ([`end_function`](Self::end_function)) and
///   the whole program again at [`get`](Self::get) (see [`crate::check`]).
/// * [`get`](Self::get) renumbers registers densely (inputs first, then in order of first
///   write) and lays instructions out in function-table order, so equal programs print equal
///   text whatever register numbers and definition order they were written with.
#[derive(Clone, Default)]
pub struct ExecBuilder {
    table: FuncTable,
    constants: ConstantPool,
    open: Option<u32>,
    location: Option<Location>,
    warnings: Vec<String>,
    entry: Option<String>,
}

/// What [`ExecBuilder::get`] returns.
#[derive(Clone, Debug)]
pub struct BuildOutput {
    /// The executable.
    pub executable: Executable,
    /// Warnings of the check (e.g. `function "main": input %1 is never used`).
    pub warnings: Vec<String>,
}

impl ExecBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        ExecBuilder::default()
    }

    /// Opens the scope of bytecode function `name` with `num_inputs` inputs (registers
    /// `0..num_inputs`) and optional parameter names, one per input.
    ///
    /// Fails when a scope is open, when `name` already has a body or was declared packed, or
    /// when the parameter names do not match the inputs.
    pub fn function(
        &mut self,
        name: &str,
        num_inputs: u32,
        param_names: Option<Vec<String>>,
    ) -> Result<(), BuildError> {
        if let Some(open) = self.open {
            return Err(BuildError::FunctionAlreadyOpen {
                open: self.name(open).to_string(),
                requested: name.to_string(),
            });
        }
        if num_inputs > MAX_REGISTERS {
            return Err(BuildError::TooManyInputs { func: name.to_string(), num_inputs, max: MAX_REGISTERS });
        }
        let param_names = param_names.unwrap_or_default();
        if !param_names.is_empty() && param_names.len() != num_inputs as usize {
            return Err(BuildError::ParamCount { func: name.to_string(), num_inputs, got: param_names.len() });
        }
        let mut seen = HashSet::new();
        if let Some(dup) = param_names.iter().find(|p| !seen.insert(p.as_str())) {
            return Err(BuildError::DuplicateParam { func: name.to_string(), param: dup.clone() });
        }
        let body = Body { num_inputs, param_names, ..Body::default() };
        self.open = Some(self.table.define(name, body)?);
        Ok(())
    }

    /// Opens the scope of bytecode function `name` with a [`Signature`]: its parameters are the
    /// inputs (registers `0..n`, named as in the signature), and calls through
    /// [`VirtualMachine::invoke`](relaxvm::VirtualMachine::invoke) check and convert their
    /// arguments against it.
    ///
    /// Fails as [`function`](Self::function) does, and when the signature is malformed
    /// (duplicate parameter names or dict keys, types nested too deep...).
    pub fn function_with_signature(&mut self, name: &str, signature: Signature) -> Result<(), BuildError> {
        let num_inputs = u32::try_from(signature.params.len()).unwrap_or(u32::MAX);
        if num_inputs > MAX_REGISTERS {
            return Err(BuildError::TooManyInputs { func: name.to_string(), num_inputs, max: MAX_REGISTERS });
        }
        verify_signature(&signature)
            .map_err(|reason| BuildError::InvalidSignature { func: name.to_string(), reason })?;
        let names = signature.param_names().map(str::to_string).collect();
        self.function(name, num_inputs, Some(names))?;
        let index = self.open_index("function_with_signature")?;
        if let Some(body) = self.table.body_mut(index) {
            body.signature = Some(signature);
        }
        Ok(())
    }

    /// Gives the open function a [`Signature`] (replacing any it has). It must have one
    /// parameter per input; when the function was opened with parameter names they must be the
    /// signature's, otherwise the signature names the parameters.
    pub fn set_signature(&mut self, signature: Signature) -> Result<(), BuildError> {
        let index = self.open_index("set_signature")?;
        let name = self.name(index).to_string();
        let invalid = |reason: String| BuildError::InvalidSignature { func: name.clone(), reason };
        verify_signature(&signature).map_err(invalid)?;
        let body = self.table.body_mut(index).ok_or(BuildError::NoOpenFunction { op: "set_signature" })?;
        if signature.params.len() != body.num_inputs as usize {
            return Err(invalid(format!(
                "the signature has {}, the function {}",
                relaxvm::error::counted(signature.params.len(), "parameter"),
                relaxvm::error::counted(body.num_inputs, "input")
            )));
        }
        if !body.param_names.is_empty() && !body.param_names.iter().map(String::as_str).eq(signature.param_names()) {
            return Err(invalid(format!(
                "the signature names the parameters ({}), the function was opened with ({})",
                signature.param_names().collect::<Vec<_>>().join(", "),
                body.param_names.join(", ")
            )));
        }
        body.param_names = signature.param_names().map(str::to_string).collect();
        body.signature = Some(signature);
        Ok(())
    }

    /// Sets the entry function: the bytecode function `relaxvm run` runs when no function is
    /// named (without one, `main` is the entry when it exists). It may be defined later, but
    /// [`get`](Self::get) fails unless it is a defined bytecode function by then.
    pub fn set_entry(&mut self, name: &str) -> Result<(), BuildError> {
        check_name(name)?;
        self.entry = Some(name.to_string());
        Ok(())
    }

    /// The entry function set with [`set_entry`](Self::set_entry), if any.
    pub fn entry(&self) -> Option<&str> {
        self.entry.as_deref()
    }

    /// Imports every function of `exe` into the builder, as linking does (see
    /// [`link`](crate::link())): its bytecode functions become the builder's (with their
    /// parameter names, signatures and locations), its constants join the pool (equal constants
    /// are stored once), and every function and constant index is remapped. A name `exe` defines
    /// that the builder only declared or referenced becomes a bytecode function, so calls to it
    /// become direct calls; a name the builder defines resolves `exe`'s packed references to it.
    /// When the builder has no entry function, it takes `exe`'s.
    ///
    /// Imported functions are checked like the builder's own (see [`crate::check`]). On error
    /// (a name both define, a failed check, a scope open) the builder is left unchanged.
    pub fn import_executable(&mut self, exe: &Executable) -> Result<(), BuildError> {
        if let Some(open) = self.open {
            return Err(BuildError::ImportWhileOpen(self.name(open).to_string()));
        }
        let mut next = self.clone();
        let consts = exe.constants().iter().map(|c| next.constants.intern(c.clone())).collect::<Result<Vec<_>, _>>()?;
        // Bytecode names first, so that the conflict check does not depend on table order.
        let mut funcs = vec![0; exe.funcs().len()];
        for (i, f) in exe.funcs().iter().enumerate() {
            funcs[i] = match f.kind {
                FuncKind::Bytecode => next.table.define_imported(&f.name, Body::default())?,
                FuncKind::Packed => {
                    check_name(&f.name)?;
                    next.table.reference(&f.name)
                }
            };
        }
        let mut imported = Vec::new();
        for (i, f) in exe.funcs().iter().enumerate().filter(|(_, f)| f.kind == FuncKind::Bytecode) {
            let range = f.instr_range();
            let body = Body {
                num_inputs: f.num_args,
                param_names: f.param_names.clone(),
                signature: f.signature.clone(),
                instrs: exe.instrs()[range.clone()]
                    .iter()
                    .map(|instr| instr.map_indices(|g| funcs[g as usize], |c| consts[c as usize]))
                    .collect(),
                locations: range.map(|pc| exe.location(pc).cloned()).collect(),
            };
            *next.table.body_mut(funcs[i]).expect("defined above") = body;
            imported.push(funcs[i]);
        }
        for index in imported {
            let warnings = next.check(index)?;
            next.warnings.extend(warnings);
        }
        if next.entry.is_none() {
            next.entry = exe.declared_entry().map(str::to_string);
        }
        *self = next;
        Ok(())
    }

    /// Closes the open function scope after checking the function; the error names the
    /// function and the instruction at fault. The scope is closed even when the check fails
    /// (and [`get`](Self::get) will report the same error).
    pub fn end_function(&mut self) -> Result<(), BuildError> {
        let index = self.open.take().ok_or(BuildError::NoOpenFunction { op: "end_function" })?;
        let warnings = self.check(index)?;
        self.warnings.extend(warnings);
        Ok(())
    }

    /// Declares `name` as a function of `kind` without defining it (a forward reference) and
    /// returns its index, fixing its position in the function table. Declaring a defined
    /// function bytecode again is allowed; changing a name's kind is an error.
    pub fn declare_function(&mut self, name: &str, kind: FuncKind) -> Result<u32, BuildError> {
        self.table.declare(name, kind)
    }

    /// Adds a constant to the pool and returns its index; a constant equal to one already
    /// there ([`Value::content_eq`]: tensors by content) returns that one's index. Tuples,
    /// functions, storage and other runtime objects cannot be constants.
    pub fn convert_constant(&mut self, v: Value) -> Result<u32, BuildError> {
        self.constants.intern(v)
    }

    /// [`convert_constant`](Self::convert_constant), keeping `own(v)` when `v` is new (a copy
    /// that does not alias the caller's memory, made only when needed); see
    /// `ConstantPool::intern_with` for the two errors.
    pub fn convert_constant_with<E>(
        &mut self,
        v: &Value,
        own: impl FnOnce(&Value) -> Result<Value, E>,
    ) -> Result<Result<u32, BuildError>, E> {
        self.constants.intern_with(v, own)
    }

    /// The function-table index of `name` for an [`Arg::Func`] argument, adding an entry if
    /// the name is new (it becomes packed unless defined later).
    pub fn func_ref(&mut self, name: &str) -> u32 {
        self.table.reference(name)
    }

    /// Emits `call func(args...)`, writing the result to `dst` (`None` discards it).
    pub fn emit_call(&mut self, func: &str, args: &[Arg], dst: Option<RegIdx>) -> Result<(), BuildError> {
        self.open_index("emit_call")?;
        check_name(func)?;
        let func = self.table.reference(func);
        self.push("emit_call", Instruction::Call { func, args: args.to_vec(), dst })
    }

    /// Emits `ret result`.
    pub fn emit_ret(&mut self, result: RegIdx) -> Result<(), BuildError> {
        self.push("emit_ret", Instruction::Ret { result })
    }

    /// Emits `goto offset`: a jump relative to this instruction.
    pub fn emit_goto(&mut self, offset: i64) -> Result<(), BuildError> {
        self.push("emit_goto", Instruction::Goto { offset })
    }

    /// Emits `if cond false_offset`: go on when `cond` is true, else jump by `false_offset`.
    pub fn emit_if(&mut self, cond: RegIdx, false_offset: i64) -> Result<(), BuildError> {
        self.push("emit_if", Instruction::If { cond, false_offset })
    }

    /// Sets the location attached to every instruction emitted from now until it is changed
    /// (`None`: no location).
    pub fn set_location(&mut self, loc: Option<Location>) {
        self.location = loc;
    }

    /// The location instructions are currently emitted with.
    pub fn location(&self) -> Option<&Location> {
        self.location.as_ref()
    }

    /// Checks the whole program, renumbers each function's registers densely and builds the
    /// executable. The builder is left as it was, to be inspected or extended and built again.
    pub fn get(&mut self) -> Result<BuildOutput, BuildError> {
        if let Some(open) = self.open {
            return Err(BuildError::FunctionStillOpen(self.name(open).to_string()));
        }
        let mut warnings = Vec::new();
        for index in 0..self.table.len() as u32 {
            check_name(self.name(index))?;
            warnings.extend(self.check(index)?);
        }
        if let Some(entry) = &self.entry {
            if self.function_kind(entry) != Some(FuncKind::Bytecode) {
                return Err(BuildError::EntryNotDefined(entry.clone()));
            }
        }
        let mut parts = ExecutableParts {
            constants: self.constants.values().to_vec(),
            entry: self.entry.clone(),
            ..Default::default()
        };
        for (name, entry) in self.table.iter() {
            let Some(body) = &entry.body else {
                parts.funcs.push(FuncInfo::packed(name));
                continue;
            };
            let (instrs, regs) = renumber_registers(body.num_inputs, &body.instrs);
            let start_instr = instr_index(parts.instrs.len())?;
            parts.instrs.extend(instrs);
            parts.locations.extend(body.locations.iter().cloned());
            parts.funcs.push(FuncInfo {
                name: name.to_string(),
                kind: FuncKind::Bytecode,
                start_instr,
                end_instr: instr_index(parts.instrs.len())?,
                num_args: body.num_inputs,
                register_file_size: u32::try_from(regs).unwrap_or(u32::MAX),
                param_names: body.param_names.clone(),
                signature: body.signature.clone(),
            });
        }
        let executable = Executable::from_parts(parts).map_err(BuildError::Invalid)?;
        Ok(BuildOutput { executable, warnings })
    }

    /// The function whose scope is open, if any.
    pub fn current_function(&self) -> Option<&str> {
        self.open.map(|i| self.name(i))
    }

    /// The names in the function table, in table order.
    pub fn function_names(&self) -> Vec<&str> {
        self.table.iter().map(|(n, _)| n).collect()
    }

    /// The kind entry `name` has now (`None` if the table does not have it): bytecode once
    /// defined or declared so, packed otherwise.
    pub fn function_kind(&self, name: &str) -> Option<FuncKind> {
        self.table.index_of(name).and_then(|i| self.table.get(i)).map(|(_, e)| e.kind())
    }

    /// The constant pool so far.
    pub fn constants(&self) -> &[Value] {
        self.constants.values()
    }

    /// The warnings of the functions closed so far, in the order they closed.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn name(&self, index: u32) -> &str {
        self.table.get(index).map(|(n, _)| n).unwrap_or_default()
    }

    fn open_index(&self, op: &'static str) -> Result<u32, BuildError> {
        self.open.ok_or(BuildError::NoOpenFunction { op })
    }

    fn push(&mut self, op: &'static str, instr: Instruction) -> Result<(), BuildError> {
        let index = self.open_index(op)?;
        let location = self.location.clone();
        let body = self.table.body_mut(index).ok_or(BuildError::NoOpenFunction { op })?;
        body.instrs.push(instr);
        body.locations.push(location);
        Ok(())
    }

    /// Checks entry `index`: its body, or that a bytecode declaration got one.
    fn check(&self, index: u32) -> Result<Vec<String>, CheckError> {
        let Some((name, entry)) = self.table.get(index) else {
            return Ok(Vec::new());
        };
        match &entry.body {
            Some(body) => {
                let code = FunctionCode {
                    name,
                    num_inputs: body.num_inputs,
                    registers: None,
                    instrs: &body.instrs,
                    locations: &body.locations,
                };
                verify_function(self, code, Depth::DataFlow)
            }
            None if entry.declared == Some(FuncKind::Bytecode) => {
                Err(CheckError::function(name, CheckErrorKind::NeverDefined))
            }
            None => Ok(Vec::new()),
        }
    }
}

impl Tables for ExecBuilder {
    fn func_name(&self, index: u32) -> Option<&str> {
        self.table.get(index).map(|(n, _)| n)
    }
    fn num_funcs(&self) -> usize {
        self.table.len()
    }
    fn bytecode_arity(&self, index: u32) -> Option<u32> {
        self.table.get(index).and_then(|(_, e)| e.body.as_ref()).map(|b| b.num_inputs)
    }
    fn num_constants(&self) -> usize {
        self.constants.values().len()
    }
}

fn instr_index(n: usize) -> Result<u32, BuildError> {
    u32::try_from(n)
        .map_err(|_| BuildError::Invalid(VerifyError::program(VerifyErrorKind::TooLarge("instructions")).into()))
}

impl std::fmt::Debug for ExecBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecBuilder")
            .field("functions", &self.function_names())
            .field("constants", &self.constants.values().len())
            .field("open", &self.current_function())
            .finish()
    }
}
