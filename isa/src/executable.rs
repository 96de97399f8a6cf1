//! The executable: function table, constant pool and instruction stream. Immutable once built.

use crate::bytecode::Instruction;
use crate::error::{ErrorKind, Result};
use crate::location::Location;
use crate::types::Signature;
use crate::value::Value;
use crate::verify::{FuncTable, VerifyError, VerifyErrorKind};
use std::collections::HashMap;

pub use crate::parts::{ExecutableParts, FuncInfo, FuncKind, Library};

/// The content a VM runs. Build one with `relaxvm_builder::ExecBuilder`, the assembler, or by
/// loading a file; share it as `Arc<Executable>`.
#[derive(Clone)]
pub struct Executable {
    funcs: Vec<FuncInfo>,
    func_map: HashMap<String, u32>,
    constants: Vec<Value>,
    instrs: Vec<Instruction>,
    locations: Vec<Option<Location>>,
    entry: Option<String>,
    libraries: Vec<Library>,
}

/// Makes the storage of every tensor and storage constant read-only: constants are shared by
/// every VM and thread running the executable, so a builtin writing into one (`store_shape` on
/// a constant heap, a sort into a constant output) would change every caller's results.
/// A `bool` tensor constant holding a byte other than 0 or 1 is refused: it has no text form
/// that assembles, and reading it as `bool` would be undefined. Iterative, so a deeply nested
/// constant cannot overflow the stack.
fn freeze_constants(constants: &[Value]) -> Result<()> {
    let mut work: Vec<&Value> = constants.iter().collect();
    while let Some(v) = work.pop() {
        match v {
            Value::Tensor(t) => {
                if t.dtype() == crate::DataType::Bool {
                    t.view::<bool>().map_err(|e| VerifyError::program(VerifyErrorKind::Constant(e.to_string())))?;
                }
                t.storage().freeze()
            }
            Value::Storage(s) => s.freeze(),
            Value::Tuple(items) => work.extend(items.iter()),
            Value::Func(closure) => work.extend(closure.captured.iter()),
            _ => {}
        }
    }
    Ok(())
}

impl Executable {
    /// Builds an executable from its parts after verifying them (see [`crate::verify`]).
    pub fn from_parts(mut parts: ExecutableParts) -> Result<Self> {
        crate::verify::verify(&parts)?;
        freeze_constants(&parts.constants)?;
        // Frozen storage refuses safe writes; read-only pages refuse native code's too.
        crate::value::seal::seal_constants(&mut parts.constants)?;
        let func_map = parts.funcs.iter().enumerate().map(|(i, f)| (f.name.clone(), i as u32)).collect();
        let mut locations = parts.locations;
        if locations.iter().all(Option::is_none) {
            locations.clear();
        }
        Ok(Executable {
            funcs: parts.funcs,
            func_map,
            constants: parts.constants,
            instrs: parts.instrs,
            locations,
            entry: parts.entry,
            libraries: parts.libraries,
        })
    }

    /// The native libraries whose functions this executable calls, in lookup order.
    pub fn libraries(&self) -> &[Library] {
        &self.libraries
    }

    /// The same executable calling into `libraries` (replacing any it had). A VM resolves a
    /// packed function in its overrides first, then in these libraries, then in the registry.
    pub fn with_libraries(mut self, libraries: Vec<Library>) -> Self {
        self.libraries = libraries;
        self
    }

    /// The parts, to transform and rebuild.
    pub fn to_parts(&self) -> ExecutableParts {
        ExecutableParts {
            funcs: self.funcs.clone(),
            constants: self.constants.clone(),
            instrs: self.instrs.clone(),
            locations: self.locations.clone(),
            entry: self.entry.clone(),
            libraries: self.libraries.clone(),
        }
    }

    /// The function table.
    pub fn funcs(&self) -> &[FuncInfo] {
        &self.funcs
    }

    /// The index of the function named `name`.
    pub fn func_index(&self, name: &str) -> Option<u32> {
        self.func_map.get(name).copied()
    }

    /// The function named `name`.
    pub fn func(&self, name: &str) -> Option<&FuncInfo> {
        self.func_index(name).map(|i| &self.funcs[i as usize])
    }

    /// The signature of the function named `name` (`None` when it has none, e.g. a packed
    /// function); an error when the table has no such function.
    pub fn signature(&self, name: &str) -> Result<Option<&Signature>> {
        match self.func(name) {
            Some(f) => Ok(f.signature.as_ref()),
            None => Err(ErrorKind::UnknownFunction(name.to_string()).into()),
        }
    }

    /// True when any function has a signature.
    pub fn has_signatures(&self) -> bool {
        self.funcs.iter().any(|f| f.signature.is_some())
    }

    /// The entry function: the one set when the executable was built or linked, otherwise
    /// `main` when that is a bytecode function, otherwise `None`. `relaxvm run` runs it when
    /// no function is named.
    pub fn entry(&self) -> Option<&str> {
        match &self.entry {
            Some(e) => Some(e),
            None => self.func("main").filter(|f| f.kind == FuncKind::Bytecode).map(|_| "main"),
        }
    }

    /// The entry function as set explicitly (stored in the file), without the `main` default.
    pub fn declared_entry(&self) -> Option<&str> {
        self.entry.as_deref()
    }

    /// The constant pool.
    pub fn constants(&self) -> &[Value] {
        &self.constants
    }

    /// The instruction stream.
    pub fn instrs(&self) -> &[Instruction] {
        &self.instrs
    }

    /// The location attached to instruction `i`, if any.
    pub fn location(&self, i: usize) -> Option<&Location> {
        self.locations.get(i).and_then(Option::as_ref)
    }

    /// One location per instruction, or empty when no instruction has one.
    pub fn locations(&self) -> &[Option<Location>] {
        &self.locations
    }

    /// True when any instruction carries a location.
    pub fn has_locations(&self) -> bool {
        !self.locations.is_empty()
    }

    /// The same executable without its calling-convention information — signatures and the
    /// declared entry — which is what a file of format version 1 or 2 keeps of it.
    pub fn without_abi(&self) -> Executable {
        let mut funcs = self.funcs.clone();
        for f in &mut funcs {
            f.signature = None;
        }
        Executable { funcs, entry: None, ..self.clone() }
    }

    /// The same executable without debug information (locations).
    pub fn stripped(&self) -> Executable {
        Executable { locations: Vec::new(), ..self.clone() }
    }

    /// Names of the bytecode functions, in table order.
    pub fn bytecode_function_names(&self) -> Vec<&str> {
        self.funcs.iter().filter(|f| f.kind == FuncKind::Bytecode).map(|f| f.name.as_str()).collect()
    }

    /// Names of the packed functions the executable calls, in table order.
    pub fn packed_function_names(&self) -> Vec<&str> {
        self.funcs.iter().filter(|f| f.kind == FuncKind::Packed).map(|f| f.name.as_str()).collect()
    }
}

impl Executable {
    /// Verifies every bytecode function to [`Depth::DataFlow`](crate::verify::Depth::DataFlow)
    /// (loading verified the structure): every register written on every path before it is
    /// read. Returns the warnings (inputs never read), or the first error.
    pub fn verify_data_flow(&self) -> std::result::Result<Vec<String>, VerifyError> {
        let tables = FuncTable { funcs: &self.funcs, num_constants: self.constants.len() };
        crate::verify::verify_data_flow(tables, &self.instrs, &self.locations)
    }
}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Executable({} functions, {} constants, {} instructions)",
            self.funcs.len(),
            self.constants.len(),
            self.instrs.len()
        )
    }
}
