//! What an executable is made of before verification: the function table's entries
//! ([`FuncInfo`]), the native libraries it calls ([`Library`]) and the parts together
//! ([`ExecutableParts`]). The verifier checks parts; [`Executable`](crate::Executable) is
//! verified parts.

use crate::bytecode::Instruction;
use crate::location::Location;
use crate::native::{LibraryRef, NativeLibrary};
use crate::types::Signature;
use crate::value::Value;
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
    /// `VirtualMachine::invoke` (in `relaxvm`).
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
