//! The instruction set, described once: four instructions, one of which calls a packed function.
//!
//! ```text
//! opcode  text form                          register transfer
//! 0 call  call  FUNC  in: ARG, ...  dst: %R   R[dst] := FUNC(ARG...)   (dst may be void)
//! 1 ret   ret  %R                            return R[r] to the caller
//! 2 goto  goto  OFFSET                       pc += OFFSET (may be negative: loops)
//! 3 if    if  %C  OFFSET                     if R[c] is non-zero: pc += 1, else pc += OFFSET
//! ```
//!
//! `FUNC` indexes the executable's function table, whose entries are bytecode functions of the
//! same executable (called in a new frame) or packed functions (resolved by name when a VM is
//! built). An `ARG` is one of the [`ArgKind`]s: a register `%N`, the void register `%void`
//! (passes null), the VM-state register `%vm`, an immediate `iN`, a constant `c[N]` or a
//! function `f[NAME]`.
//!
//! Everything else derives from the types here, by exhaustive `match` (no `_` arm), so adding an
//! instruction or an argument kind is a compile error in every place that must handle it:
//!
//! | consumer | where |
//! | --- | --- |
//! | interpreter's decoded form | `vm/src/code.rs` |
//! | verifier | `isa/src/verify/` (through [`Instruction::operands`], [`Instruction::successors`]) |
//! | binary encoder/decoder | `isa/src/format/instructions.rs` (opcode and kind numbers from here) |
//! | text printer / `as_python` | `isa/src/text.rs`, `isa/src/python_dump.rs` |
//! | assembler | `builder/src/asm/` (parses into `Instruction<Name>`, resolves with [`Instruction::try_map_funcs`]) |
//! | register renumbering, link, reachability | `builder/src/` (through [`Instruction::map_regs`], [`Instruction::map_indices`], [`Instruction::funcs`]) |
//! | TVM importer | `tvm/src/vmexec/code.rs` |
//!
//! Instructions are generic over how a function reference is held: a table index
//! ([`FuncIdx`], the default) in executables, a name while the assembler has not yet resolved
//! names.

/// Names one operand of an instruction (defined with the verifier's error, which points at one).
pub use relaxvm_core::error::verify::Slot;

/// A register index within a frame.
pub type RegIdx = u32;

/// An index into an executable's function table.
pub type FuncIdx = u32;

/// An index into an executable's constant pool.
pub type ConstIdx = u32;

/// The four instructions; the discriminants are the opcode numbers of the binary format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// `call`: calls a function-table entry.
    Call = 0,
    /// `ret`: returns a register.
    Ret = 1,
    /// `goto`: an unconditional relative jump.
    Goto = 2,
    /// `if`: a conditional relative jump.
    If = 3,
}

impl Opcode {
    /// Every opcode, in numeric order.
    pub const ALL: [Opcode; 4] = [Opcode::Call, Opcode::Ret, Opcode::Goto, Opcode::If];

    /// The mnemonic the text form uses.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Opcode::Call => "call",
            Opcode::Ret => "ret",
            Opcode::Goto => "goto",
            Opcode::If => "if",
        }
    }

    /// The opcode with mnemonic `s`.
    pub fn from_mnemonic(s: &str) -> Option<Opcode> {
        Opcode::ALL.into_iter().find(|op| op.mnemonic() == s)
    }

    /// The opcode numbered `n` in the binary format.
    pub fn from_u8(n: u8) -> Option<Opcode> {
        Opcode::ALL.get(usize::from(n)).copied()
    }
}

/// The kinds of call argument; the discriminants are the kind numbers of the binary format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ArgKind {
    /// A register of the current frame: `%N`.
    Reg = 0,
    /// The void register: `%void`.
    Void = 1,
    /// The VM-state register: `%vm`.
    VmState = 2,
    /// A signed 64-bit immediate: `iN`.
    Imm = 3,
    /// A constant-pool index: `c[N]`.
    Const = 4,
    /// A function-table entry passed as a value: `f[NAME]`.
    Func = 5,
}

impl ArgKind {
    /// Every kind, in numeric order.
    pub const ALL: [ArgKind; 6] =
        [ArgKind::Reg, ArgKind::Void, ArgKind::VmState, ArgKind::Imm, ArgKind::Const, ArgKind::Func];

    /// A short lower-case name (`reg`, `void`, `vm_state`, `imm`, `const`, `func`), as the Python
    /// builder's `Arg.kind` reports it.
    pub const fn name(self) -> &'static str {
        match self {
            ArgKind::Reg => "reg",
            ArgKind::Void => "void",
            ArgKind::VmState => "vm_state",
            ArgKind::Imm => "imm",
            ArgKind::Const => "const",
            ArgKind::Func => "func",
        }
    }

    /// The kind numbered `n` in the binary format.
    pub fn from_u8(n: u8) -> Option<ArgKind> {
        ArgKind::ALL.get(usize::from(n)).copied()
    }
}

/// One argument of a `call`; `F` is how a function reference is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg<F = FuncIdx> {
    /// A register of the current frame.
    Reg(RegIdx),
    /// The void register: reads as null.
    Void,
    /// The VM-state register: lets a builtin reach the VM.
    VmState,
    /// A signed 64-bit immediate.
    Imm(i64),
    /// An index into the constant pool.
    Const(ConstIdx),
    /// A function-table entry: passes the function as a value.
    Func(F),
}

impl<F> Arg<F> {
    /// Its kind.
    pub const fn kind(&self) -> ArgKind {
        match self {
            Arg::Reg(_) => ArgKind::Reg,
            Arg::Void => ArgKind::Void,
            Arg::VmState => ArgKind::VmState,
            Arg::Imm(_) => ArgKind::Imm,
            Arg::Const(_) => ArgKind::Const,
            Arg::Func(_) => ArgKind::Func,
        }
    }

    /// The register it reads, if it is one.
    pub const fn reg(&self) -> Option<RegIdx> {
        match self {
            Arg::Reg(r) => Some(*r),
            Arg::Void | Arg::VmState | Arg::Imm(_) | Arg::Const(_) | Arg::Func(_) => None,
        }
    }

    /// The same argument with its function reference converted by `f` (which may fail).
    pub fn try_map_func<G, E>(&self, f: &mut impl FnMut(&F) -> Result<G, E>) -> Result<Arg<G>, E> {
        Ok(match self {
            Arg::Reg(r) => Arg::Reg(*r),
            Arg::Void => Arg::Void,
            Arg::VmState => Arg::VmState,
            Arg::Imm(i) => Arg::Imm(*i),
            Arg::Const(c) => Arg::Const(*c),
            Arg::Func(g) => Arg::Func(f(g)?),
        })
    }
}

/// One instruction; `F` is how a function reference is held.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Instruction<F = FuncIdx> {
    /// Calls function-table entry `func` with `args`, writing the result to `dst` (or nowhere).
    Call {
        /// The function-table entry called.
        func: F,
        /// The arguments.
        args: Vec<Arg<F>>,
        /// The destination register; `None` is the void register.
        dst: Option<RegIdx>,
    },
    /// Returns the value of a register.
    Ret {
        /// The register holding the result.
        result: RegIdx,
    },
    /// Jumps by `offset` instructions relative to this one.
    Goto {
        /// The relative jump.
        offset: i64,
    },
    /// Goes on to the next instruction when `cond` is non-zero, else jumps by `false_offset`.
    If {
        /// The condition register.
        cond: RegIdx,
        /// The relative jump taken when the condition is zero.
        false_offset: i64,
    },
}

/// One operand, as [`Instruction::operands`] visits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand<'a, F> {
    /// A register read.
    Read(RegIdx),
    /// A register written.
    Write(RegIdx),
    /// A function reference (the callee or an `f[...]` argument).
    Func(&'a F),
    /// A constant-pool index.
    Const(ConstIdx),
    /// A relative jump.
    Jump(i64),
    /// An operand that names nothing: `%void`, `%vm`, an immediate.
    Plain,
}

impl<F> Instruction<F> {
    /// Its opcode.
    pub const fn opcode(&self) -> Opcode {
        match self {
            Instruction::Call { .. } => Opcode::Call,
            Instruction::Ret { .. } => Opcode::Ret,
            Instruction::Goto { .. } => Opcode::Goto,
            Instruction::If { .. } => Opcode::If,
        }
    }

    /// Calls `visit` on every operand with its slot, in text order (callee, arguments,
    /// destination). The one description of what each instruction reads, writes and refers to.
    pub fn operands<'a>(&'a self, mut visit: impl FnMut(Slot, Operand<'a, F>)) {
        match self {
            Instruction::Call { func, args, dst } => {
                visit(Slot::Callee, Operand::Func(func));
                for (i, a) in args.iter().enumerate() {
                    let op = match a {
                        Arg::Reg(r) => Operand::Read(*r),
                        Arg::Const(c) => Operand::Const(*c),
                        Arg::Func(f) => Operand::Func(f),
                        Arg::Void | Arg::VmState | Arg::Imm(_) => Operand::Plain,
                    };
                    visit(Slot::Arg(i), op);
                }
                if let Some(d) = dst {
                    visit(Slot::Dst, Operand::Write(*d));
                }
            }
            Instruction::Ret { result } => visit(Slot::Result, Operand::Read(*result)),
            Instruction::Goto { offset } => visit(Slot::Offset, Operand::Jump(*offset)),
            Instruction::If { cond, false_offset } => {
                visit(Slot::Cond, Operand::Read(*cond));
                visit(Slot::Offset, Operand::Jump(*false_offset));
            }
        }
    }

    /// The registers this instruction reads.
    pub fn reads(&self) -> Vec<RegIdx> {
        let mut out = Vec::new();
        self.operands(|_, op| {
            if let Operand::Read(r) = op {
                out.push(r);
            }
        });
        out
    }

    /// The register this instruction writes, if any.
    pub fn writes(&self) -> Option<RegIdx> {
        match self {
            Instruction::Call { dst, .. } => *dst,
            Instruction::Ret { .. } | Instruction::Goto { .. } | Instruction::If { .. } => None,
        }
    }

    /// The function references: the callee of a `call`, then its `f[...]` arguments.
    pub fn funcs(&self) -> Vec<&F> {
        let mut out = Vec::new();
        self.operands(|_, op| {
            if let Operand::Func(f) = op {
                out.push(f);
            }
        });
        out
    }

    /// The constant-pool indices its arguments use.
    pub fn constants(&self) -> Vec<ConstIdx> {
        let mut out = Vec::new();
        self.operands(|_, op| {
            if let Operand::Const(c) = op {
                out.push(c);
            }
        });
        out
    }

    /// True when control can go on to the next instruction (`call`, and `if` when its
    /// condition holds).
    pub const fn falls_through(&self) -> bool {
        match self {
            Instruction::Call { .. } | Instruction::If { .. } => true,
            Instruction::Ret { .. } | Instruction::Goto { .. } => false,
        }
    }

    /// The relative targets control can go to after this instruction (1 is fall-through);
    /// empty for `ret`.
    pub fn successors(&self) -> Vec<i64> {
        match self {
            Instruction::Call { .. } => vec![1],
            Instruction::Ret { .. } => vec![],
            Instruction::Goto { offset } => vec![*offset],
            Instruction::If { false_offset, .. } => vec![1, *false_offset],
        }
    }

    /// The same instruction with its function references converted by `f` (which may fail):
    /// how the assembler resolves names to indices.
    pub fn try_map_funcs<G, E>(&self, mut f: impl FnMut(Slot, &F) -> Result<G, E>) -> Result<Instruction<G>, E> {
        Ok(match self {
            Instruction::Call { func, args, dst } => {
                let func = f(Slot::Callee, func)?;
                let args = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| a.try_map_func(&mut |g| f(Slot::Arg(i), g)))
                    .collect::<Result<_, E>>()?;
                Instruction::Call { func, args, dst: *dst }
            }
            Instruction::Ret { result } => Instruction::Ret { result: *result },
            Instruction::Goto { offset } => Instruction::Goto { offset: *offset },
            Instruction::If { cond, false_offset } => Instruction::If { cond: *cond, false_offset: *false_offset },
        })
    }
}

impl<F: Clone> Instruction<F> {
    /// The same instruction with every register renamed by `f`.
    pub fn map_regs(&self, mut f: impl FnMut(RegIdx) -> RegIdx) -> Instruction<F> {
        match self {
            Instruction::Call { func, args, dst } => Instruction::Call {
                func: func.clone(),
                args: args.iter().map(|a| if let Arg::Reg(r) = a { Arg::Reg(f(*r)) } else { a.clone() }).collect(),
                dst: dst.map(&mut f),
            },
            Instruction::Ret { result } => Instruction::Ret { result: f(*result) },
            Instruction::Goto { offset } => Instruction::Goto { offset: *offset },
            Instruction::If { cond, false_offset } => Instruction::If { cond: f(*cond), false_offset: *false_offset },
        }
    }
}

impl Instruction {
    /// The same instruction with function indices renamed by `func` and constant indices by
    /// `constant` (in the callee and in `f[...]` and `c[...]` arguments): how linking and
    /// dead-function removal renumber tables.
    pub fn map_indices(
        &self,
        func: impl Fn(FuncIdx) -> FuncIdx,
        constant: impl Fn(ConstIdx) -> ConstIdx,
    ) -> Instruction {
        match self {
            Instruction::Call { func: callee, args, dst } => Instruction::Call {
                func: func(*callee),
                args: args
                    .iter()
                    .map(|a| match *a {
                        Arg::Func(f) => Arg::Func(func(f)),
                        Arg::Const(c) => Arg::Const(constant(c)),
                        Arg::Reg(_) | Arg::Void | Arg::VmState | Arg::Imm(_) => *a,
                    })
                    .collect(),
                dst: *dst,
            },
            Instruction::Ret { .. } | Instruction::Goto { .. } | Instruction::If { .. } => self.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_successors() {
        let call: Instruction =
            Instruction::Call { func: 0, args: vec![Arg::Reg(1), Arg::Imm(3), Arg::Reg(2)], dst: Some(4) };
        assert_eq!(call.reads(), vec![1, 2]);
        assert_eq!(call.writes(), Some(4));
        assert_eq!(call.successors(), vec![1]);
        assert_eq!(Instruction::<u32>::Ret { result: 0 }.successors(), Vec::<i64>::new());
        assert_eq!(Instruction::<u32>::If { cond: 0, false_offset: 3 }.successors(), vec![1, 3]);
        assert_eq!(Instruction::<u32>::Goto { offset: -2 }.reads(), Vec::<u32>::new());
        let renamed = call.map_regs(|r| r + 10);
        assert_eq!(renamed.reads(), vec![11, 12]);
        assert_eq!(renamed.writes(), Some(14));
    }

    #[test]
    fn operands_visit_every_slot_in_text_order() {
        let call: Instruction =
            Instruction::Call { func: 7, args: vec![Arg::Const(2), Arg::Func(3), Arg::VmState], dst: Some(1) };
        let mut seen = Vec::new();
        call.operands(|slot, op| seen.push((slot, op)));
        assert_eq!(
            seen,
            vec![
                (Slot::Callee, Operand::Func(&7)),
                (Slot::Arg(0), Operand::Const(2)),
                (Slot::Arg(1), Operand::Func(&3)),
                (Slot::Arg(2), Operand::Plain),
                (Slot::Dst, Operand::Write(1)),
            ]
        );
        assert_eq!(call.funcs(), vec![&7, &3]);
        assert_eq!(call.constants(), vec![2]);
        let mut seen = Vec::new();
        Instruction::<u32>::If { cond: 4, false_offset: -1 }.operands(|slot, op| seen.push((slot, op)));
        assert_eq!(seen, vec![(Slot::Cond, Operand::Read(4)), (Slot::Offset, Operand::Jump(-1))]);
    }

    #[test]
    fn names_resolve_to_indices() {
        let named: Instruction<String> =
            Instruction::Call { func: "g".into(), args: vec![Arg::Func("h".into()), Arg::Reg(0)], dst: None };
        let table = ["g", "h"];
        let resolved =
            named.try_map_funcs(|_, n| table.iter().position(|t| t == n).map(|i| i as u32).ok_or(n.clone())).unwrap();
        assert_eq!(resolved, Instruction::Call { func: 0, args: vec![Arg::Func(1), Arg::Reg(0)], dst: None });
        let unknown: Instruction<String> =
            Instruction::Call { func: "g".into(), args: vec![Arg::Func("x".into())], dst: None };
        let err = unknown.try_map_funcs(|slot, n| if n == "g" { Ok(0) } else { Err((slot, n.clone())) }).unwrap_err();
        assert_eq!(err, (Slot::Arg(0), "x".to_string()));
    }

    #[test]
    fn numbers_and_mnemonics_round_trip() {
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_u8(op as u8), Some(op));
            assert_eq!(Opcode::from_mnemonic(op.mnemonic()), Some(op));
        }
        assert_eq!(Opcode::from_u8(4), None);
        for k in ArgKind::ALL {
            assert_eq!(ArgKind::from_u8(k as u8), Some(k));
        }
        assert_eq!(ArgKind::from_u8(6), None);
        let renumbered: Instruction =
            Instruction::Call { func: 1, args: vec![Arg::Func(2), Arg::Const(0), Arg::Reg(5)], dst: None }
                .map_indices(|f| f + 10, |c| c + 20);
        assert_eq!(
            renumbered,
            Instruction::Call { func: 11, args: vec![Arg::Func(12), Arg::Const(20), Arg::Reg(5)], dst: None }
        );
    }
}
