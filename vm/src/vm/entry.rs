//! Entry points: a bytecode function resolved once for repeated calls from outside the VM
//! (what `vm["main"]` keeps), so that each call skips what [`VirtualMachine::invoke_closure`]
//! works out again every time — that the value is a function, which table entry it is, whether
//! it has a signature, its arity and its frame size.

use super::limits::{check_native_stack, MIN_NATIVE_STACK};
use super::{Frame, VirtualMachine};
use crate::code::{Callee, DecodedProgram, VOID};
use crate::error::{Error, Result};
use crate::value::Value;
use std::marker::PhantomData;
use std::sync::Arc;

/// The thread a call through an entry runs on, named once by the caller (which may use its
/// key for its own bookkeeping too, such as a lock's holder): by its key the VM finds the
/// native-stack limit it kept for the thread, instead of the thread-local lookup `stacker`
/// makes, which was a tenth of a short call from Python.
///
/// Made only by [`CallingThread::current`] and not `Send`, so it always names the thread
/// that holds it.
#[derive(Clone, Copy, Debug)]
pub struct CallingThread {
    key: u64,
    /// Not `Send`/`Sync`: the value names the thread that made it.
    _here: PhantomData<*const ()>,
}

impl CallingThread {
    /// The calling thread.
    #[inline]
    pub fn current() -> Self {
        CallingThread { key: crate::pool::thread_key(), _here: PhantomData }
    }

    /// Its key: [`crate::pool::thread_key`] of this thread (never 0, never reused).
    #[inline]
    pub fn key(&self) -> u64 {
        self.key
    }
}

/// The native-stack limit of the last thread that entered the VM through an entry, and the
/// range of that stack seen so far. A thread's key is never reused, but code on one thread
/// may run on more than one stack (`stacker::grow` segments, fibers, coroutines), so the
/// limit is used only for a frame inside `[limit, top]`: addresses already seen on the stack
/// whose limit this is, which no other stack can overlap. A frame outside it takes the cold
/// path, which asks `stacker` (it tracks its own segments) and widens the range when the
/// answer is the same stack (review R-perfpy-1).
///
/// The hot path's whole check is one range test: `floor <= here <= top` for the same key
/// (`floor` is the limit plus [`MIN_NATIVE_STACK`], worked out once when the limit is learnt).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StackLimit {
    /// The thread's key (0: none yet).
    key: u64,
    /// The lowest address of its stack (0 when unknown: `stacker` could not tell, and the
    /// check passes, as `check_native_stack` does then).
    limit: usize,
    /// The lowest frame address the hot path lets through: `limit + MIN_NATIVE_STACK`, or
    /// `usize::MAX` (every call takes the cold path) while the limit is unknown.
    floor: usize,
    /// The highest frame address seen on that stack (0: none).
    top: usize,
}

/// What a plain call through an entry ([`VirtualMachine::call_entry_on`]) may skip, worked out
/// from the limits at the first such call after they last changed
/// ([`VirtualMachine::limits_mut`] forgets it): whether they let its first frame run, and
/// whether they set a step budget (without one, starting to count steps is stores of
/// constants). Read once per call, instead of the limits' four fields.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct EntryLimits {
    /// One past the highest register-stack top a plain call's first frame may reach without
    /// looking at the limits: `max_stack_registers + 1` when they allow a first frame (call
    /// depth and re-entry above 0) and set no step budget; else 0, as also when not worked
    /// out yet, and every call takes the cold path (`plain_entry_allowed`).
    top_below: usize,
}

/// An address in the caller's current stack frame: where the stack is now, to within the
/// few hundred bytes the frames between here and the interpreter take.
#[inline(always)]
fn stack_address() -> usize {
    // Through `black_box`, so the marker is a real slot of this frame: without it, an
    // AddressSanitizer build (which may move an address-taken local to its heap-allocated
    // "fake stack") gave an address outside the thread's stack, and the native-stack check of
    // a deep call passed where it must fail (`an_entry_measures_the_stack_of_the_thread_that_calls`
    // under CI's cargo-test-asan). Two memory operations a call.
    let marker = 0u8;
    std::hint::black_box(std::ptr::addr_of!(marker)) as usize
}

/// A bytecode function of one VM that takes its arguments as they are (no signature to check
/// them against, no captured values), resolved by [`VirtualMachine::entry`] for
/// [`VirtualMachine::call_entry`] and [`VirtualMachine::call_entry_with`].
#[derive(Clone)]
pub struct Entry {
    /// The decoded code of the VM that resolved it: a call through another VM is refused. Held
    /// (not only compared by address) so that no other VM's code can ever have its address.
    code: Arc<DecodedProgram>,
    index: u32,
    num_args: u32,
    /// The function's register-file size.
    regs: u32,
    /// Its first op.
    start: u32,
}

impl Entry {
    /// How many arguments the function takes.
    pub fn num_args(&self) -> usize {
        self.num_args as usize
    }
}

/// Appends `v` to `list` without `Vec::push`'s capacity check (and the out-of-line growth
/// behind it), for the entry's writes into room it reserved.
///
/// # Safety
/// `list.len() < list.capacity()`.
#[inline(always)]
unsafe fn push_within<T>(list: &mut Vec<T>, v: T) {
    let len = list.len();
    debug_assert!(len < list.capacity(), "push_within: no room reserved");
    // SAFETY: `len < capacity` (the caller's contract): the slot is allocated and holds no
    // value; the length covers it only once it is written.
    unsafe {
        list.as_mut_ptr().add(len).write(v);
        list.set_len(len + 1);
    }
}

/// The arguments an entry has written so far past the register stack's length (`made` values
/// from `first` on), dropped with it: when their maker declines or panics part-way, the
/// stack's length never covered them.
struct Made {
    first: *mut Value,
    made: usize,
}

impl Drop for Made {
    fn drop(&mut self) {
        // SAFETY: the first `made` values from `first` were written (`call_entry_on`) and are
        // owned by nothing else: the stack's length was not moved over them.
        unsafe { std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(self.first, self.made)) };
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("index", &self.index)
            .field("num_args", &self.num_args)
            .field("regs", &self.regs)
            .finish_non_exhaustive()
    }
}

impl VirtualMachine {
    /// `f` resolved for [`call_entry`](Self::call_entry): `None` when calls of it need what
    /// [`invoke_closure`](Self::invoke_closure) does — it has a signature, captured values, or
    /// is a packed or saved function — or when it is not a function of this VM.
    pub fn entry(&self, f: &Value) -> Option<Entry> {
        let Value::Func(closure) = f else { return None };
        if !closure.captured.is_empty() {
            return None;
        }
        let index = self.bytecode_index(closure).ok()??;
        let info = &self.exe.funcs()[index as usize];
        let Callee::Bytecode { regs, start } = self.code.callees[index as usize] else { return None };
        // The entry's writes into reserved room (`call_entry_on`) rely on `num_args <= regs`.
        // Every `Executable` is built through `Executable::from_parts`, whose verifier refuses
        // a function whose inputs exceed its registers (`InputsExceedRegisters`, tested by
        // vm/tests/format/verifier.rs and, for `from_parts`, vm/tests/entry.rs): no executable
        // a VM runs breaks it, so a check here could never be taken (review R-pycall-3).
        debug_assert!(info.num_args <= regs, "the verifier let through more inputs than registers");
        info.signature.is_none().then(|| Entry {
            code: Arc::clone(&self.code),
            index,
            num_args: info.num_args,
            regs,
            start,
        })
    }

    /// Calls the function `e` resolved with `args`: what
    /// [`invoke_closure`](Self::invoke_closure) does for it, with the checks that depend only
    /// on the function done once by [`entry`](Self::entry). An entry of another VM is an
    /// [`ErrorKind::Value`](crate::error::ErrorKind::Value) error.
    #[inline]
    pub fn call_entry(&mut self, e: &Entry, args: &[Value]) -> Result<Value> {
        self.call_entry_as(CallingThread::current(), e, args)
    }

    /// [`call_entry`](Self::call_entry) on the thread `on` names, for a caller that named it
    /// already (the thread-local lookup is then made once per call, not twice).
    #[inline]
    pub fn call_entry_as(&mut self, on: CallingThread, e: &Entry, args: &[Value]) -> Result<Value> {
        match self.call_entry_on(on, e, args.len(), |i| Some(args[i].clone()))? {
            Some(result) => Ok(result),
            // Not a plain call from outside (or one a limit refuses): the general entry, which
            // counts, checks and reports as usual.
            None => {
                if self.reentry == 0 {
                    self.start_counting();
                }
                self.run(e.index, args, &[])
            }
        }
    }

    /// [`call_entry`](Self::call_entry) with its `nargs` arguments made by `arg(0)`,
    /// `arg(1)`, ... in turn, straight into the new frame's registers (a caller converting
    /// them from another representation needs no list of them in between). Another VM's entry,
    /// a wrong `nargs` and too little native stack are errors before `arg` is asked.
    ///
    /// `Ok(None)` when the call is declined before any bytecode ran, the VM as it was: when
    /// `arg` gave `None` (the values it made before are dropped), or when the call is not a
    /// plain one from outside (a callback's, or one a limit would refuse), which needs the
    /// arguments as a list: the caller then makes them so and calls
    /// [`call_entry`](Self::call_entry).
    #[inline]
    pub fn call_entry_with(
        &mut self,
        e: &Entry,
        nargs: usize,
        arg: impl FnMut(usize) -> Option<Value>,
    ) -> Result<Option<Value>> {
        self.call_entry_on(CallingThread::current(), e, nargs, arg)
    }

    /// [`call_entry_with`](Self::call_entry_with) on the thread `on` names (the caller's:
    /// a [`CallingThread`] cannot leave its thread), for a caller that named it already.
    #[inline]
    pub fn call_entry_on(
        &mut self,
        on: CallingThread,
        e: &Entry,
        nargs: usize,
        mut arg: impl FnMut(usize) -> Option<Value>,
    ) -> Result<Option<Value>> {
        if !Arc::ptr_eq(&e.code, &self.code) {
            return Err(Error::value(format!(
                "call_entry: the entry of {:?} was resolved by another VirtualMachine (an entry is called through the VM that resolved it)",
                self.exe.funcs().get(e.index as usize).map_or("?", |f| f.name.as_str())
            )));
        }
        if nargs != e.num_args as usize {
            let info = &self.exe.funcs()[e.index as usize];
            return Err(Error::arity(&info.name, info.num_args.to_string(), nargs));
        }
        let mark = self.regs.len();
        let top = mark + e.regs as usize;
        if self.reentry != 0 || !self.frames.is_empty() {
            return Ok(None);
        }
        // Within what the limits were found to allow without a step budget (one comparison);
        // anything else (the first call after the limits changed, a budget, a frame they may
        // refuse) asks the limits themselves.
        let unlimited = top < self.entry_limits.top_below;
        if !unlimited && !self.plain_entry_allowed(top) {
            return Ok(None);
        }
        self.check_stack_on(on)?;
        // What `run` and `enter_frame` do for the first frame, with the limits checked above;
        // the room is looked at here first, as the reserve calls are out of line and there is
        // room on every call but the first few.
        if self.regs.capacity() - self.regs.len() < e.regs as usize {
            super::reserve_regs(&mut self.regs, e.regs as usize)?;
        }
        if self.frames.capacity() == self.frames.len() {
            super::reserve_frame(&mut self.frames)?;
        }
        // From here on the registers and the frame are written into the room reserved above
        // (`nargs == num_args <= regs`, which the verifier made sure of, see `entry`): no push checks the
        // capacity again. The arguments are written past the stack's length, which covers them
        // once all are made; until then `made` owns them, and drops them if `arg` declines or
        // panics (the next call would otherwise start above values no frame owns).
        // SAFETY: `mark` is the length, inside the allocation (room for `e.regs` more).
        let first = unsafe { self.regs.as_mut_ptr().add(mark) };
        let mut made = Made { first, made: 0 };
        for i in 0..nargs {
            let Some(v) = arg(i) else { return Ok(None) };
            // SAFETY: register `mark + i`, `i < nargs == num_args <= regs` (verified, see
            // `entry`), inside the room reserved above and past the length; `arg` cannot reach
            // the registers (the VM is borrowed here).
            unsafe { first.add(i).write(v) };
            made.made = i + 1;
        }
        std::mem::forget(made);
        // SAFETY: the `nargs` values past `mark` were written just above.
        unsafe { self.regs.set_len(mark + nargs) };
        if unlimited {
            self.start_counting_unlimited();
        } else {
            self.start_counting();
        }
        self.reentry = 1;
        // A plain loop: `resize_with` is an out-of-line call here.
        for _ in nargs..e.regs as usize {
            // SAFETY: registers `mark + nargs .. mark + regs`, inside the room reserved above.
            unsafe { push_within(&mut self.regs, Value::Null) };
        }
        // SAFETY: the frame stack had room for one more (reserved above; nothing pushed since).
        unsafe { push_within(&mut self.frames, Frame { func: e.index, base: mark, pc: 0, dst: VOID }) };
        // SAFETY: the frame just pushed is `e`'s function's (whose first op is `e.start`, and
        // whose `regs` registers start at `mark`, written above), on top of an empty stack.
        let result = unsafe { self.run_frames_at(0, e.start, mark) };
        self.reentry = 0;
        if result.is_err() {
            self.unwind(0, mark);
        }
        result.map(Some)
    }

    /// What [`check_native_stack`] checks, with the stack's limit of thread `on` found once
    /// (see [`StackLimit`]): a [native-stack error](crate::error::ErrorKind::NativeStack) when
    /// less than [`MIN_NATIVE_STACK`] bytes are left below the caller's frame.
    #[inline]
    fn check_stack_on(&mut self, on: CallingThread) -> Result<()> {
        let here = stack_address();
        let known = self.stack_limit;
        // Another thread or stack, an unknown limit, or too little room left (rare: the cold
        // path words the error from `stacker`'s own answer) all fail this one range test.
        if known.key != on.key || here < known.floor || here > known.top {
            return self.learn_stack_limit(on, here);
        }
        Ok(())
    }

    /// [`Self::check_stack_on`] for a thread, or a stack, the VM has not seen last (`caller`:
    /// the hot path's frame address): checks as [`check_native_stack`] does and keeps the
    /// stack's limit and the range seen on it.
    #[cold]
    #[inline(never)]
    fn learn_stack_limit(&mut self, on: CallingThread, caller: usize) -> Result<()> {
        check_native_stack()?;
        let limit = stacker::remaining_stack().map_or(0, |left| stack_address().saturating_sub(left));
        let known = self.stack_limit;
        // The same limit on the same thread is the same stack: the range grows to the caller's
        // frame (the address the hot path compares, not this deeper one).
        let top = if known.key == on.key && known.limit == limit { known.top.max(caller) } else { caller };
        let floor = if limit == 0 { usize::MAX } else { limit.saturating_add(MIN_NATIVE_STACK) };
        self.stack_limit = StackLimit { key: on.key, limit, floor, top };
        Ok(())
    }

    /// Whether a first frame reaching register `top` is within the limits (the rare cases —
    /// limits of zero, a frame larger than the register stack allows — take the general entry,
    /// which reports them); works out [`EntryLimits`] for the next calls.
    #[cold]
    #[inline(never)]
    fn plain_entry_allowed(&mut self, top: usize) -> bool {
        let limits = &self.limits;
        let allowed = limits.max_call_depth > 0 && limits.max_reentry > 0;
        let top_below = match limits.step_budget {
            None if allowed => limits.max_stack_registers.saturating_add(1),
            _ => 0,
        };
        self.entry_limits = EntryLimits { top_below };
        allowed && top <= limits.max_stack_registers
    }

    /// Forgets the [`EntryLimits`] worked out from the limits (they are about to change).
    pub(super) fn forget_entry_limits(&mut self) {
        self.entry_limits = EntryLimits::default();
    }
}
