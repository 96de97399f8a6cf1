//! The argument list of a packed call: bitwise copies of its operands, borrowed for the one
//! call. Each entry into the interpreter loop has one list on its stack, so a call allocates
//! nothing and takes no buffer from the VM (a call back into the VM has its own); longer lists,
//! rare, use heap room the list keeps for the rest of that entry.

use crate::code::DecodedProgram;
use crate::value::Value;
use std::mem::{ManuallyDrop, MaybeUninit};

/// How many arguments a list holds on the stack: more than TVM's builtins and kernels take.
const INLINE_ARGS: usize = 16;

/// Room for one call's arguments (see [`ArgList::fill`]).
pub(super) struct ArgList {
    inline: [MaybeUninit<ManuallyDrop<Value>>; INLINE_ARGS],
    /// For lists longer than `INLINE_ARGS`: capacity only, kept between calls; its length stays
    /// 0 (the copies in it are never dropped).
    spilled: Vec<ManuallyDrop<Value>>,
}

impl ArgList {
    /// An empty list (nothing is written or allocated).
    #[inline(always)]
    pub(super) fn new() -> Self {
        ArgList { inline: [const { MaybeUninit::uninit() }; INLINE_ARGS], spilled: Vec::new() }
    }

    /// The argument list of the call whose numbers are `nums` (see [`DecodedProgram::prepare_args`]),
    /// `reg` reading the calling frame's registers.
    ///
    /// # Safety
    /// As for [`DecodedProgram::prepare_args`]: `nums` are those of a decoded `CallPacked` or
    /// `CallSelect` op, and the slice is used only while the registers `reg` reads stay alive
    /// and unchanged.
    #[inline(always)]
    pub(super) unsafe fn fill<'s, 'a>(
        &'s mut self,
        code: &DecodedProgram,
        nums: (u32, u32, u32, u32),
        reg: impl Fn(u32) -> &'a Value,
    ) -> &'s [Value] {
        let n = nums.1 as usize;
        let out: *mut ManuallyDrop<Value> =
            if n <= INLINE_ARGS { self.inline.as_mut_ptr().cast() } else { self.spill(n) };
        // SAFETY: `out` has room for `n` values (the inline array, or `spill`'s capacity), and
        // the rest is the caller's contract. `prepare_args` writes all `n` before the slice is
        // made; `ManuallyDrop<Value>` has the layout of `Value` (repr(transparent)).
        unsafe {
            code.prepare_args(nums, reg, out);
            std::slice::from_raw_parts(out.cast::<Value>(), n)
        }
    }

    /// Room for `n` values on the heap (allocated at most once per size reached).
    #[cold]
    #[inline(never)]
    fn spill(&mut self, n: usize) -> *mut ManuallyDrop<Value> {
        self.spilled.reserve(n);
        self.spilled.as_mut_ptr()
    }
}
