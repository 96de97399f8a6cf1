//! The check a function passes when its scope closes and again at `get()`.
//!
//! Unlike TVM's checker, which looks at each instruction alone, this one follows control flow:
//! a register may be read only where every path from the function's entry has written it (or
//! it is an input). It also proves that jumps stay inside the function, that control cannot
//! fall off the end, that constant and function indices are in range and that bytecode
//! functions are called with their number of inputs. Inputs that are never read produce
//! warnings. Unreachable code may read anything: no path reaches it.
//!
//! The register analysis is a forward "definitely assigned" dataflow over basic blocks, with
//! one bit per non-input register that is read somewhere.

use crate::error::{CheckError, CheckErrorKind};
use relaxvm::text::instr_to_text_with;
use relaxvm::{Executable, FuncKind, Instruction, RegIdx};
use std::collections::{HashMap, HashSet, VecDeque};

/// How many unused inputs are warned about one by one before the rest are counted together.
const MAX_INPUT_WARNINGS: usize = 16;

/// What the check needs to know about the program around one function.
pub(crate) trait Context {
    /// The name of function-table entry `index`, if it exists.
    fn func_name(&self, index: u32) -> Option<&str>;
    /// The size of the function table.
    fn num_funcs(&self) -> usize;
    /// The number of inputs of entry `index` when it is a bytecode function known so far.
    fn bytecode_arity(&self, index: u32) -> Option<u32>;
    /// The size of the constant pool.
    fn num_constants(&self) -> usize;
}

/// One function to check.
#[derive(Clone, Copy)]
pub(crate) struct Function<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its number of inputs (registers `0..num_inputs`).
    pub num_inputs: u32,
    /// Its instructions.
    pub instrs: &'a [Instruction],
}

/// Checks every bytecode function of `exe` (which the VM's verifier already accepted) and
/// returns the warnings, or the first error.
pub fn check_executable(exe: &Executable) -> Result<Vec<String>, CheckError> {
    let mut warnings = Vec::new();
    for f in exe.funcs().iter().filter(|f| f.kind == FuncKind::Bytecode) {
        let instrs = exe.instrs().get(f.instr_range()).unwrap_or_default();
        warnings.extend(check_function(exe, Function { name: &f.name, num_inputs: f.num_args, instrs })?);
    }
    Ok(warnings)
}

impl Context for Executable {
    fn func_name(&self, index: u32) -> Option<&str> {
        self.funcs().get(index as usize).map(|f| f.name.as_str())
    }
    fn num_funcs(&self) -> usize {
        self.funcs().len()
    }
    fn bytecode_arity(&self, index: u32) -> Option<u32> {
        self.funcs().get(index as usize).filter(|f| f.kind == FuncKind::Bytecode).map(|f| f.num_args)
    }
    fn num_constants(&self) -> usize {
        self.constants().len()
    }
}

/// Checks one function; returns its warnings or its first error (structural errors first,
/// then register errors, each the earliest in instruction order).
pub(crate) fn check_function(ctx: &dyn Context, f: Function<'_>) -> Result<Vec<String>, CheckError> {
    let fail = |pc: usize, kind: CheckErrorKind| CheckError {
        func: f.name.to_string(),
        pc: Some(pc),
        instr: Some(instr_to_text_with(&f.instrs[pc], |i| ctx.func_name(i))),
        kind,
    };
    if f.instrs.is_empty() {
        return Err(CheckError { func: f.name.to_string(), pc: None, instr: None, kind: CheckErrorKind::Empty });
    }
    for pc in 0..f.instrs.len() {
        check_instr(ctx, f.instrs, pc).map_err(|kind| fail(pc, kind))?;
    }
    definitely_assigned(f).map_err(|(pc, kind)| fail(pc, kind))?;
    Ok(unused_input_warnings(f))
}

/// The checks that concern one instruction alone.
fn check_instr(ctx: &dyn Context, instrs: &[Instruction], pc: usize) -> Result<(), CheckErrorKind> {
    let func_index = |index: u32| {
        if (index as usize) < ctx.num_funcs() {
            Ok(())
        } else {
            Err(CheckErrorKind::FuncOutOfRange { index, len: ctx.num_funcs() })
        }
    };
    let jump = |offset: i64| {
        let target = pc as i128 + i128::from(offset);
        if target < 0 || target >= instrs.len() as i128 {
            Err(CheckErrorKind::JumpOutside { offset, target, len: instrs.len() })
        } else {
            Ok(())
        }
    };
    let fall_through = || {
        if pc + 1 < instrs.len() {
            Ok(())
        } else {
            Err(CheckErrorKind::RunsOffEnd)
        }
    };
    match &instrs[pc] {
        Instruction::Call { func, args, dst: _ } => {
            func_index(*func)?;
            if let Some(expected) = ctx.bytecode_arity(*func) {
                if args.len() != expected as usize {
                    let callee = ctx.func_name(*func).unwrap_or_default().to_string();
                    return Err(CheckErrorKind::Arity { callee, expected, got: args.len() });
                }
            }
            for a in args {
                match *a {
                    relaxvm::Arg::Const(index) if index as usize >= ctx.num_constants() => {
                        return Err(CheckErrorKind::ConstOutOfRange { index, len: ctx.num_constants() });
                    }
                    relaxvm::Arg::Func(index) => func_index(index)?,
                    relaxvm::Arg::Reg(_)
                    | relaxvm::Arg::Void
                    | relaxvm::Arg::VmState
                    | relaxvm::Arg::Imm(_)
                    | relaxvm::Arg::Const(_) => {}
                }
            }
            fall_through()
        }
        Instruction::Ret { result: _ } => Ok(()),
        Instruction::Goto { offset } => jump(*offset),
        Instruction::If { cond: _, false_offset } => {
            fall_through()?;
            jump(*false_offset)
        }
    }
}

/// A set of tracked registers.
#[derive(Clone, PartialEq, Eq)]
struct Bits(Vec<u64>);

impl Bits {
    fn empty(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn full(n: usize) -> Self {
        Bits(vec![u64::MAX; n.div_ceil(64)])
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn union(&self, other: &Bits) -> Bits {
        Bits(self.0.iter().zip(&other.0).map(|(a, b)| a | b).collect())
    }
    /// Intersects in place; true when that changed `self`.
    fn intersect(&mut self, other: &Bits) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let n = *a & b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }
}

/// Basic blocks of a function whose jumps were proven to stay inside it.
struct Blocks {
    /// The first instruction of each block, ascending; a block ends where the next begins.
    starts: Vec<usize>,
    /// The block each instruction belongs to.
    block_of: Vec<usize>,
}

impl Blocks {
    fn new(instrs: &[Instruction]) -> Self {
        let n = instrs.len();
        let mut leader = vec![false; n];
        leader[0] = true;
        let mut mark = |pc: usize, off: i64| {
            let t = pc as i128 + i128::from(off);
            if (0..n as i128).contains(&t) {
                leader[t as usize] = true;
            }
        };
        for (pc, instr) in instrs.iter().enumerate() {
            match instr {
                Instruction::Call { .. } => {}
                Instruction::Ret { .. } => mark(pc, 1),
                Instruction::Goto { offset } => {
                    mark(pc, *offset);
                    mark(pc, 1);
                }
                Instruction::If { false_offset, .. } => {
                    mark(pc, *false_offset);
                    mark(pc, 1);
                }
            }
        }
        let starts: Vec<usize> = (0..n).filter(|&pc| leader[pc]).collect();
        let mut block_of = vec![0; n];
        for (b, w) in starts.iter().enumerate() {
            let end = starts.get(b + 1).copied().unwrap_or(n);
            block_of[*w..end].iter_mut().for_each(|x| *x = b);
        }
        Blocks { starts, block_of }
    }

    fn range(&self, b: usize) -> std::ops::Range<usize> {
        self.starts[b]..self.starts.get(b + 1).copied().unwrap_or(self.block_of.len())
    }

    fn successors(&self, instrs: &[Instruction], b: usize) -> Vec<usize> {
        let last = self.range(b).end - 1;
        let at = |off: i64| self.block_of[(last as i128 + i128::from(off)) as usize];
        match &instrs[last] {
            Instruction::Call { .. } => vec![at(1)],
            Instruction::Ret { .. } => vec![],
            Instruction::Goto { offset } => vec![at(*offset)],
            Instruction::If { false_offset, .. } => vec![at(1), at(*false_offset)],
        }
    }
}

/// Finds the first reachable read of a register that some path leaves unwritten.
fn definitely_assigned(f: Function<'_>) -> Result<(), (usize, CheckErrorKind)> {
    let mut tracked: HashMap<RegIdx, usize> = HashMap::new();
    for instr in f.instrs {
        for r in instr.reads() {
            if r >= f.num_inputs {
                let k = tracked.len();
                tracked.entry(r).or_insert(k);
            }
        }
    }
    if tracked.is_empty() {
        return Ok(());
    }
    let written: HashSet<RegIdx> = f.instrs.iter().filter_map(Instruction::writes).collect();
    let blocks = Blocks::new(f.instrs);
    let nb = blocks.starts.len();
    let nt = tracked.len();
    let gen: Vec<Bits> = (0..nb)
        .map(|b| {
            let mut g = Bits::empty(nt);
            for pc in blocks.range(b) {
                if let Some(&k) = f.instrs[pc].writes().and_then(|d| tracked.get(&d)) {
                    g.set(k);
                }
            }
            g
        })
        .collect();
    let succs: Vec<Vec<usize>> = (0..nb).map(|b| blocks.successors(f.instrs, b)).collect();
    // Greatest fixed point: every block starts with "all assigned" except the entry, which has
    // nothing; a block is processed once reached and again whenever its input shrinks.
    let mut live_in: Vec<Bits> = (0..nb).map(|b| if b == 0 { Bits::empty(nt) } else { Bits::full(nt) }).collect();
    let mut visited = vec![false; nb];
    let mut queued = vec![false; nb];
    let mut work = VecDeque::from([0usize]);
    queued[0] = true;
    while let Some(b) = work.pop_front() {
        queued[b] = false;
        visited[b] = true;
        let out = live_in[b].union(&gen[b]);
        for &s in &succs[b] {
            if s == 0 {
                continue; // nothing is assigned on entry, whatever jumps back to it
            }
            let changed = live_in[s].intersect(&out);
            if (changed || !visited[s]) && !queued[s] {
                queued[s] = true;
                work.push_back(s);
            }
        }
    }
    for b in (0..nb).filter(|&b| visited[b]) {
        let mut assigned = live_in[b].clone();
        for pc in blocks.range(b) {
            let instr = &f.instrs[pc];
            for r in instr.reads() {
                if let Some(&k) = tracked.get(&r) {
                    if !assigned.get(k) {
                        let kind = if written.contains(&r) {
                            CheckErrorKind::MaybeUnassigned { reg: r }
                        } else {
                            CheckErrorKind::UndefinedRegister { reg: r, num_inputs: f.num_inputs }
                        };
                        return Err((pc, kind));
                    }
                }
            }
            if let Some(&k) = instr.writes().and_then(|d| tracked.get(&d)) {
                assigned.set(k);
            }
        }
    }
    Ok(())
}

/// `function "main": input %1 is never used`, for each input no instruction reads.
fn unused_input_warnings(f: Function<'_>) -> Vec<String> {
    let read: HashSet<RegIdx> = f.instrs.iter().flat_map(Instruction::reads).filter(|r| *r < f.num_inputs).collect();
    let unused: Vec<RegIdx> = (0..f.num_inputs).filter(|r| !read.contains(r)).collect();
    let mut out: Vec<String> = unused
        .iter()
        .take(MAX_INPUT_WARNINGS)
        .map(|r| format!("function {:?}: input %{r} is never used", f.name))
        .collect();
    if unused.len() > MAX_INPUT_WARNINGS {
        out.push(format!("function {:?}: {} more inputs are never used", f.name, unused.len() - MAX_INPUT_WARNINGS));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::Arg::{self, *};

    struct Ctx;
    impl Context for Ctx {
        fn func_name(&self, index: u32) -> Option<&str> {
            ["main", "f", "g2"].get(index as usize).copied()
        }
        fn num_funcs(&self) -> usize {
            3
        }
        fn bytecode_arity(&self, index: u32) -> Option<u32> {
            (index == 2).then_some(2)
        }
        fn num_constants(&self) -> usize {
            1
        }
    }

    fn call(args: Vec<Arg>, dst: Option<u32>) -> Instruction {
        Instruction::Call { func: 1, args, dst }
    }
    fn ret(r: u32) -> Instruction {
        Instruction::Ret { result: r }
    }
    fn check(num_inputs: u32, instrs: &[Instruction]) -> Result<Vec<String>, CheckError> {
        check_function(&Ctx, Function { name: "main", num_inputs, instrs })
    }
    fn kind(num_inputs: u32, instrs: &[Instruction]) -> (Option<usize>, CheckErrorKind) {
        let e = check(num_inputs, instrs).unwrap_err();
        (e.pc, e.kind)
    }

    #[test]
    fn straight_line_reads_after_writes() {
        assert_eq!(check(1, &[call(vec![Reg(0)], Some(5)), ret(5)]).unwrap(), Vec::<String>::new());
        let (pc, k) = kind(2, &[call(vec![Reg(0), Reg(1)], Some(4)), call(vec![Reg(3)], Some(4)), ret(4)]);
        assert_eq!((pc, k), (Some(1), CheckErrorKind::UndefinedRegister { reg: 3, num_inputs: 2 }));
        // reads happen before the write of the same instruction
        let (pc, k) = kind(0, &[call(vec![Reg(0)], Some(0)), ret(0)]);
        assert_eq!((pc, k), (Some(0), CheckErrorKind::MaybeUnassigned { reg: 0 }));
    }

    #[test]
    fn a_write_on_one_branch_only_is_not_enough() {
        // 0: if %0 2 ; 1: %1 = f() ; 2: ret %1   -- the false branch skips the write
        let prog = [Instruction::If { cond: 0, false_offset: 2 }, call(vec![], Some(1)), ret(1)];
        assert_eq!(kind(1, &prog), (Some(2), CheckErrorKind::MaybeUnassigned { reg: 1 }));
        // both branches write: fine
        let prog = [
            Instruction::If { cond: 0, false_offset: 3 },
            call(vec![], Some(1)),
            Instruction::Goto { offset: 2 },
            call(vec![Imm(1)], Some(1)),
            ret(1),
        ];
        assert!(check(1, &prog).is_ok());
    }

    #[test]
    fn loops_and_back_edges() {
        // %1 = 0; loop: if %1 exit; %1 = f(%1); goto loop; exit: ret %1
        let prog = [
            call(vec![Imm(0)], Some(1)),
            Instruction::If { cond: 1, false_offset: 3 },
            call(vec![Reg(1)], Some(1)),
            Instruction::Goto { offset: -2 },
            ret(1),
        ];
        assert!(check(0, &prog).is_ok());
        // a register written only inside the loop body and read after it
        let prog = [
            Instruction::If { cond: 0, false_offset: 3 },
            call(vec![], Some(2)),
            Instruction::Goto { offset: -2 },
            ret(2),
        ];
        assert_eq!(kind(1, &prog), (Some(3), CheckErrorKind::MaybeUnassigned { reg: 2 }));
        // a jump back to the entry: nothing is assigned there
        let prog = [call(vec![Reg(1)], Some(1)), Instruction::Goto { offset: -1 }];
        assert_eq!(kind(0, &prog), (Some(0), CheckErrorKind::MaybeUnassigned { reg: 1 }));
        // textual order does not matter: written before the read on every path
        let prog = [
            Instruction::Goto { offset: 3 },
            call(vec![Reg(7)], Some(8)),
            ret(8),
            call(vec![], Some(7)),
            Instruction::Goto { offset: -3 },
        ];
        assert!(check(0, &prog).is_ok());
    }

    #[test]
    fn unreachable_code_is_not_checked_for_registers() {
        let prog = [ret(0), call(vec![Reg(9)], Some(1)), ret(1)];
        assert!(check(1, &prog).is_ok());
    }

    #[test]
    fn structure_errors() {
        assert_eq!(kind(0, &[call(vec![], Some(0))]), (Some(0), CheckErrorKind::RunsOffEnd));
        assert_eq!(
            kind(1, &[Instruction::If { cond: 0, false_offset: -1 }, ret(0)]).1,
            CheckErrorKind::JumpOutside { offset: -1, target: -1, len: 2 }
        );
        assert_eq!(
            kind(1, &[Instruction::Goto { offset: 1 }]).1,
            CheckErrorKind::JumpOutside { offset: 1, target: 1, len: 1 }
        );
        assert_eq!(kind(1, &[Instruction::If { cond: 0, false_offset: -1 }]).1, CheckErrorKind::RunsOffEnd);
        assert_eq!(kind(1, &[Instruction::Goto { offset: i64::MIN }, ret(0)]).0, Some(0));
        assert_eq!(
            kind(0, &[call(vec![Const(1)], None), ret(0)]).1,
            CheckErrorKind::ConstOutOfRange { index: 1, len: 1 }
        );
        assert_eq!(
            kind(0, &[call(vec![Func(3)], None), ret(0)]).1,
            CheckErrorKind::FuncOutOfRange { index: 3, len: 3 }
        );
        let far = Instruction::Call { func: 7, args: vec![], dst: None };
        assert_eq!(kind(0, &[far, ret(0)]).1, CheckErrorKind::FuncOutOfRange { index: 7, len: 3 });
        let g2 = Instruction::Call { func: 2, args: vec![Imm(1)], dst: Some(0) };
        let e = check(0, &[g2, ret(0)]).unwrap_err();
        assert_eq!(e.kind, CheckErrorKind::Arity { callee: "g2".into(), expected: 2, got: 1 });
        assert_eq!(
            e.to_string(),
            "function \"main\", instruction 0 (call  g2  in: i1  dst: %0): calls \"g2\" with 1 argument(s), but it takes 2"
        );
        let e = check(0, &[]).unwrap_err();
        assert_eq!((e.pc, e.kind), (None, CheckErrorKind::Empty));
    }

    #[test]
    fn unused_inputs_warn() {
        let w = check(3, &[call(vec![Reg(0)], Some(3)), ret(3)]).unwrap();
        assert_eq!(w, vec!["function \"main\": input %1 is never used", "function \"main\": input %2 is never used"]);
        let w = check(40, &[ret(39)]).unwrap();
        assert_eq!(w.len(), MAX_INPUT_WARNINGS + 1);
        assert_eq!(w.last().unwrap(), "function \"main\": 23 more inputs are never used");
    }

    #[test]
    fn many_blocks_and_registers() {
        // 200 diamonds, each writing a fresh register on both arms, then reading it.
        let mut prog = Vec::new();
        for i in 0..200u32 {
            let r = 1 + i;
            prog.push(Instruction::If { cond: 0, false_offset: 3 });
            prog.push(call(vec![], Some(r)));
            prog.push(Instruction::Goto { offset: 2 });
            prog.push(call(vec![], Some(r)));
            prog.push(call(vec![Reg(r)], None));
        }
        prog.push(ret(200));
        assert!(check(1, &prog).is_ok());
        // remove one write on one arm: the read after it fails
        prog[5 * 150 + 3] = call(vec![], None);
        assert_eq!(kind(1, &prog), (Some(5 * 150 + 4), CheckErrorKind::MaybeUnassigned { reg: 151 }));
    }
}
