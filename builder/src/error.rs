//! The builder's errors: misuse of the builder API, and check failures that name the function
//! and instruction at fault.

use relaxvm::FuncKind;
use std::fmt;

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
    #[error("function {func:?} has {num_inputs} input(s) but {got} parameter name(s)")]
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
        "a {0} cannot be a constant: constants are null, ints, floats, bools, strings, shapes, dtypes, devices and tensors"
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

/// A function that fails the check, with the instruction at fault when there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct CheckError {
    /// The function's name.
    pub func: String,
    /// The index of the instruction within the function, when the error is about one.
    pub pc: Option<usize>,
    /// The instruction as `as_text()` prints it.
    pub instr: Option<String>,
    /// What is wrong.
    pub kind: CheckErrorKind,
}

impl fmt::Display for CheckError {
    /// `function "main", instruction 2 (call  f  in: %5  dst: %2): reads %5, which ...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "function {:?}", self.func)?;
        if let Some(pc) = self.pc {
            write!(f, ", instruction {pc}")?;
        }
        if let Some(text) = &self.instr {
            write!(f, " ({text})")?;
        }
        write!(f, ": {}", self.kind)
    }
}

/// The kinds of check failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckErrorKind {
    /// A register that is not an input and that no instruction writes is read.
    #[error("reads %{reg}, which is neither an input (the function has {num_inputs} input(s)) nor written by any instruction")]
    UndefinedRegister {
        /// The register.
        reg: u32,
        /// The function's number of inputs.
        num_inputs: u32,
    },
    /// A register is read where some path from the function's entry has not written it.
    #[error("reads %{reg}, which is not written on every path that reaches this instruction")]
    MaybeUnassigned {
        /// The register.
        reg: u32,
    },
    /// A jump whose target lies outside the function.
    #[error("jumps by {offset} to instruction {target}, outside the function's {len} instruction(s)")]
    JumpOutside {
        /// The relative jump.
        offset: i64,
        /// The instruction it would reach (relative to the function's start).
        target: i128,
        /// The number of instructions in the function.
        len: usize,
    },
    /// Control can fall through past the last instruction.
    #[error("control runs off the end of the function (the last instruction must be ret or goto)")]
    RunsOffEnd,
    /// A function without instructions.
    #[error("the function has no instructions (it must end in ret)")]
    Empty,
    /// A constant index outside the pool.
    #[error("uses constant c[{index}], but the constant pool has {len}")]
    ConstOutOfRange {
        /// The index.
        index: u32,
        /// The pool's size.
        len: usize,
    },
    /// A function index outside the table.
    #[error("uses function index {index}, but the function table has {len}")]
    FuncOutOfRange {
        /// The index.
        index: u32,
        /// The table's size.
        len: usize,
    },
    /// A bytecode function called with the wrong number of arguments.
    #[error("calls {callee:?} with {got} argument(s), but it takes {expected}")]
    Arity {
        /// The bytecode function called.
        callee: String,
        /// Its number of inputs.
        expected: u32,
        /// The number of arguments passed.
        got: usize,
    },
    /// A name declared as a bytecode function that never received a body.
    #[error("declared as a bytecode function but never defined with function()")]
    NeverDefined,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_error_names_function_instruction_and_text() {
        let e = CheckError {
            func: "main".into(),
            pc: Some(2),
            instr: Some("ret  %5".into()),
            kind: CheckErrorKind::UndefinedRegister { reg: 5, num_inputs: 2 },
        };
        assert_eq!(
            e.to_string(),
            "function \"main\", instruction 2 (ret  %5): reads %5, which is neither an input (the function has 2 input(s)) nor written by any instruction"
        );
        let e = CheckError { func: "g".into(), pc: None, instr: None, kind: CheckErrorKind::NeverDefined };
        assert_eq!(e.to_string(), "function \"g\": declared as a bytecode function but never defined with function()");
    }

    #[test]
    fn build_error_wraps_check_error_transparently() {
        let c = CheckError { func: "f".into(), pc: None, instr: None, kind: CheckErrorKind::Empty };
        let b: BuildError = c.clone().into();
        assert_eq!(b.to_string(), c.to_string());
    }
}
