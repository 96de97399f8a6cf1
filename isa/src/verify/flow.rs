//! Data flow: a register may be read only where every path from the function's entry has
//! written it (or it is an input). Unlike TVM's checker, which looks at each instruction alone,
//! this follows control flow; unreachable code may read anything, since no path reaches it.
//!
//! The analysis is a forward "definitely assigned" dataflow over basic blocks, with one bit per
//! non-input register that is read somewhere. It runs on functions whose structure (jumps
//! inside the function, no fall-off) was verified first.

use super::error::VerifyErrorKind;
use crate::bytecode::{Instruction, Operand, RegIdx, Slot};
use std::collections::{HashMap, HashSet, VecDeque};

/// How many unused inputs are warned about one by one before the rest are counted together.
const MAX_INPUT_WARNINGS: usize = 16;

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
pub(super) fn definitely_assigned(
    num_inputs: u32,
    instrs: &[Instruction],
) -> Result<(), (usize, Slot, VerifyErrorKind)> {
    let mut tracked: HashMap<RegIdx, usize> = HashMap::new();
    for instr in instrs {
        for r in instr.reads() {
            if r >= num_inputs {
                let k = tracked.len();
                tracked.entry(r).or_insert(k);
            }
        }
    }
    if tracked.is_empty() {
        return Ok(());
    }
    let written: HashSet<RegIdx> = instrs.iter().filter_map(Instruction::writes).collect();
    let blocks = Blocks::new(instrs);
    let nb = blocks.starts.len();
    let nt = tracked.len();
    let gen: Vec<Bits> = (0..nb)
        .map(|b| {
            let mut g = Bits::empty(nt);
            for pc in blocks.range(b) {
                if let Some(&k) = instrs[pc].writes().and_then(|d| tracked.get(&d)) {
                    g.set(k);
                }
            }
            g
        })
        .collect();
    let succs: Vec<Vec<usize>> = (0..nb).map(|b| blocks.successors(instrs, b)).collect();
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
            let instr = &instrs[pc];
            for r in instr.reads() {
                if let Some(&k) = tracked.get(&r) {
                    if !assigned.get(k) {
                        let kind = if written.contains(&r) {
                            VerifyErrorKind::MaybeUnassigned { reg: r }
                        } else {
                            VerifyErrorKind::UndefinedRegister { reg: r, num_inputs }
                        };
                        return Err((pc, read_slot(instr, r), kind));
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
pub(super) fn unused_input_warnings(name: &str, num_inputs: u32, instrs: &[Instruction]) -> Vec<String> {
    let read: HashSet<RegIdx> = instrs.iter().flat_map(Instruction::reads).filter(|r| *r < num_inputs).collect();
    let unused: Vec<RegIdx> = (0..num_inputs).filter(|r| !read.contains(r)).collect();
    let mut out: Vec<String> = unused
        .iter()
        .take(MAX_INPUT_WARNINGS)
        .map(|r| format!("function {:?}: input %{r} is never used", name))
        .collect();
    if unused.len() > MAX_INPUT_WARNINGS {
        out.push(format!("function {:?}: {} more inputs are never used", name, unused.len() - MAX_INPUT_WARNINGS));
    }
    out
}

/// The slot at which `instr` reads `reg`.
fn read_slot(instr: &Instruction, reg: RegIdx) -> Slot {
    let mut found = None;
    instr.operands(|slot, op| {
        if found.is_none() && op == Operand::Read(reg) {
            found = Some(slot);
        }
    });
    // `reg` came from `instr.reads()`, so some slot reads it.
    found.unwrap_or(Slot::Callee)
}
