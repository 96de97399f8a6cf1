//! [`ExecBuilder`]: emits functions instruction by instruction and builds an [`Executable`].

use crate::check::{check_function, Context, Function};
use crate::constants::ConstantPool;
use crate::error::{BuildError, CheckError, CheckErrorKind};
use crate::formalize::formalize;
use crate::func_table::{check_name, Body, FuncTable};
use relaxvm::verify::MAX_REGISTERS;
use relaxvm::{Arg, Executable, ExecutableParts, FuncInfo, FuncKind, Instruction, Location, RegIdx, Value};
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
    /// there ([`Value::same_as`]: tensors by content) returns that one's index. Tuples,
    /// functions, storage and other runtime objects cannot be constants.
    pub fn convert_constant(&mut self, v: Value) -> Result<u32, BuildError> {
        self.constants.intern(v)
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

    /// Checks the whole program, formalizes every function and builds the executable. The
    /// builder is left as it was, to be inspected or extended and built again.
    pub fn get(&mut self) -> Result<BuildOutput, BuildError> {
        if let Some(open) = self.open {
            return Err(BuildError::FunctionStillOpen(self.name(open).to_string()));
        }
        let mut warnings = Vec::new();
        for index in 0..self.table.len() as u32 {
            check_name(self.name(index))?;
            warnings.extend(self.check(index)?);
        }
        let mut parts = ExecutableParts { constants: self.constants.values().to_vec(), ..Default::default() };
        for (name, entry) in self.table.iter() {
            let Some(body) = &entry.body else {
                parts.funcs.push(FuncInfo::packed(name));
                continue;
            };
            let (instrs, regs) = formalize(body.num_inputs, &body.instrs);
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
            Some(body) => check_function(self, Function { name, num_inputs: body.num_inputs, instrs: &body.instrs }),
            None if entry.declared == Some(FuncKind::Bytecode) => {
                Err(CheckError { func: name.to_string(), pc: None, instr: None, kind: CheckErrorKind::NeverDefined })
            }
            None => Ok(Vec::new()),
        }
    }
}

impl Context for ExecBuilder {
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
    u32::try_from(n).map_err(|_| BuildError::Invalid(relaxvm::Error::invalid("more than 2^32 instructions")))
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
