//! The interpreter's decoded form of an executable: packed functions resolved to direct
//! references, immediates and constants materialised as values, jump targets made absolute.

use crate::bytecode::{Arg, Instruction};
use crate::error::{Error, ErrorKind, Result};
use crate::executable::{Executable, FuncKind};
use crate::int_op::IntOp;
use crate::packed::PackedFunc;
use crate::registry::Registry;
use crate::value::{Callable, Closure, Value};
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// Marks a `call` whose result is discarded.
pub(crate) const VOID: u32 = u32::MAX;

/// Where an operand is read: a register of the frame (a register index), or, with this bit
/// set, a value of [`DecodedProgram::consts`] fixed at decode time (immediates, constants, functions,
/// void and the VM state). One form for both lets a handler read any operand with one test
/// and no enum in the way.
pub(crate) const CONST_BIT: u32 = 1 << 31;

/// An operand: a register index, or [`CONST_BIT`] plus an index into [`DecodedProgram::consts`].
pub(crate) type Src = u32;

/// An operand that is a register (never a constant): the specialised int ops, [`Op::Move`] and
/// [`Op::CallSelect1`] take these, so that reading one tests no [`CONST_BIT`]; the general forms
/// of the same calls take any [`Src`]. It holds the register's byte offset in its frame (its
/// index times the size of a value), so that the hot ops reach a register with one add and no
/// shift.
#[derive(Clone, Copy)]
pub(crate) struct Reg(u32);

impl Reg {
    /// Register `s`, when `s` is a register (not a [`CONST_BIT`] operand) whose byte offset fits
    /// (every register of a verified function does: `MAX_REGISTERS` is 2^20).
    pub(crate) fn new(s: Src) -> Option<Reg> {
        if s & CONST_BIT != 0 {
            return None;
        }
        s.checked_mul(std::mem::size_of::<Value>() as u32).map(Reg)
    }

    /// The register's index in its frame.
    pub(crate) fn index(self) -> u32 {
        self.0 / std::mem::size_of::<Value>() as u32
    }

    /// The register's byte offset in its frame.
    #[inline(always)]
    pub(crate) fn offset(self) -> usize {
        self.0 as usize
    }
}

/// A decoded instruction; indices were proven in range by the verifier.
///
/// An op is 16 bytes (four to a cache line): a straight line of 100,000 calls is 1.6 MB of ops
/// the loop streams through, not 3.2 MB. What does not fit lies beside the ops ([`CallSite`],
/// [`BinarySite`], [`SelectSite`]); the int ops carry no function (their builtin, for anything
/// but two ints, is found from the instruction when needed: a cold path), and a fused int op
/// finds its jump target in the `if` or `goto` after it, which it was fused with and which
/// keeps its own op.
#[derive(Clone, Copy)]
pub(crate) enum Op {
    /// A call of a packed function (`site` indexes [`DecodedProgram::sites`]).
    CallPacked {
        site: u32,
        dst: u32,
    },
    /// A call of a two-argument plain function (`site` indexes
    /// [`DecodedProgram::binary_sites`]).
    CallBinary {
        site: u32,
    },
    /// A call of a two-int builtin ([`IntOp`]), computed inline when both operands are ints
    /// and by calling the builtin otherwise; its result is kept (`dst` is a register).
    IntBinary {
        op: IntOp,
        a: Src,
        b: Src,
        dst: u32,
    },
    /// [`Op::IntBinary`] fused with the `if` that follows it and tests its result: both run
    /// here, with one dispatch (the `if` keeps its own op for jumps that land on it, and
    /// holds the jump's target).
    IntBranch {
        op: IntOp,
        a: Src,
        b: Src,
        dst: u32,
    },
    /// [`Op::IntBinary`] fused with the `goto` that follows it (a loop's step and back edge;
    /// the `goto` holds the target).
    IntJump {
        op: IntOp,
        a: Src,
        b: Src,
        dst: u32,
    },
    /// [`Op::IntBinary`] of [`IntOp::Add`] on two registers, the most common: each of these
    /// four forms has its operation fixed by the op itself, so running it tests no operation
    /// code (`int_inline`, inlined with a constant operation, folds to the one case), and its
    /// operands are registers, so reading them tests no [`CONST_BIT`].
    IntAdd {
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    /// [`Op::IntBranch`] of [`IntOp::Lt`] on two registers (a loop's test).
    IntLtBranch {
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    /// [`Op::IntJump`] of [`IntOp::Add`] on two registers (a loop's step).
    IntAddJump {
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    /// [`Op::IntJump`] of a register plus an int fixed at load (that fits 32 bits), into that
    /// same register (a loop's `i += 1`): no operand to look up and test, one register to
    /// reach. Its jump is backward (a loop's back edge: the target is at or before the
    /// `goto`), so it always counts a step, with no test of the direction; a forward one keeps
    /// the general [`Op::IntJump`]. `to` is the target's byte offset from the first op (its
    /// index times the size of an op), so that finding it takes no multiply.
    IntAddJumpImm {
        a: Reg,
        imm: i32,
        to: u32,
    },
    /// A call of a packed function that selects its result from its arguments (`site` indexes
    /// [`DecodedProgram::sites`], as for [`Op::CallPacked`]).
    CallSelect {
        site: u32,
        dst: u32,
    },
    /// [`Op::CallSelect`] with one argument, a register, which is passed in place (no argument
    /// list), and a destination register (`site` indexes [`DecodedProgram::select_sites`]).
    CallSelect1 {
        site: u32,
        a: Reg,
        dst: Reg,
    },
    /// A call on one register of a function that returns its argument itself
    /// ([`PackedFunc::returning_its_argument`], `vm.builtin.copy`), into a register: a move.
    Move {
        a: Reg,
        dst: Reg,
    },
    /// A call of a bytecode function of this executable (`site` indexes
    /// [`DecodedProgram::sites`]; its `func` is the function-table entry).
    CallBytecode {
        site: u32,
        dst: u32,
    },
    Ret {
        result: u32,
    },
    Goto {
        target: u32,
    },
    If {
        cond: u32,
        false_target: u32,
    },
}

// Four ops to a cache line: the loop reads one per dispatch.
const _: () = assert!(std::mem::size_of::<Op>() == 16);

/// What a function-table entry resolves to.
pub(crate) enum Callee {
    Bytecode { start: u32, regs: u32 },
    Packed(PackedFunc),
}

/// An executable decoded for the interpreter ([`DecodedProgram::decode`]): the ops of every
/// function, their operands and the values fixed at load, and the functions packed calls call.
pub(crate) struct DecodedProgram {
    pub ops: Vec<Op>,
    /// The operand lists of the calls that take one ([`CallSite`]).
    pub sites: Vec<CallSite>,
    /// The functions and operands of [`Op::CallBinary`]s.
    pub binary_sites: Vec<BinarySite>,
    /// The functions of [`Op::CallSelect1`]s.
    pub select_sites: Vec<SelectSite>,
    /// The operands of calls that take a list of them, in runs the ops index.
    pub args: Vec<Src>,
    /// `args` as an argument list ready to copy: each operand fixed at load as a bitwise copy
    /// of its value in `consts` (never dropped: `consts` owns it), each register as null, to
    /// be patched by the call (see [`DecodedProgram::prepare_args`]).
    pub arg_values: Vec<ManuallyDrop<Value>>,
    /// Per packed call, the registers to patch into its list: (position in the list, register).
    pub patches: Vec<(u32, u32)>,
    /// The values operands with [`CONST_BIT`] read.
    pub consts: Vec<Value>,
    pub callees: Vec<Callee>,
    /// The function each packed call op calls (its `func`): its callee's, or for a
    /// [`Op::CallPacked`] that callee specialised to the call's fixed operands
    /// ([`PackedFunc::specialize`]).
    pub call_fns: Vec<PackedFunc>,
    /// Per function-table entry, the index in [`DecodedProgram::call_fns`] of its unspecialised entry,
    /// which every call site that calls it as it is shares (`u32::MAX` before the first): one
    /// entry per function, not per site, keeps the entries a long program reads in cache
    /// (100,000 `vm.builtin.copy` calls read 8.8 MB of copies at 4x the time per call).
    shared_fns: Vec<u32>,
    /// Each function-table entry as a function value (for `f[...]` arguments and instruments).
    pub func_values: Vec<Value>,
    /// The name each bytecode function's value holds (the VM recognises its own by pointer).
    pub names: Vec<Option<Arc<str>>>,
}

impl DecodedProgram {
    /// Decodes `exe`, resolving packed functions from `overrides` then the process-wide registry.
    pub fn decode(exe: &Arc<Executable>, overrides: &Registry) -> Result<DecodedProgram> {
        let global = crate::registry::global();
        // What this executable's function values name as their program (see `Callable::Bytecode`).
        let program: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(exe) as _;
        let program = Arc::downgrade(&program);
        let mut missing = Vec::new();
        let mut callees = Vec::with_capacity(exe.funcs().len());
        let mut func_values = Vec::with_capacity(exe.funcs().len());
        let mut names = Vec::with_capacity(exe.funcs().len());
        for (i, f) in exe.funcs().iter().enumerate() {
            let (callee, callable) = match f.kind {
                FuncKind::Bytecode => (
                    Callee::Bytecode { start: f.start_instr, regs: f.register_file_size },
                    Callable::Bytecode {
                        index: i as u32,
                        name: f.name.as_str().into(),
                        program: Some(program.clone()),
                    },
                ),
                FuncKind::Packed => match overrides.get(&f.name).cloned().or_else(|| resolve(exe, &global, &f.name)) {
                    Some(p) => (Callee::Packed(p.clone()), Callable::Packed(p)),
                    None => {
                        missing.push(with_call_site(exe, i as u32, &f.name));
                        continue;
                    }
                },
            };
            names.push(match &callable {
                Callable::Bytecode { name, .. } => Some(Arc::clone(name)),
                Callable::Packed(_) => None,
            });
            callees.push(callee);
            func_values.push(Value::Func(Arc::new(Closure { callable, captured: Vec::new() })));
        }
        if !missing.is_empty() {
            if let Some(lib) = exe.libraries().iter().find(|l| l.loaded.is_none()) {
                return Err(ErrorKind::LibraryNotLoaded { path: lib.reference.path.clone(), missing }.into());
            }
            return Err(ErrorKind::MissingFunctions(missing).into());
        }
        let mut code = DecodedProgram {
            ops: Vec::new(),
            sites: Vec::new(),
            binary_sites: Vec::new(),
            select_sites: Vec::new(),
            args: Vec::new(),
            arg_values: Vec::new(),
            patches: Vec::new(),
            consts: Vec::new(),
            callees,
            call_fns: Vec::new(),
            shared_fns: vec![u32::MAX; exe.funcs().len()],
            func_values,
            names,
        };
        code.ops =
            exe.instrs().iter().enumerate().map(|(pc, instr)| code.decode_op(exe, pc, instr)).collect::<Result<_>>()?;
        code.fuse_pairs();
        Ok(code)
    }
}

/// `name` with where it is first called, e.g. `matmul (called by "main" at instruction 8)`, so
/// that a missing builtin or kernel points at the program's use of it.
fn with_call_site(exe: &Executable, index: u32, name: &str) -> String {
    let site = exe.funcs().iter().filter(|f| f.kind == FuncKind::Bytecode).find_map(|f| {
        exe.instrs()[f.instr_range()]
            .iter()
            .position(|ins| matches!(ins, Instruction::Call { func, .. } if *func == index))
            .map(|pc| (f, pc))
    });
    match site {
        Some((f, pc)) => format!("{name} (called by {:?} at instruction {pc})", f.name),
        None => name.to_string(),
    }
}

/// How many of `srcs` are registers.
fn count_regs(srcs: &[Src]) -> u32 {
    srcs.iter().filter(|s| *s & CONST_BIT == 0).count() as u32
}

/// `name` from the executable's native libraries (TVM resolves a module's imports first), then
/// from the process-wide registry.
fn resolve(exe: &Executable, global: &Registry, name: &str) -> Option<PackedFunc> {
    exe.libraries()
        .iter()
        .filter_map(|l| l.loaded.as_ref())
        .find_map(|l| l.get_function(name))
        .or_else(|| global.get(name).cloned())
}

impl DecodedProgram {
    /// The operand `a` of a call as a [`Src`].
    fn src(&mut self, exe: &Executable, a: &Arg) -> Result<Src> {
        let value = match *a {
            Arg::Reg(r) if r < CONST_BIT => return Ok(r),
            Arg::Reg(r) => {
                return Err(Error::value(format!(
                    "register %{r} is beyond the {CONST_BIT} registers a function may have"
                )))
            }
            Arg::Void => Value::Null,
            Arg::VmState => Value::VmState,
            Arg::Imm(i) => Value::Int(i),
            Arg::Const(c) => exe.constants()[c as usize].clone(),
            Arg::Func(f) => self.func_values[f as usize].clone(),
        };
        let index = u32::try_from(self.consts.len()).ok().filter(|i| *i < CONST_BIT);
        let index =
            index.ok_or_else(|| Error::value(format!("more than {CONST_BIT} operands that are not registers")))?;
        self.consts.push(value);
        Ok(CONST_BIT | index)
    }

    fn decode_op(&mut self, exe: &Executable, pc: usize, instr: &Instruction) -> Result<Op> {
        let rel = |off: i64| (pc as i64 + off) as u32;
        Ok(match instr {
            Instruction::Call { func, args, dst } => {
                let srcs = args.iter().map(|a| self.src(exe, a)).collect::<Result<Vec<Src>>>()?;
                let (nargs, dst, func) = (srcs.len() as u32, dst.unwrap_or(VOID), *func);
                let start = self.args.len() as u32;
                let patches = self.patches.len() as u32;
                let packed = match &self.callees[func as usize] {
                    Callee::Bytecode { .. } => None,
                    Callee::Packed(p) => Some(p.clone()),
                };
                // The operands a call's argument list holds: all, unless its specialised
                // function reads only the first few.
                let mut passed = srcs.len();
                let op = match packed {
                    None => Op::CallBytecode { site: self.push_site(func, start, nargs, (0, 0)), dst },
                    Some(p) => match (p.as_binary(), p.as_int_op(), p.as_select(), &srcs[..]) {
                        (Some(_), Some(op), _, &[a, b]) if dst != VOID => Op::IntBinary { op, a, b, dst },
                        (Some(f), _, _, &[a, b]) => {
                            self.binary_sites.push(BinarySite { f, a, b, dst });
                            Op::CallBinary { site: (self.binary_sites.len() - 1) as u32 }
                        }
                        (_, _, Some(_), &[a]) if p.returns_its_argument() && dst != VOID => {
                            match (Reg::new(a), Reg::new(dst)) {
                                (Some(a), Some(dst)) => Op::Move { a, dst },
                                _ => self.select_op(func, p, start, nargs, dst, &srcs),
                            }
                        }
                        (_, _, Some(f), &[a]) if dst != VOID => match (Reg::new(a), Reg::new(dst)) {
                            (Some(a), Some(dst)) => {
                                let func = self.shared_fn(func, p);
                                self.select_sites.push(SelectSite { f, func });
                                Op::CallSelect1 { site: (self.select_sites.len() - 1) as u32, a, dst }
                            }
                            _ => self.select_op(func, p, start, nargs, dst, &srcs),
                        },
                        (_, _, Some(_), _) => self.select_op(func, p, start, nargs, dst, &srcs),
                        _ => {
                            let func = match self.specialized(&p, &srcs) {
                                Some(special) => {
                                    passed = special.reads_first().map_or(passed, |n| n.min(passed));
                                    self.push_fn(special)
                                }
                                None => self.shared_fn(func, p),
                            };
                            let npatches = count_regs(&srcs[..passed]);
                            let site = self.push_site(func, start, passed as u32, (patches, npatches));
                            Op::CallPacked { site, dst }
                        }
                    },
                };
                if matches!(op, Op::CallSelect { .. } | Op::CallPacked { .. }) {
                    for (pos, &s) in srcs[..passed].iter().enumerate() {
                        if s & CONST_BIT == 0 {
                            self.patches.push((pos as u32, s));
                        }
                    }
                }
                if matches!(op, Op::CallBytecode { .. } | Op::CallSelect { .. } | Op::CallPacked { .. }) {
                    for &s in &srcs {
                        let v = if s & CONST_BIT == 0 {
                            Value::Null
                        } else {
                            // SAFETY: a bitwise copy of a value `consts` owns and keeps for the
                            // life of this `DecodedProgram` (it only grows; its values never move out or
                            // change); the copy is never dropped (ManuallyDrop) and is only read.
                            unsafe { std::ptr::read(&self.consts[(s & !CONST_BIT) as usize]) }
                        };
                        self.arg_values.push(ManuallyDrop::new(v));
                    }
                    self.args.extend(srcs);
                }
                op
            }
            Instruction::Ret { result } => Op::Ret { result: *result },
            Instruction::Goto { offset } => Op::Goto { target: rel(*offset) },
            Instruction::If { cond, false_offset } => Op::If { cond: *cond, false_target: rel(*false_offset) },
        })
    }

    /// The general [`Op::CallSelect`] of a call of `p` (function-table entry `func`) with
    /// operands `srcs`, stored at `args`, into `dst`.
    fn select_op(&mut self, func: u32, p: PackedFunc, args: u32, nargs: u32, dst: u32, srcs: &[Src]) -> Op {
        let patches = self.patches.len() as u32;
        let npatches = count_regs(srcs);
        let func = self.shared_fn(func, p);
        Op::CallSelect { site: self.push_site(func, args, nargs, (patches, npatches)), dst }
    }

    /// Adds a call's [`CallSite`]; its index in [`DecodedProgram::sites`].
    fn push_site(&mut self, func: u32, args: u32, nargs: u32, (patches, npatches): (u32, u32)) -> u32 {
        self.sites.push(CallSite { func, args, nargs, patches, npatches });
        (self.sites.len() - 1) as u32
    }

    /// `p` specialised to a call with operands `srcs` (those fixed at load known), when it can
    /// be.
    fn specialized(&self, p: &PackedFunc, srcs: &[Src]) -> Option<PackedFunc> {
        let fixed: Vec<Option<&Value>> =
            srcs.iter().map(|&s| (s & CONST_BIT != 0).then(|| &self.consts[(s & !CONST_BIT) as usize])).collect();
        p.specialize(&fixed)
    }

    /// The index in [`DecodedProgram::call_fns`] of function-table entry `callee`'s unspecialised
    /// function `p`, added at its first call site and shared by the others.
    fn shared_fn(&mut self, callee: u32, p: PackedFunc) -> u32 {
        let slot = &mut self.shared_fns[callee as usize];
        if *slot == u32::MAX {
            self.call_fns.push(p);
            *slot = (self.call_fns.len() - 1) as u32;
        }
        *slot
    }

    /// Adds the function a packed call calls to [`DecodedProgram::call_fns`]; its index there.
    fn push_fn(&mut self, f: PackedFunc) -> u32 {
        self.call_fns.push(f);
        (self.call_fns.len() - 1) as u32
    }
}

mod fuse;
mod sites;

pub(crate) use sites::{BinarySite, CallSite, SelectSite};
#[cfg(test)]
mod tests;
