//! The executable: function table, constant pool and instruction stream. Immutable once built.

use crate::bytecode::Instruction;
use crate::error::{ErrorKind, Result};
use crate::location::Location;
use crate::native::{LibraryRef, NativeLibrary};
use crate::types::Signature;
use crate::value::Value;
use crate::verify::{VerifyError, VerifyErrorKind};
use std::collections::HashMap;
use std::sync::Arc;

/// What a function-table entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FuncKind {
    /// A function whose body is this executable's bytecode.
    Bytecode,
    /// A packed function provided by a registry when the VM is built.
    Packed,
}

impl FuncKind {
    /// `"bytecode"` or `"packed"`.
    pub fn name(self) -> &'static str {
        match self {
            FuncKind::Bytecode => "bytecode",
            FuncKind::Packed => "packed",
        }
    }
}

/// One entry of the function table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncInfo {
    /// The function's name, unique in the table.
    pub name: String,
    /// Bytecode or packed.
    pub kind: FuncKind,
    /// The first instruction (bytecode functions).
    pub start_instr: u32,
    /// One past the last instruction (bytecode functions).
    pub end_instr: u32,
    /// The number of inputs; they arrive in registers `0..num_args`.
    pub num_args: u32,
    /// The number of registers a frame of this function has.
    pub register_file_size: u32,
    /// The parameters' names (empty, or one per input). With a signature, exactly its names.
    pub param_names: Vec<String>,
    /// The parameter and result types (bytecode functions), checked at the call boundary by
    /// [`VirtualMachine::invoke`](crate::VirtualMachine::invoke).
    pub signature: Option<Signature>,
}

impl FuncInfo {
    /// A packed-function entry.
    pub fn packed(name: impl Into<String>) -> Self {
        FuncInfo {
            name: name.into(),
            kind: FuncKind::Packed,
            start_instr: 0,
            end_instr: 0,
            num_args: 0,
            register_file_size: 0,
            param_names: Vec::new(),
            signature: None,
        }
    }

    /// A bytecode-function entry owning instructions `start_instr..end_instr`, with `num_args`
    /// inputs in a frame of `register_file_size` registers, without parameter names or signature.
    pub fn bytecode(
        name: impl Into<String>,
        start_instr: u32,
        end_instr: u32,
        num_args: u32,
        register_file_size: u32,
    ) -> Self {
        FuncInfo {
            name: name.into(),
            kind: FuncKind::Bytecode,
            start_instr,
            end_instr,
            num_args,
            register_file_size,
            param_names: Vec::new(),
            signature: None,
        }
    }

    /// The same entry with these parameter names.
    pub fn with_param_names<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.param_names = names.into_iter().map(Into::into).collect();
        self
    }

    /// The same entry with this signature; the parameter names become the signature's.
    pub fn with_signature(mut self, signature: Signature) -> Self {
        self.param_names = signature.param_names().map(str::to_string).collect();
        self.signature = Some(signature);
        self
    }

    /// The instruction range of a bytecode function.
    pub fn instr_range(&self) -> std::ops::Range<usize> {
        self.start_instr as usize..self.end_instr as usize
    }
}

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

/// A native library an executable calls into: what is recorded of it, and the library itself
/// once a loader crate has opened it.
#[derive(Clone)]
pub struct Library {
    /// The path and content hash, as saved in the file.
    pub reference: LibraryRef,
    /// The opened library; `None` until a loader opens the reference.
    pub loaded: Option<Arc<dyn NativeLibrary>>,
}

impl Library {
    /// An opened library, recorded under its own path and hash.
    pub fn opened(lib: Arc<dyn NativeLibrary>) -> Self {
        let reference =
            LibraryRef { path: lib.path().to_string_lossy().into_owned(), content_hash: lib.content_hash() };
        Library { reference, loaded: Some(lib) }
    }
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Library({:?}, {})", self.reference.path, if self.loaded.is_some() { "loaded" } else { "not loaded" })
    }
}

/// The parts an executable is made of, before verification.
#[derive(Clone, Default)]
pub struct ExecutableParts {
    /// The function table.
    pub funcs: Vec<FuncInfo>,
    /// The constant pool.
    pub constants: Vec<Value>,
    /// The instruction stream.
    pub instrs: Vec<Instruction>,
    /// One optional location per instruction (may be empty: no locations).
    pub locations: Vec<Option<Location>>,
    /// The entry function, a bytecode function (`None`: `main`, when there is one).
    pub entry: Option<String>,
    /// The native libraries whose functions the program calls (see [`Library`]).
    pub libraries: Vec<Library>,
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
    pub fn from_parts(parts: ExecutableParts) -> Result<Self> {
        crate::verify::verify(&parts)?;
        freeze_constants(&parts.constants)?;
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

    /// A summary like the design document's.
    pub fn stats(&self) -> String {
        let consts: Vec<String> = self.constants.iter().map(crate::text::constant_summary).collect();
        let libs: Vec<&str> = self.libraries.iter().map(|l| l.reference.path.as_str()).collect();
        let libs = if libs.is_empty() {
            String::new()
        } else {
            format!("  Native libraries (#{}): [{}]\n", libs.len(), libs.join(", "))
        };
        format!(
            "Relax VM executable statistics:\n  Constant pool (# {}): [{}]\n  Globals (#{}): [{}]\n  Packed functions (#{}): [{}]\n  Instructions (#{})\n",
            consts.len(),
            consts.join(", "),
            self.bytecode_function_names().len(),
            self.bytecode_function_names().join(", "),
            self.packed_function_names().len(),
            self.packed_function_names().join(", "),
            self.instrs.len(),
        ) + &libs
    }

    /// The instruction at `pc` of function `func`, as text, for error messages.
    pub fn instr_text(&self, index: usize) -> String {
        self.instrs.get(index).map(|i| crate::text::instr_to_text(self, i)).unwrap_or_default()
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
