//! The error type of the runtime.
//!
//! [`Error`] is a single boxed pointer so that `Result<Value, Error>` stays small on the
//! interpreter's hot path; the detail lives in [`ErrorKind`].

pub mod verify;

use std::fmt;
use std::sync::Arc;

/// Everything that can go wrong while building, loading or running an executable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A value of the wrong type was given.
    #[error("type mismatch: expected {expected}, found {found}")]
    Type {
        /// What the callee accepts.
        expected: String,
        /// What it was given.
        found: String,
    },
    /// A value of the right type but an unacceptable value.
    #[error("{0}")]
    Value(String),
    /// An index outside its range.
    #[error("index {index} out of range for {what} of length {len}")]
    Index {
        /// What was indexed (a tuple, the shape heap, a register file...).
        what: String,
        /// The index that was asked for.
        index: i64,
        /// How many elements there are.
        len: usize,
    },
    /// A call with the wrong number of arguments.
    #[error("{func}: expected {}, got {got}", counted(expected, "argument"))]
    Arity {
        /// The function called.
        func: String,
        /// What it accepts, e.g. "2" or "at least 1".
        expected: String,
        /// How many it was given.
        got: usize,
    },
    /// A memory allocation that could not be made.
    #[error("cannot allocate {bytes} bytes: {reason}")]
    Alloc {
        /// The requested size in bytes (may exceed the address space).
        bytes: u128,
        /// Why it failed.
        reason: String,
    },
    /// Integer overflow or division by zero in scalar arithmetic.
    #[error("arithmetic error: {0}")]
    Arithmetic(String),
    /// A function name that neither the executable nor any registry provides.
    #[error("unknown function {0:?}")]
    UnknownFunction(String),
    /// Packed functions that the executable calls but no registry provides.
    #[error("{} not found in any registry: {}", noun(.0.len(), "packed function"), .0.join(", "))]
    MissingFunctions(Vec<String>),
    /// Packed functions not found while the executable references a native library that no
    /// loader has opened (e.g. a `.rvx` saved from a TVM model, read with the core loader only).
    #[error("{} not found: {}; they may come from the native library {path:?}, which is not loaded (open the executable with relaxvm_tvm::load_executable, or rx.load_executable in Python)", noun(.missing.len(), "packed function"), .missing.join(", "))]
    LibraryNotLoaded {
        /// The library's recorded path.
        path: String,
        /// The functions nothing provides.
        missing: Vec<String>,
    },
    /// An error raised by foreign code (a kernel) with its own kind, e.g. TVM's `ValueError`;
    /// Python re-raises it as that exception type where one exists (so the kind is not
    /// repeated in the message).
    #[error("{message}")]
    Raised {
        /// The error kind the foreign code named (`ValueError`, `TypeError`, `RuntimeError`...).
        kind: String,
        /// Its message.
        message: String,
    },
    /// A name registered twice without permission to override.
    #[error("function {0:?} is already registered (pass override to replace it)")]
    AlreadyRegistered(String),
    /// Bytecode calls nested deeper than the configured limit.
    #[error("call depth limit of {0} frames exceeded (unbounded recursion?)")]
    StackOverflow(usize),
    /// Too little native stack is left to enter the VM again (calls back into the VM from
    /// packed functions nest on the thread's stack).
    #[error("only {remaining} bytes of native stack are left, fewer than the {needed} a call into the VM needs: calls back into the VM are nested too deeply for this thread's stack")]
    NativeStack {
        /// Bytes of stack left.
        remaining: usize,
        /// The margin the VM keeps.
        needed: usize,
    },
    /// The run was interrupted from another thread or by a signal.
    #[error("interrupted")]
    Interrupted,
    /// The per-invocation step budget ran out.
    #[error("step budget of {0} steps (bytecode calls and backward jumps) exhausted")]
    StepBudget(u64),
    /// An executable that fails verification (see `relaxvm::verify`): what and where.
    #[error("invalid executable: {0}")]
    Invalid(verify::VerifyError),
    /// A binary executable that cannot be decoded.
    #[error("malformed executable file: {0}")]
    Format(String),
    /// An I/O failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A panic inside a packed function, caught at the call.
    #[error("packed function panicked: {0}")]
    Panic(String),
    /// An error raised by a foreign function (e.g. a Python exception).
    #[error("{0}")]
    External(Arc<dyn std::error::Error + Send + Sync>),
    /// An error raised while running an instruction, with where it happened.
    #[error("{source}\n  in function {func:?}, instruction {pc}: {instr}{}", loc_suffix(.location))]
    At {
        /// The bytecode function.
        func: String,
        /// Index of the instruction within the function.
        pc: usize,
        /// The instruction as `as_text()` prints it.
        instr: String,
        /// The source location attached to the instruction, if any.
        location: Option<String>,
        /// The underlying failure.
        source: Error,
    },
}

fn loc_suffix(loc: &Option<String>) -> String {
    loc.as_ref().map(|l| format!(" at {l}")).unwrap_or_default()
}

/// The runtime's error: a boxed [`ErrorKind`].
pub struct Error(Box<ErrorKind>);

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The detail of this error.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// Consumes the error, returning its detail.
    pub fn into_kind(self) -> ErrorKind {
        *self.0
    }

    /// The innermost error, under any `At` location wrappers.
    pub fn root(&self) -> &Error {
        match &*self.0 {
            ErrorKind::At { source, .. } => source.root(),
            _ => self,
        }
    }

    /// A type mismatch.
    #[cold]
    pub fn type_mismatch(expected: impl Into<String>, found: impl Into<String>) -> Self {
        ErrorKind::Type { expected: expected.into(), found: found.into() }.into()
    }

    /// An unacceptable value.
    #[cold]
    pub fn value(msg: impl Into<String>) -> Self {
        ErrorKind::Value(msg.into()).into()
    }

    /// An index out of range.
    #[cold]
    pub fn index(what: impl Into<String>, index: i64, len: usize) -> Self {
        ErrorKind::Index { what: what.into(), index, len }.into()
    }

    /// A wrong argument count.
    #[cold]
    pub fn arity(func: impl Into<String>, expected: impl Into<String>, got: usize) -> Self {
        ErrorKind::Arity { func: func.into(), expected: expected.into(), got }.into()
    }

    /// A failed allocation.
    #[cold]
    pub fn alloc(bytes: u128, reason: impl Into<String>) -> Self {
        ErrorKind::Alloc { bytes, reason: reason.into() }.into()
    }

    /// An arithmetic failure.
    #[cold]
    pub fn arithmetic(msg: impl Into<String>) -> Self {
        ErrorKind::Arithmetic(msg.into()).into()
    }

    /// The verification failure this error is, if it is one.
    pub fn as_invalid(&self) -> Option<&verify::VerifyError> {
        match &*self.0 {
            ErrorKind::Invalid(e) => Some(e),
            _ => None,
        }
    }

    /// A malformed binary file.
    #[cold]
    pub fn format(msg: impl Into<String>) -> Self {
        ErrorKind::Format(msg.into()).into()
    }

    /// Wraps a foreign error.
    #[cold]
    pub fn external(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        ErrorKind::External(Arc::new(err)).into()
    }

    /// Prefixes a value/type error's message with the function that raised it.
    #[cold]
    pub fn context(self, what: &str) -> Self {
        match *self.0 {
            ErrorKind::Value(m) => Error::value(format!("{what}: {m}")),
            ErrorKind::Type { expected, found } => Error::type_mismatch(format!("{expected} (in {what})"), found),
            other => other.into(),
        }
    }
}

impl From<ErrorKind> for Error {
    #[cold]
    fn from(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }
}

impl From<verify::VerifyError> for Error {
    #[cold]
    fn from(e: verify::VerifyError) -> Self {
        ErrorKind::Invalid(e).into()
    }
}

impl From<std::io::Error> for Error {
    #[cold]
    fn from(e: std::io::Error) -> Self {
        ErrorKind::Io(e).into()
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

/// `n` followed by `noun`, plural unless the count is 1: `counted(1, "argument")` is
/// "1 argument", `counted("at least 2", "input")` "at least 2 inputs".
pub fn counted(n: impl std::fmt::Display, noun: &str) -> String {
    let text = n.to_string();
    let one = text == "1" || text.ends_with(" 1");
    if one {
        return format!("{text} {noun}");
    }
    format!("{text} {}", plural(noun))
}

/// The plural of an English noun (phrase) relaxvm's messages count: "library" is "libraries".
fn plural(noun: &str) -> String {
    match noun.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{stem}ies"),
        _ => format!("{noun}s"),
    }
}

/// `noun`, plural unless `n` is 1 (for a list that follows: "packed function not found: f").
fn noun(n: usize, noun: &str) -> String {
    format!("{noun}{}", if n == 1 { "" } else { "s" })
}

/// The message of a panic payload (the thread pool's, which needs it without this crate).
pub use relaxvm_threads::panic_message;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_nouns_ending_in_y_take_ies() {
        assert_eq!(counted(3, "native library"), "3 native libraries");
        assert_eq!(counted(1, "native library"), "1 native library");
        assert_eq!(counted(2, "key"), "2 keys");
        assert_eq!(counted(2, "kernel"), "2 kernels");
    }

    #[test]
    fn error_is_one_pointer() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn at_names_function_instruction_and_location() {
        let e: Error = ErrorKind::At {
            func: "main".into(),
            pc: 3,
            instr: "call  f  in: %0  dst: %1".into(),
            location: Some("model.py:4:2".into()),
            source: Error::value("bad"),
        }
        .into();
        let s = e.to_string();
        assert!(s.contains("\"main\"") && s.contains("instruction 3") && s.contains("model.py:4:2"));
        assert_eq!(e.root().to_string(), "bad");
    }

    #[test]
    fn context_prefixes_message() {
        let e = Error::value("negative size").context("vm.builtin.alloc_storage");
        assert_eq!(e.to_string(), "vm.builtin.alloc_storage: negative size");
    }
}
