//! The verifier's one error type: what is wrong ([`VerifyErrorKind`]) and where (function,
//! instruction, operand, source location).

use crate::location::Location;
use std::fmt;

/// A program that fails verification, with where: the function (empty when the error concerns
/// the executable as a whole), the instruction within it, the operand and the instruction's
/// source location when known. The builder's check, the assembler and the loader all report
/// this type; each adds only its own context (the assembler a line and column, the loader the
/// file's path).
///
/// One pointer wide (the detail is boxed, as for [`crate::Error`]), so results stay small; the
/// fields of [`VerifyErrorDetail`] read through it (`e.func`, `e.pc`, `e.kind`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError(Box<VerifyErrorDetail>);

/// What a [`VerifyError`] holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyErrorDetail {
    /// Where the program came from, when known (a file's path, "the TVM program"), printed
    /// first.
    pub origin: Option<String>,
    /// The function's name; empty when the error is about the executable as a whole.
    pub func: String,
    /// The index of the instruction within the function, when the error is about one.
    pub pc: Option<usize>,
    /// The instruction as `as_text()` prints it (unknown function indices as `#N`).
    pub instr: Option<String>,
    /// The operand at fault, when the error is about one.
    pub slot: Option<Slot>,
    /// The instruction's source location, when it has one.
    pub location: Option<Location>,
    /// What is wrong.
    pub kind: VerifyErrorKind,
}

impl std::ops::Deref for VerifyError {
    type Target = VerifyErrorDetail;
    fn deref(&self) -> &VerifyErrorDetail {
        &self.0
    }
}

impl From<VerifyErrorDetail> for VerifyError {
    #[cold]
    fn from(detail: VerifyErrorDetail) -> Self {
        VerifyError(Box::new(detail))
    }
}

impl VerifyError {
    /// An error about the executable as a whole.
    #[cold]
    pub fn program(kind: VerifyErrorKind) -> Self {
        VerifyErrorDetail { origin: None, func: String::new(), pc: None, instr: None, slot: None, location: None, kind }
            .into()
    }

    /// The detail, owned.
    pub fn into_detail(self) -> VerifyErrorDetail {
        *self.0
    }

    /// The same error, saying it was found in `origin` (outermost first: a file, then a part
    /// of it).
    #[cold]
    pub fn within(mut self, origin: impl std::fmt::Display) -> Self {
        self.0.origin = Some(match self.0.origin.take() {
            Some(inner) => format!("{origin}: {inner}"),
            None => origin.to_string(),
        });
        self
    }

    /// An error about function `func` as a whole.
    #[cold]
    pub fn function(func: &str, kind: VerifyErrorKind) -> Self {
        let mut e = VerifyError::program(kind);
        e.0.func = func.to_string();
        e
    }
}

impl std::error::Error for VerifyError {}

impl fmt::Display for VerifyError {
    /// `function "main", instruction 2 (call  f  in: %5  dst: %2) at "m.py":3:1: reads %5, ...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(origin) = &self.origin {
            write!(f, "{origin}: ")?;
        }
        if self.func.is_empty() {
            return write!(f, "{}", self.kind);
        }
        write!(f, "function {:?}", self.func)?;
        if let Some(pc) = self.pc {
            write!(f, ", instruction {pc}")?;
        }
        if let Some(text) = &self.instr {
            write!(f, " ({text})")?;
        }
        if let Some(loc) = &self.location {
            write!(f, " at {loc}")?;
        }
        write!(f, ": {}", self.kind)
    }
}

/// The kinds of verification failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyErrorKind {
    // --- the executable as a whole
    /// A function-table entry without a name.
    #[error("a function-table entry has an empty name")]
    EmptyName,
    /// A name twice in the function table.
    #[error("function {0:?} appears twice in the function table")]
    DuplicateName(String),
    /// A location table whose length is not the number of instructions.
    #[error("{locations} locations for {instrs} instructions")]
    LocationCount {
        /// Entries in the location table.
        locations: usize,
        /// Instructions.
        instrs: usize,
    },
    /// The entry function is a packed function.
    #[error("the entry function {0:?} is a packed function")]
    EntryIsPacked(String),
    /// The entry function is not in the function table.
    #[error("the entry function {0:?} is not in the function table")]
    EntryMissing(String),
    /// A packed function with a signature.
    #[error("packed function {0:?} has a signature (only bytecode functions may)")]
    PackedWithSignature(String),
    /// Two functions whose instruction ranges overlap.
    #[error("functions {0:?} and {1:?} share instructions")]
    SharedInstructions(String, String),
    /// An instruction outside every bytecode function: no check covers it, and nothing may
    /// run or decode it.
    #[error("instruction {pc} belongs to no function (of {len} instructions, the functions cover {covered})")]
    OutsideFunctions {
        /// The first such instruction.
        pc: usize,
        /// The number of instructions.
        len: usize,
        /// How many the bytecode functions cover.
        covered: usize,
    },
    /// A constant the runtime cannot hold as given (e.g. a bool tensor byte other than 0 or 1).
    #[error("a constant: {0}")]
    Constant(String),
    /// A table larger than its 32-bit indices can address.
    #[error("more than 2^32 {0}")]
    TooLarge(&'static str),

    // --- one function's header
    /// A function without instructions.
    #[error("the function has no instructions (it must end in ret)")]
    Empty,
    /// An instruction range outside the instruction stream.
    #[error("instruction range {start}..{end} is empty or outside the {len} instructions")]
    InstrRange {
        /// First instruction.
        start: u32,
        /// One past the last.
        end: u32,
        /// Instructions in the executable.
        len: usize,
    },
    /// A register file larger than the limit.
    #[error("{regs} registers exceed the limit of {max}")]
    TooManyRegisters {
        /// Declared registers.
        regs: u32,
        /// `relaxvm::verify::MAX_REGISTERS`.
        max: u32,
    },
    /// More inputs than registers.
    #[error("{inputs} inputs do not fit in {regs} registers")]
    InputsExceedRegisters {
        /// Declared inputs.
        inputs: u32,
        /// Declared registers.
        regs: u32,
    },
    /// A signature whose parameter count is not the number of inputs.
    #[error("the signature has {params} parameter(s) for {inputs} inputs")]
    SignatureArity {
        /// Parameters in the signature.
        params: usize,
        /// Declared inputs.
        inputs: u32,
    },
    /// Parameter names that are not the signature's.
    #[error("parameter names ({names}) differ from the signature's ({expected})")]
    ParamNamesDiffer {
        /// The names given, comma-separated.
        names: String,
        /// The signature's, comma-separated.
        expected: String,
    },
    /// A malformed signature.
    #[error("signature: {0}")]
    Signature(String),
    /// A number of parameter names that is not the number of inputs.
    #[error("{names} parameter names for {inputs} inputs")]
    ParamNameCount {
        /// Names given.
        names: usize,
        /// Declared inputs.
        inputs: u32,
    },
    /// A name declared as a bytecode function that never received a body (builder).
    #[error("declared as a bytecode function but never defined with function()")]
    NeverDefined,

    // --- one instruction
    /// A register index outside the register file.
    #[error("register %{reg} is outside the register file of {size}")]
    RegisterOutside {
        /// The register.
        reg: u32,
        /// The register-file size.
        size: u32,
    },
    /// A function index outside the table.
    #[error("uses function index {index}, but the function table has {len}")]
    FuncOutOfRange {
        /// The index.
        index: u32,
        /// The table's size.
        len: usize,
    },
    /// A constant index outside the pool.
    #[error("constant c[{index}] is outside the pool of {len}")]
    ConstOutOfRange {
        /// The index.
        index: u32,
        /// The pool's size.
        len: usize,
    },
    /// A bytecode function called with the wrong number of arguments.
    #[error("calls {callee:?} with {}, but it takes {expected}", crate::error::counted(got, "argument"))]
    Arity {
        /// The bytecode function called.
        callee: String,
        /// Its number of inputs.
        expected: u32,
        /// The number of arguments passed.
        got: usize,
    },
    /// A jump whose target lies outside the function.
    #[error("jump by {offset} to instruction {target} leaves the function, which has {len} instruction(s)")]
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
    /// A register that is not an input and that no instruction writes is read (data flow).
    #[error(
        "reads %{reg}, which is neither an input (the function has {}) nor written by any instruction",
        crate::error::counted(num_inputs, "input")
    )]
    UndefinedRegister {
        /// The register.
        reg: u32,
        /// The function's number of inputs.
        num_inputs: u32,
    },
    /// A register is read where some path from the function's entry has not written it (data
    /// flow).
    #[error("reads %{reg}, which is not written on every path that reaches this instruction")]
    MaybeUnassigned {
        /// The register.
        reg: u32,
    },
}

impl VerifyErrorKind {
    /// A short stable name for the kind (`"maybe_unassigned"`, `"jump_outside"`...), as Python's
    /// `CheckError.kind` reports it.
    pub fn name(&self) -> &'static str {
        match self {
            VerifyErrorKind::EmptyName => "empty_name",
            VerifyErrorKind::DuplicateName(_) => "duplicate_name",
            VerifyErrorKind::LocationCount { .. } => "location_count",
            VerifyErrorKind::EntryIsPacked(_) => "entry_is_packed",
            VerifyErrorKind::EntryMissing(_) => "entry_missing",
            VerifyErrorKind::PackedWithSignature(_) => "packed_with_signature",
            VerifyErrorKind::SharedInstructions(..) => "shared_instructions",
            VerifyErrorKind::OutsideFunctions { .. } => "outside_functions",
            VerifyErrorKind::Constant(_) => "constant",
            VerifyErrorKind::TooLarge(_) => "too_large",
            VerifyErrorKind::Empty => "empty",
            VerifyErrorKind::InstrRange { .. } => "instr_range",
            VerifyErrorKind::TooManyRegisters { .. } => "too_many_registers",
            VerifyErrorKind::InputsExceedRegisters { .. } => "inputs_exceed_registers",
            VerifyErrorKind::SignatureArity { .. } => "signature_arity",
            VerifyErrorKind::ParamNamesDiffer { .. } => "param_names_differ",
            VerifyErrorKind::Signature(_) => "signature",
            VerifyErrorKind::ParamNameCount { .. } => "param_name_count",
            VerifyErrorKind::NeverDefined => "never_defined",
            VerifyErrorKind::RegisterOutside { .. } => "register_outside",
            VerifyErrorKind::FuncOutOfRange { .. } => "func_out_of_range",
            VerifyErrorKind::ConstOutOfRange { .. } => "const_out_of_range",
            VerifyErrorKind::Arity { .. } => "arity",
            VerifyErrorKind::JumpOutside { .. } => "jump_outside",
            VerifyErrorKind::RunsOffEnd => "runs_off_end",
            VerifyErrorKind::UndefinedRegister { .. } => "undefined_register",
            VerifyErrorKind::MaybeUnassigned { .. } => "maybe_unassigned",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_function_instruction_text_and_location() {
        let e: VerifyError = VerifyErrorDetail {
            origin: None,
            func: "main".into(),
            pc: Some(2),
            instr: Some("ret  %5".into()),
            slot: Some(Slot::Result),
            location: Some(Location::File { file: "m.py".into(), line: 3, col: 1 }),
            kind: VerifyErrorKind::UndefinedRegister { reg: 5, num_inputs: 2 },
        }
        .into();
        assert_eq!(
            e.to_string(),
            "function \"main\", instruction 2 (ret  %5) at \"m.py\":3:1: reads %5, which is neither an input (the function has 2 inputs) nor written by any instruction"
        );
        let e = VerifyError::function("g", VerifyErrorKind::NeverDefined);
        assert_eq!(e.to_string(), "function \"g\": declared as a bytecode function but never defined with function()");
        let e = VerifyError::program(VerifyErrorKind::EntryMissing("main".into()));
        assert_eq!(e.to_string(), "the entry function \"main\" is not in the function table");
        assert_eq!(e.kind.name(), "entry_missing");
        let e = e.within("the TVM program").within("m.so");
        assert_eq!(e.to_string(), "m.so: the TVM program: the entry function \"main\" is not in the function table");
    }
}

/// Names one operand of an instruction, so that an error about it can point at it (the
/// assembler turns a slot into a source column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The function a `call` calls.
    Callee,
    /// A `call` argument, by position.
    Arg(usize),
    /// A `call`'s destination register.
    Dst,
    /// The register `ret` returns.
    Result,
    /// The register `if` tests.
    Cond,
    /// The relative jump of `goto` or `if`.
    Offset,
}
