//! What lies beside the decoded ops so that an op stays 16 bytes — the operand lists and
//! functions of calls ([`CallSite`], [`BinarySite`], [`SelectSite`]) — and the interpreter's
//! unchecked reads of them and of the other tables a decoded op indexes (each stating why its
//! index is in range).

use super::{Callee, DecodedProgram, Op, Src, CONST_BIT};
use crate::packed::{BinaryFn, PackedFunc, SelectFn};
use crate::value::Value;
use std::mem::ManuallyDrop;

/// The operands of a call that takes a list of them ([`Op::CallPacked`], [`Op::CallSelect`],
/// [`Op::CallBytecode`]), kept beside the ops so that an op stays 16 bytes: `func` indexes
/// [`DecodedProgram::call_fns`] (a bytecode call: the function table), `args`
/// [`DecodedProgram::args`] and [`DecodedProgram::arg_values`], `patches`
/// [`DecodedProgram::patches`] (see [`DecodedProgram::prepare_args`]; none for a bytecode call).
#[derive(Clone, Copy)]
pub(crate) struct CallSite {
    /// The function called: an index into [`DecodedProgram::call_fns`] for a packed call (the
    /// callee's shared entry, or one specialised to this call's fixed operands), into the
    /// function table ([`DecodedProgram::callees`]) for a bytecode call.
    pub func: u32,
    /// Where the call's operands start in [`DecodedProgram::args`] (as [`Src`]s) and, at the
    /// same index, in [`DecodedProgram::arg_values`] (the prepared argument list).
    pub args: u32,
    /// How many operands the call passes: the instruction's count, or fewer when its
    /// specialised function reads only the first few.
    pub nargs: u32,
    /// Where the call's register patches start in [`DecodedProgram::patches`].
    pub patches: u32,
    /// How many patches: one per register operand among the `nargs` passed (0 for a bytecode
    /// call, which copies its operands into the callee's registers instead).
    pub npatches: u32,
}

/// An [`Op::CallBinary`]'s function and operands (beside the ops, as [`CallSite`]s are).
#[derive(Clone, Copy)]
pub(crate) struct BinarySite {
    /// The function, called with the two operands' values (no argument list, no context).
    pub f: BinaryFn,
    /// The first operand.
    pub a: Src,
    /// The second operand.
    pub b: Src,
    /// The destination register, or [`super::VOID`] for a call whose result is discarded.
    pub dst: u32,
}

/// An [`Op::CallSelect1`]'s selecting function, and its entry in [`DecodedProgram::call_fns`]
/// (for its name).
#[derive(Clone, Copy)]
pub(crate) struct SelectSite {
    /// The selecting function, called with the one argument in place.
    pub f: SelectFn,
    /// The call's entry in [`DecodedProgram::call_fns`]: its name, for errors and panics.
    pub func: u32,
}

impl DecodedProgram {
    /// Function-table entry `func`, without a bounds check.
    ///
    /// # Safety
    /// `func` is below the number of function-table entries: true of every callee of a decoded
    /// op (`callees` has an entry per entry, and the verifier proved each callee index in
    /// range: FuncOutOfRange) and of every running frame's function.
    #[inline(always)]
    pub unsafe fn callee(&self, func: u32) -> &Callee {
        // SAFETY: the caller's contract.
        unsafe { at(&self.callees, func as usize) }
    }

    /// The [`CallSite`] of a call op (`CallPacked`, `CallSelect`, `CallBytecode`), without a
    /// bounds check.
    ///
    /// # Safety
    /// `site` is the `site` of such a decoded op: `push_site` made it the index of the site it
    /// pushed onto `sites`, which is not changed after decoding.
    #[inline(always)]
    pub unsafe fn site(&self, site: u32) -> &CallSite {
        // SAFETY: the caller's contract.
        unsafe { at(&self.sites, site as usize) }
    }

    /// The [`BinarySite`] of a `CallBinary` op, without a bounds check.
    ///
    /// # Safety
    /// `site` is the `site` of such a decoded op (`decode_op` pushed the site it names).
    #[inline(always)]
    pub unsafe fn binary_site(&self, site: u32) -> &BinarySite {
        // SAFETY: the caller's contract.
        unsafe { at(&self.binary_sites, site as usize) }
    }

    /// The [`SelectSite`] of a `CallSelect1` op, without a bounds check.
    ///
    /// # Safety
    /// `site` is the `site` of such a decoded op (`decode_op` pushed the site it names).
    #[inline(always)]
    pub unsafe fn select_site(&self, site: u32) -> &SelectSite {
        // SAFETY: the caller's contract.
        unsafe { at(&self.select_sites, site as usize) }
    }

    /// The function of a packed call (`CallPacked`, `CallSelect`, `CallSelect1`), without a
    /// bounds check.
    ///
    /// # Safety
    /// `func` is the `func` of such an op's site: `push_fn` and `shared_fn` made it the index of
    /// a function they pushed onto `call_fns`, which is not changed after decoding.
    #[inline(always)]
    pub unsafe fn call_fn(&self, func: u32) -> &PackedFunc {
        // SAFETY: the caller's contract.
        unsafe { at(&self.call_fns, func as usize) }
    }

    /// Value `index` of [`DecodedProgram::consts`], without a bounds check.
    ///
    /// # Safety
    /// `index` is the index of an operand with [`CONST_BIT`] of a decoded op: `src` makes those
    /// only from the index of the value it pushed onto `consts`, which only grows.
    #[inline(always)]
    pub unsafe fn constant(&self, index: u32) -> &Value {
        // SAFETY: the caller's contract.
        unsafe { at(&self.consts, index as usize) }
    }

    /// The operand list `args..args + nargs` of a call, without a bounds check.
    ///
    /// # Safety
    /// `args` and `nargs` are those of a decoded op: `decode_op` pushed `nargs` operands at
    /// `args` for every op that carries them.
    #[inline(always)]
    pub unsafe fn arg_list(&self, args: u32, nargs: u32) -> &[Src] {
        debug_assert!((args + nargs) as usize <= self.args.len());
        // SAFETY: the caller's contract.
        unsafe { self.args.get_unchecked(args as usize..(args + nargs) as usize) }
    }

    /// Writes the argument list of a call whose operands are `args..args + nargs` and whose
    /// registers are patched by `patches..patches + npatches` to `out`: one copy of the
    /// prepared list (the values fixed at load; none when all are registers), then one write
    /// per register operand, `reg` reading the calling frame's registers. The items are bitwise
    /// copies, never dropped: borrowed for the one call.
    ///
    /// # Safety
    /// The four numbers are those of a decoded `CallPacked` or `CallSelect` op, `out` is valid
    /// for writing `nargs` values, and the copies are used only while the constants and the
    /// registers `reg` reads stay alive and unchanged (for the one call: the callee sees
    /// `&[Value]`).
    #[inline(always)]
    pub unsafe fn prepare_args<'a>(
        &self,
        (args, nargs, patches, npatches): (u32, u32, u32, u32),
        reg: impl Fn(u32) -> &'a Value,
        out: *mut ManuallyDrop<Value>,
    ) {
        let (args, nargs) = (args as usize, nargs as usize);
        debug_assert!(args + nargs <= self.arg_values.len());
        debug_assert!((patches + npatches) as usize <= self.patches.len());
        // SAFETY: by the caller's contract, `decode_op` pushed `nargs` prepared values at `args`
        // and `npatches` patches at `patches`, each with a position below `nargs`, and `out`
        // has room for `nargs` items. The copies are bitwise and never dropped: values of
        // `consts`, which outlives the call, and registers the caller keeps alive and unchanged
        // meanwhile.
        unsafe {
            // A list of registers only is all patches (one per position): nothing to copy
            // (a `memcpy` call for a few values costs more than the patches).
            if npatches as usize != nargs {
                std::ptr::copy_nonoverlapping(self.arg_values.as_ptr().add(args), out, nargs);
            }
            for &(pos, r) in self.patches.get_unchecked(patches as usize..(patches + npatches) as usize) {
                // A bitwise copy, straight from the register to the list (no value in between).
                std::ptr::copy_nonoverlapping(reg(r), out.add(pos as usize).cast::<Value>(), 1);
            }
        }
    }

    /// The arguments of the call at `op` (any call), cloned, `reg` reading registers (for
    /// instruments: a cold path, read with bounds checks). `nargs` is the instruction's count
    /// of operands: a call whose function reads only the first few passes only those.
    pub fn call_args(&self, op: &Op, nargs: usize, reg: impl Fn(u32) -> Value) -> smallvec::SmallVec<[Value; 8]> {
        let read = |s: Src| match s & CONST_BIT {
            0 => reg(s),
            _ => self.consts[(s & !CONST_BIT) as usize].clone(),
        };
        match *op {
            Op::CallPacked { site, .. } | Op::CallSelect { site, .. } | Op::CallBytecode { site, .. } => {
                let args = self.sites[site as usize].args as usize;
                self.args[args..args + nargs].iter().map(|&s| read(s)).collect()
            }
            Op::CallBinary { site } => {
                let BinarySite { a, b, .. } = self.binary_sites[site as usize];
                [read(a), read(b)].into_iter().collect()
            }
            Op::IntBinary { a, b, .. } | Op::IntBranch { a, b, .. } | Op::IntJump { a, b, .. } => {
                [read(a), read(b)].into_iter().collect()
            }
            Op::IntAdd { a, b, .. } | Op::IntLtBranch { a, b, .. } | Op::IntAddJump { a, b, .. } => {
                [reg(a.index()), reg(b.index())].into_iter().collect()
            }
            Op::IntAddJumpImm { a, imm, .. } => [reg(a.index()), Value::Int(imm.into())].into_iter().collect(),
            Op::CallSelect1 { a, .. } | Op::Move { a, .. } => [reg(a.index())].into_iter().collect(),
            Op::Ret { .. } | Op::Goto { .. } | Op::If { .. } => smallvec::SmallVec::new(),
        }
    }

    /// The jump target of the `if` or `goto` at `next`, the second op of a fused pair
    /// ([`Op::IntBranch`], [`Op::IntJump`] and their specialised forms), which holds it.
    ///
    /// The arm for any other op cannot run: `fuse_pairs` fuses an int op only with the `if`
    /// or `goto` right after it. No type says so because none can here: a fused op has no room
    /// for the target (an op is 16 bytes, and the fused forms' operands fill them), and "the op
    /// after this one" is a relation between neighbours of a flat array, which the type of
    /// either op does not carry. A read of the target without the match (`repr(u8)` on `Op`,
    /// both jumps beginning with their target, read through a shared head) was measured, in
    /// one build with the payload-only write `set_scalar` describes: the compiler laid out
    /// the loop otherwise, and the counting loop took 2 more instructions an iteration
    /// (callgrind, `instr_count sum`: 72.96 against 70.93). So the match stays, and its last
    /// arm is the check that the pairing held.
    ///
    /// # Safety
    /// `next` points to the op after a fused op of these ops: `fuse_pairs` fuses an int op only
    /// with the `if` or `goto` right after it, and ops are not changed after decoding.
    #[inline(always)]
    pub unsafe fn fused_target(next: *const Op) -> u32 {
        // SAFETY: the caller's contract (an op of the ops, so readable).
        match unsafe { *next } {
            Op::If { false_target, .. } => false_target,
            Op::Goto { target } => target,
            _ => unreachable!("a fused op is followed by the `if` or `goto` it was fused with"),
        }
    }
}

/// Item `i` of `items`, without a bounds check (asserted in debug builds): the one form of the
/// unchecked reads above, each of which states why its index is in range.
///
/// # Safety
/// `i < items.len()`.
#[inline(always)]
unsafe fn at<T>(items: &[T], i: usize) -> &T {
    debug_assert!(i < items.len(), "index {i} of {}", items.len());
    // SAFETY: the caller's contract.
    unsafe { items.get_unchecked(i) }
}
