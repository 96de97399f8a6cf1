//! TEMPORARY stand-in for `relaxvm_builder` with the same API, until that crate lands.
//! No formalization and only the input check; deleted once the real builder is bound.

use relaxvm::{Arg, Executable, ExecutableParts, FuncInfo, FuncKind, Instruction, Location, RegIdx, Value};
use std::fmt;

#[derive(Debug)]
pub struct BuildError(String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

pub struct BuildOutput {
    pub executable: Executable,
    pub warnings: Vec<String>,
}

#[derive(Default)]
pub struct ExecBuilder {
    funcs: Vec<FuncInfo>,
    constants: Vec<Value>,
    instrs: Vec<Instruction>,
    locations: Vec<Option<Location>>,
    current: Option<usize>,
    loc: Option<Location>,
}

impl ExecBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.funcs.iter().position(|f| f.name == name)
    }

    pub fn function(&mut self, name: &str, num_inputs: u32, param_names: Option<Vec<String>>) -> Result<(), BuildError> {
        if self.current.is_some() {
            return Err(BuildError("functions cannot nest".into()));
        }
        let info = FuncInfo {
            name: name.into(),
            kind: FuncKind::Bytecode,
            start_instr: self.instrs.len() as u32,
            end_instr: self.instrs.len() as u32,
            num_args: num_inputs,
            register_file_size: num_inputs,
            param_names: param_names.unwrap_or_default(),
        };
        let i = match self.index(name) {
            Some(i) => {
                self.funcs[i] = info;
                i
            }
            None => {
                self.funcs.push(info);
                self.funcs.len() - 1
            }
        };
        self.current = Some(i);
        Ok(())
    }

    pub fn end_function(&mut self) -> Result<(), BuildError> {
        let i = self.current.take().ok_or_else(|| BuildError("end_function outside a function".into()))?;
        let f = &mut self.funcs[i];
        f.end_instr = self.instrs.len() as u32;
        let mut regs = f.num_args;
        for ins in &self.instrs[f.start_instr as usize..] {
            for r in ins.reads().into_iter().chain(ins.writes()) {
                regs = regs.max(r + 1);
            }
        }
        f.register_file_size = regs;
        Ok(())
    }

    pub fn declare_function(&mut self, name: &str, kind: FuncKind) -> Result<u32, BuildError> {
        if let Some(i) = self.index(name) {
            return Ok(i as u32);
        }
        let mut info = FuncInfo::packed(name);
        info.kind = kind;
        self.funcs.push(info);
        Ok(self.funcs.len() as u32 - 1)
    }

    pub fn convert_constant(&mut self, v: Value) -> Result<u32, BuildError> {
        if let Some(i) = self.constants.iter().position(|c| c.same_as(&v)) {
            return Ok(i as u32);
        }
        self.constants.push(v);
        Ok(self.constants.len() as u32 - 1)
    }

    pub fn func_ref(&mut self, name: &str) -> u32 {
        self.declare_function(name, FuncKind::Packed).expect("declare")
    }

    fn push(&mut self, i: Instruction) -> Result<(), BuildError> {
        if self.current.is_none() {
            return Err(BuildError("instructions must be emitted inside a function".into()));
        }
        self.instrs.push(i);
        self.locations.push(self.loc.clone());
        Ok(())
    }

    pub fn emit_call(&mut self, func: &str, args: &[Arg], dst: Option<RegIdx>) -> Result<(), BuildError> {
        let f = self.func_ref(func);
        self.push(Instruction::Call { func: f, args: args.to_vec(), dst })
    }

    pub fn emit_ret(&mut self, result: RegIdx) -> Result<(), BuildError> {
        self.push(Instruction::Ret { result })
    }

    pub fn emit_goto(&mut self, offset: i64) -> Result<(), BuildError> {
        self.push(Instruction::Goto { offset })
    }

    pub fn emit_if(&mut self, cond: RegIdx, false_offset: i64) -> Result<(), BuildError> {
        self.push(Instruction::If { cond, false_offset })
    }

    pub fn set_location(&mut self, loc: Option<Location>) {
        self.loc = loc;
    }

    pub fn get(&mut self) -> Result<BuildOutput, BuildError> {
        let mut warnings = Vec::new();
        for f in self.funcs.iter().filter(|f| f.kind == FuncKind::Bytecode) {
            let mut written: std::collections::HashSet<u32> = (0..f.num_args).collect();
            let mut used = std::collections::HashSet::new();
            for ins in &self.instrs[f.instr_range()] {
                for r in ins.reads() {
                    if !written.contains(&r) {
                        return Err(BuildError(format!("function {:?} reads register %{r} before writing it", f.name)));
                    }
                    used.insert(r);
                }
                if let Some(w) = ins.writes() {
                    written.insert(w);
                }
            }
            for i in 0..f.num_args {
                if !used.contains(&i) {
                    warnings.push(format!("function {:?}: input %{i} is never used", f.name));
                }
            }
        }
        let parts = ExecutableParts {
            funcs: self.funcs.clone(),
            constants: self.constants.clone(),
            instrs: self.instrs.clone(),
            locations: self.locations.clone(),
        };
        let executable = Executable::from_parts(parts).map_err(|e| BuildError(e.to_string()))?;
        Ok(BuildOutput { executable, warnings })
    }
}
