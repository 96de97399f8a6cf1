//! Why linking (or dead-function removal) failed: [`LinkError`] and its kinds.

use crate::error::BuildError;
use std::fmt;

/// A module in a [`LinkError`]: its position in the list given to [`link`](crate::link()) and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleRef {
    /// The position in the list of modules.
    pub index: usize,
    /// The name it was given (e.g. its path); may be empty.
    pub name: String,
}

impl fmt::Display for ModuleRef {
    /// `module 1 ("b.rvx")`, or `module 1` without a name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "module {}", self.index)?;
        if !self.name.is_empty() {
            write!(f, " ({:?})", self.name)?;
        }
        Ok(())
    }
}

/// Why executables could not be linked: a boxed [`LinkErrorKind`] (one pointer, so results
/// stay small).
#[derive(Debug)]
pub struct LinkError(Box<LinkErrorKind>);

impl LinkError {
    /// What went wrong.
    pub fn kind(&self) -> &LinkErrorKind {
        &self.0
    }

    /// Consumes the error, returning what went wrong.
    pub fn into_kind(self) -> LinkErrorKind {
        *self.0
    }
}

impl From<LinkErrorKind> for LinkError {
    #[cold]
    fn from(kind: LinkErrorKind) -> Self {
        LinkError(Box::new(kind))
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for LinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

/// The ways linking can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkErrorKind {
    /// Two modules define the same function.
    #[error("function {name:?} is defined twice: in {first} and in {second}")]
    DuplicateDefinition {
        /// The function.
        name: String,
        /// The module whose definition comes first.
        first: ModuleRef,
        /// The other module.
        second: ModuleRef,
    },
    /// A call whose argument count differs from the inputs of the function it now reaches.
    #[error(
        "{caller}, function {func:?}, instruction {pc}: calls {callee_name:?} with {}, but {callee} defines it with {}",
        relaxvm::error::counted(got, "argument"),
        relaxvm::error::counted(expected, "input")
    )]
    Arity {
        /// The module of the call.
        caller: ModuleRef,
        /// The calling function.
        func: String,
        /// The call's index within the calling function.
        pc: usize,
        /// The function called.
        callee_name: String,
        /// The module defining it.
        callee: ModuleRef,
        /// Its number of inputs.
        expected: u32,
        /// The number of arguments passed.
        got: usize,
    },
    /// Modules that declare different entry functions, with no entry given to settle it.
    #[error("{first} declares the entry function {first_entry:?} but {second} declares {second_entry:?}: choose one (LinkOptions::entry, --entry)")]
    ConflictingEntries {
        /// The first module with an entry.
        first: ModuleRef,
        /// Its entry.
        first_entry: String,
        /// A module that declares another.
        second: ModuleRef,
        /// That entry.
        second_entry: String,
    },
    /// An entry function, or a function to keep, that no module defines as a bytecode function.
    #[error("{what} {name:?} is not a bytecode function of any module")]
    NotDefined {
        /// What the function was asked to be: "the entry function" or "function to keep".
        what: &'static str,
        /// The name.
        name: String,
    },
    /// Functions to keep were named, but unreachable functions are not being dropped, so the
    /// names would have no effect.
    #[error("functions to keep ({0}) only apply when unreachable functions are dropped (drop_unreachable, --drop-unreachable)")]
    KeepWithoutDrop(String),
    /// Dropping unreachable functions without anything to start from.
    #[error("dropping unreachable functions needs an entry function: set one, define main, or name functions to keep")]
    NoEntry,
    /// A constant that cannot be merged (e.g. a function value).
    #[error("{module}, constant c[{index}]: {source}")]
    Constant {
        /// The module.
        module: ModuleRef,
        /// The constant's index in that module.
        index: usize,
        /// Why.
        source: BuildError,
    },
    /// A table that would exceed the format's 32-bit indices.
    #[error("the linked executable would have more than 2^32 {0}")]
    TooLarge(&'static str),
    /// The result fails the VM's verifier (a bug in the linker if the modules were valid).
    #[error(transparent)]
    Invalid(relaxvm::Error),
}

/// `n` as an instruction index of the linked executable.
pub(crate) fn instr_index(n: usize) -> Result<u32, LinkError> {
    u32::try_from(n).map_err(|_| LinkErrorKind::TooLarge("instructions").into())
}
