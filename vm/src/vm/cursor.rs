//! Where the interpreter loop is: the running frame's registers ([`Regs`]), the decoded ops
//! it walks ([`Ops`], with [`prefetch_ahead`]), and an op's position for errors ([`At`]); each
//! a pointer or two the loop keeps in registers.

use crate::code::{Op, Reg};
use crate::value::Value;

/// The registers of the running frame: a pointer to its first, taken by
/// [`VirtualMachine::frame_regs`], so that reading a register is one load from a pointer the
/// loop keeps, not a sum of the stack's start, the frame's base and the index. It is valid until
/// the register stack grows or shrinks: the loop takes it afresh when a frame is entered or left
/// and after every packed call (which may call back into the VM and grow the stack).
#[derive(Clone, Copy)]
pub(super) struct Regs {
    first: *mut Value,
    /// The registers from `first` to the stack's top, for the bounds assertions of debug builds.
    #[cfg(debug_assertions)]
    len: usize,
}

impl Regs {
    /// The registers of the frame whose first register is `base` in the register stack `regs`
    /// (`base` at most its length).
    #[inline(always)]
    pub(super) fn of(regs: &mut [Value], base: usize) -> Regs {
        debug_assert!(base <= regs.len());
        // SAFETY: `base` is at most the length (frames start at or below the stack's top), so the
        // pointer stays inside the allocation or one past its end.
        let first = unsafe { regs.as_mut_ptr().add(base) };
        Regs {
            first,
            #[cfg(debug_assertions)]
            len: regs.len() - base,
        }
    }

    /// Register `r`, without a bounds check.
    ///
    /// # Safety
    /// `r` is a register operand of a decoded op of the frame these are the registers of
    /// (below its register-file size: RegisterOutside; `enter_frame` made that many part of the
    /// stack), the stack has not grown or shrunk since they were taken, and no `&mut` to that
    /// register is alive. The reference must not outlive such a change.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn get<'a>(self, r: u32) -> &'a Value {
        #[cfg(debug_assertions)]
        debug_assert!((r as usize) < self.len);
        // SAFETY: the caller's contract.
        unsafe { &*self.first.add(r as usize) }
    }

    /// Register `r` (a [`Reg`], reached by its byte offset), without a bounds check.
    ///
    /// # Safety
    /// As for [`Regs::get`] with `r`'s index.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn reg<'a>(self, r: Reg) -> &'a Value {
        #[cfg(debug_assertions)]
        debug_assert!((r.index() as usize) < self.len);
        // SAFETY: the caller's contract; the offset is the index times the size of a value.
        unsafe { &*self.first.byte_add(r.offset()) }
    }

    /// Register `r` (a [`Reg`]), to write, without a bounds check.
    ///
    /// # Safety
    /// As for [`Regs::get_mut`] with `r`'s index.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn reg_mut<'a>(self, r: Reg) -> &'a mut Value {
        #[cfg(debug_assertions)]
        debug_assert!((r.index() as usize) < self.len);
        // SAFETY: the caller's contract; the offset is the index times the size of a value.
        unsafe { &mut *self.first.byte_add(r.offset()) }
    }

    /// Register `r`, to write, without a bounds check.
    ///
    /// # Safety
    /// As for [`Regs::get`], and no other reference to that register is alive.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn get_mut<'a>(self, r: u32) -> &'a mut Value {
        #[cfg(debug_assertions)]
        debug_assert!((r as usize) < self.len);
        // SAFETY: the caller's contract.
        unsafe { &mut *self.first.add(r as usize) }
    }
}

/// The decoded ops of the executable, as the loop walks them: a pointer to the first, copied
/// into the loop so that the next op is found from a register, not through `DecodedProgram`.
#[derive(Clone, Copy)]
pub(super) struct Ops(pub(super) *const Op);

/// How far ahead of a call op the ops are asked into the cache: 32 ops of 16 bytes (as far as
/// 16 ops of 32 bytes were, when ops were that size).
const PREFETCH_OPS: usize = 32;

/// Asks the CPU to bring the ops `PREFETCH_OPS` ahead of `ip` into the cache. Straight-line
/// code larger than the L2 cache (100,000 calls: 1.6 MB of ops) otherwise waits for memory
/// more often, as the loop's indirect jumps keep the CPU from reading far ahead: calls of
/// `vm.builtin.copy` took 5.4 ns each in 100,000 and 7.0 ns in 1,000,000 with it, 6.4 and
/// 8.5 ns without. Only call ops ask (one instruction, next to a call's few dozen); the int
/// ops of tight loops do not.
#[inline(always)]
pub(super) fn prefetch_ahead(ip: *const Op) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (it is in the target's
    // baseline). A prefetch is a hint: it never faults and changes nothing the program can
    // see, whatever the address; `wrapping_add` makes the address without pointer arithmetic
    // past the end of the ops (which `add` would not allow).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ip.wrapping_add(PREFETCH_OPS).cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ip;
}

impl Ops {
    /// The op at index `pc`, without a bounds check.
    ///
    /// # Safety
    /// `pc` is below the number of ops. It holds for every `pc` the interpreter reaches in a
    /// verified executable: a function's start, the op after one that falls through (never the
    /// last of its function: RunsOffEnd), the op after a call a frame returns to, or a jump
    /// target inside the function (JumpOutside).
    #[inline(always)]
    pub(super) unsafe fn at(self, pc: usize) -> *const Op {
        // SAFETY: the caller's contract: the op is inside the ops' allocation.
        unsafe { self.0.add(pc) }
    }

    /// The op at byte offset `offset` from the first (its index times the size of an op),
    /// without a bounds check.
    ///
    /// # Safety
    /// As for [`Ops::at`] with `offset`'s index, and `offset` is a multiple of the op size.
    #[inline(always)]
    pub(super) unsafe fn at_offset(self, offset: usize) -> *const Op {
        debug_assert!(offset.is_multiple_of(std::mem::size_of::<Op>()));
        // SAFETY: the caller's contract: the op is inside the ops' allocation.
        unsafe { self.0.byte_add(offset) }
    }

    /// The index of the op `ip` points to.
    ///
    /// # Safety
    /// `ip` points to an op of these ops (made by [`Ops::at`] and steps inside the ops).
    #[inline(always)]
    pub(super) unsafe fn pc(self, ip: *const Op) -> usize {
        // SAFETY: the caller's contract: both point into the one allocation, `ip` at or after
        // the first op.
        unsafe { ip.offset_from(self.0) as usize }
    }
}

/// Where an op is: the ops and a pointer to it. Errors need the op's index; the loop passes
/// this instead, so that the index is computed only on an error path.
#[derive(Clone, Copy)]
pub(super) struct At {
    pub(super) ops: Ops,
    pub(super) ip: *const Op,
}

impl At {
    /// The op's index.
    #[inline(always)]
    pub(super) fn pc(self) -> usize {
        // SAFETY: `At`s are made in the loop of an op of its ops (`Ops::pc`'s contract).
        unsafe { self.ops.pc(self.ip) }
    }
}
