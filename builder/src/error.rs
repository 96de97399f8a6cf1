//! The builder's errors: misuse of the builder API, and check failures that name the function
//! and instruction at fault.

use relaxvm::FuncKind;

/// Everything [`ExecBuilder`](crate::ExecBuilder) can refuse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// An `emit_*` (or `end_function`) call outside a function scope.
    #[error("{op} needs an open function: call function() first")]
    NoOpenFunction {
        /// The method that was called.
        op: &'static str,
    },
    /// `function()` while another function is open.
    #[error("cannot open function {requested:?} while function {open:?} is open: call end_function() first")]
    FunctionAlreadyOpen {
        /// The function that is open.
        open: String,
        /// The function that was asked for.
        requested: String,
    },
    /// `get()` while a function is open.
    #[error("function {0:?} is still open: call end_function() before get()")]
    FunctionStillOpen(String),
    /// `function()` with a name that already has a body.
    #[error("function {0:?} is already defined")]
    DuplicateFunction(String),
    /// A name declared or defined as one kind of function and then as the other.
    #[error("function {name:?} is already a {} function and cannot be made a {} function", existing.name(), requested.name())]
    KindConflict {
        /// The function.
        name: String,
        /// What it already is.
        existing: FuncKind,
        /// What it was asked to become.
        requested: FuncKind,
    },
    /// An empty function name.
    #[error("function names must not be empty")]
    EmptyName,
    /// Parameter names that do not match the number of inputs.
    #[error(
        "function {func:?} has {} but {}",
        relaxvm::error::counted(num_inputs, "input"),
        relaxvm::error::counted(got, "parameter name")
    )]
    ParamCount {
        /// The function.
        func: String,
        /// Its number of inputs.
        num_inputs: u32,
        /// How many names were given.
        got: usize,
    },
    /// A parameter name given twice.
    #[error("function {func:?} names two parameters {param:?}")]
    DuplicateParam {
        /// The function.
        func: String,
        /// The repeated name.
        param: String,
    },
    /// More inputs than a register file may hold.
    #[error("function {func:?} has {num_inputs} inputs, more than the limit of {max} registers")]
    TooManyInputs {
        /// The function.
        func: String,
        /// The number asked for.
        num_inputs: u32,
        /// The register-file limit.
        max: u32,
    },
    /// A value that cannot live in the constant pool.
    #[error(
        "a {0} cannot be a constant: constants are null, ints, floats, bools, strings, shapes, dtypes, devices, tensors and tuples of these nested at most 32 deep"
    )]
    UnsupportedConstant(&'static str),
    /// A signature that does not fit its function or is malformed.
    #[error("function {func:?}: {reason}")]
    InvalidSignature {
        /// The function.
        func: String,
        /// What is wrong, with what was expected and found.
        reason: String,
    },
    /// An entry function (`set_entry`) that is not a bytecode function when the executable is
    /// built.
    #[error("the entry function {0:?} is not a defined bytecode function: define it with function()")]
    EntryNotDefined(String),
    /// `import_executable` while a function scope is open.
    #[error("cannot import an executable while function {0:?} is open: call end_function() first")]
    ImportWhileOpen(String),
    /// `import_executable` of a function that the builder defines too.
    #[error("function {0:?} is defined both in the builder and in the imported executable")]
    ImportConflict(String),
    /// A check failure (see [`CheckError`]).
    #[error(transparent)]
    Check(#[from] CheckError),
    /// The executable failed the VM's structural verification. The builder's own check runs
    /// first, so this signals a limit (e.g. the register-file size) rather than a mistake it knows.
    #[error(transparent)]
    Invalid(relaxvm::Error),
}

/// A function that fails the check: the VM verifier's error, naming the function, the
/// instruction (index and text), the operand and the source location.
pub type CheckError = relaxvm::verify::VerifyError;

/// The kinds of check failure: the VM verifier's.
pub type CheckErrorKind = relaxvm::verify::VerifyErrorKind;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_error_names_function_instruction_and_text() {
        let e: CheckError = relaxvm::verify::VerifyErrorDetail {
            origin: None,
            func: "main".into(),
            pc: Some(2),
            instr: Some("ret  %5".into()),
            slot: Some(relaxvm::bytecode::Slot::Result),
            location: None,
            kind: CheckErrorKind::UndefinedRegister { reg: 5, num_inputs: 2 },
        }
        .into();
        assert_eq!(
            e.to_string(),
            "function \"main\", instruction 2 (ret  %5): reads %5, which is neither an input (the function has 2 inputs) nor written by any instruction"
        );
        let e = CheckError::function("g", CheckErrorKind::NeverDefined);
        assert_eq!(e.to_string(), "function \"g\": declared as a bytecode function but never defined with function()");
    }

    #[test]
    fn build_error_wraps_check_error_transparently() {
        let c = CheckError::function("f", CheckErrorKind::Empty);
        let b: BuildError = c.clone().into();
        assert_eq!(b.to_string(), c.to_string());
    }
}
