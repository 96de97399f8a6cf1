//! The running VM TIR functions of each thread, and what their native code calls: the three
//! AnyList functions TVM's runtime exports (`TVMBackendAnyList*`, which relaxvm defines as
//! `RVMBackendAnyList*` and binds in the libraries it opens, see `crate::ffi::rebind`),
//! and calls of packed functions through `TVMFFIFunctionCall` (routed here by `ffi::services`).
//!
//! A [`Frame`] lives on the Rust stack of `super::invoke` while its native function runs,
//! and is reachable from the callbacks through a thread-local pointer to the innermost one. Only the
//! innermost frame is ever used, and only for the length of one callback step (never across
//! a call into the VM, which may push and pop frames of its own): so no two mutable borrows of
//! one frame exist at once.

use super::cells::{self, Cells, Prepared, Staged};
use super::handles::Handles;
use crate::ffi::abi::{type_index, TVMFFIAny};
use crate::ffi::function_handle::Handle;
use crate::ffi::thread_state::{self, ThreadState};
use crate::ffi::{convert, raised};
use relaxvm::{CallCtx, Error, Result, Value};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// One running VM TIR function.
pub struct Frame {
    /// The function's name, for errors.
    pub name: Arc<str>,
    /// The register list (TVM's `reg_anylist`); its objects are cells of `owned`.
    pub regs: Vec<TVMFFIAny>,
    /// Every cell made while the function runs: the registers', and results native code
    /// dropped without storing them (released with the frame).
    pub owned: Cells,
    /// The constant list (`const_anylist`).
    pub consts: Arc<Prepared>,
    /// The function list (`func_anylist`).
    pub funcs: Arc<Prepared>,
    /// The call context of the packed call that runs the function (lifetime erased: the frame
    /// never outlives that call, see `super::invoke`).
    pub ctx: *mut CallCtx<'static>,
    /// Tensors passed to native code as copies, written back when the function returns.
    pub staged: Vec<Staged>,
    /// The first failure of a callback of this function (a call, an AnyList function): the
    /// function's error, given to the caller unchanged (its kind, a Python exception it
    /// carries), even when the machine code goes on (TVM's code ignores the AnyList functions'
    /// return codes). Once set, every later callback of the function refuses.
    pub error: Option<Error>,
    /// The function handles native code called, resolved for this run (see `super::handles`).
    pub handles: Handles,
    /// The caches of the function's call sites for this run (see `super::sites`).
    pub sites: super::sites::Running,
}

/// What a run's frame allocates, kept by its VM for its next run (`super::Lists`): the register
/// list, the cells (emptied, under a new stamp: see `super::cells`), the staged copies' list and
/// the resolved handles' list (emptied: nothing a run resolved outlives it, attack perf/02).
pub struct Parts {
    /// The register list's memory.
    pub regs: Vec<TVMFFIAny>,
    /// The cells, none live.
    pub owned: Cells,
    /// The staged copies' list's memory.
    pub staged: Vec<Staged>,
    /// The handles' lists (none resolved).
    pub handles: Handles,
}

/// The most registers whose list a VM keeps between runs (a larger one is freed with its run).
const MAX_KEPT_REGISTERS: usize = 1 << 16;

impl Parts {
    /// Parts for a run of their own.
    pub fn new() -> Self {
        Parts { regs: Vec::new(), owned: Cells::for_run(), staged: Vec::new(), handles: Handles::default() }
    }

    /// The parts of finished frame `frame`, emptied for another run: drops every value the run
    /// left (destructors run: not inside the kernel-call guard, nor under a lock).
    pub fn recycled(frame: Frame) -> Self {
        let Frame { mut regs, mut owned, mut staged, mut handles, .. } = frame;
        regs.clear();
        if regs.capacity() > MAX_KEPT_REGISTERS {
            regs = Vec::new();
        }
        owned.recycle();
        staged.clear();
        handles.recycle();
        Parts { regs, owned, staged, handles }
    }
}

impl Default for Parts {
    fn default() -> Self {
        Self::new()
    }
}

impl Frame {
    /// The frame's address: what native code receives as the VM context pointer.
    pub fn ctx_ptr(&self) -> *const c_void {
        (self as *const Frame).cast()
    }

    /// The value native code passed in `a`: an object of one of this function's lists, the
    /// VM context, or what a kernel passes (DLTensors become copies, see `CallbackArgs`).
    ///
    /// # Safety
    /// As [`convert::CallbackArgs::value`]: DLTensors and strings in `a` are live for the call.
    unsafe fn value_of(
        &self,
        a: &TVMFFIAny,
        copies: &mut convert::CallbackArgs,
        what: &dyn Fn() -> String,
    ) -> Result<Value> {
        if cells::is_object(a) {
            let found = self.owned.get(a).or_else(|| self.consts.cells.get(a));
            return found.or_else(|| self.funcs.cells.get(a)).cloned().ok_or_else(|| cells::unknown_object(a, &what()));
        }
        if matches!(a.type_index, type_index::NONE | type_index::INT | type_index::BOOL | type_index::FLOAT) {
            // The scalars native code passes most (shape-heap arguments), read in place.
            return convert::result_from_ffi(a);
        }
        if a.type_index == type_index::OPAQUE_PTR {
            return if a.as_ptr().cast_const() == self.ctx_ptr() {
                Ok(Value::VmState)
            } else {
                Err(Error::value(format!("{}: an opaque pointer {:#x} that is not the VM context", what(), a.payload)))
            };
        }
        // SAFETY: the caller's contract.
        unsafe { copies.value(a) }
    }

    /// The list of this function `list` points to (registers, constants or functions), if any.
    #[inline]
    fn list(&self, list: *mut c_void) -> Option<&[TVMFFIAny]> {
        let p = list.cast_const().cast::<TVMFFIAny>();
        if p == self.regs.as_ptr() {
            Some(&self.regs)
        } else if p == self.consts.anys.as_ptr() {
            Some(&self.consts.anys)
        } else if p == self.funcs.anys.as_ptr() {
            Some(&self.funcs.anys)
        } else {
            None
        }
    }

    /// Releases the cell a register held in `old`, unless another register still holds it
    /// (its value is dropped later, see [`Cells::drop_released`]).
    #[inline]
    fn release(&mut self, old: TVMFFIAny) {
        if cells::is_object(&old) {
            self.owned.unhold(&old);
        }
    }
}

/// The innermost running VM TIR function of this thread (null when none runs), kept in the
/// thread's one block of kernel-call state (`crate::ffi::thread_state`: a call back from native
/// code finds its guard and its frame with one thread-local lookup); the frames it was entered
/// from are kept by their [`Entered`] guards.
#[inline]
fn innermost_ptr(state: &ThreadState) -> *mut Frame {
    state.innermost().cast()
}

/// Keeps `frame` the innermost running function of this thread while it lives, then makes the
/// frame it was entered from (if any) the innermost again.
pub struct Entered {
    outer: *mut Frame,
}

impl Entered {
    /// Enters `frame`; it must stay in place, unused by its owner, until this is dropped.
    pub fn enter(frame: *mut Frame) -> Self {
        Entered { outer: thread_state::with(|state| state.replace_innermost(frame.cast())).cast() }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        thread_state::with(|state| state.replace_innermost(self.outer.cast()));
    }
}

/// The innermost VM TIR function running on this thread (whose state is `state`), if any (its
/// native code's calls then come here, to [`call`]).
#[inline]
pub(crate) fn innermost_in(state: &ThreadState) -> Option<Innermost> {
    std::ptr::NonNull::new(innermost_ptr(state)).map(Innermost)
}

/// The innermost running frame of this thread, as `innermost_in` found it: valid while its
/// native code's call that found it lasts (the frame's [`Entered`] outlives the call).
pub struct Innermost(std::ptr::NonNull<Frame>);

impl Innermost {
    /// Runs `step` on the frame (as [`with_innermost`], without the thread-local lookup).
    fn with<R>(&self, step: impl FnOnce(&mut Frame) -> R) -> R {
        // SAFETY: the pointer `Entered` set, read during this native call of the frame's
        // function, on this thread: the frame is live and innermost again whenever this runs
        // (a call into the VM in between pushes and pops its own frames before it returns), and
        // its owner does not use it while native code runs; each use is one step, none nested
        // in another (see the module's note).
        step(unsafe { &mut *self.0.as_ptr() })
    }
}

/// Records `e` as the innermost frame's failure, unless it failed before (the first stays).
fn fail(e: Error) {
    let _ = with_innermost(|frame| {
        if frame.error.is_none() {
            frame.error = Some(e);
        }
        Ok(())
    });
}

/// Runs `step` on the innermost frame; an error (`RuntimeError`) when there is none.
fn with_innermost<R>(step: impl FnOnce(&mut Frame) -> Result<R>) -> Result<R> {
    let frame = thread_state::with(innermost_ptr);
    if frame.is_null() {
        return Err(Error::value("an AnyList function called outside a running VM TIR function"));
    }
    // SAFETY: `Entered` set a pointer to a live frame that its owner does not use while the
    // native code runs, and restores the outer one before the frame goes; every use of it is one of these
    // steps, none nested in another (see the module's note).
    step(unsafe { &mut *frame })
}

/// Runs C entry point `what` on the innermost frame: `Ok` with what the body made, or -1 with
/// the error raised for native code to report (and kept as the frame's failure). A frame that
/// failed before refuses (native code that goes on after a failure gets nothing more done). A
/// panic is caught here: it never unwinds into native code.
///
/// It runs inside the caller's kernel-call guard (unlike a call of a packed function, which
/// leaves it, `crate::ffi::guard::Unguarded`): the body only reads and writes the frame's own
/// memory and runs no destructor of a value (cells let go of are dropped later,
/// [`Cells::drop_released`]), so nothing it does writes to read-only pages, and a fault the
/// guard would jump over cannot happen in it. The one write to memory native code gave, its
/// argument stack, is made by the C entry point after this returns, as its last step: if that
/// faults on read-only pages, the jump skips only that entry point's frame, which holds
/// nothing to drop, and the function fails with the fault's error.
fn finish<R>(what: &str, body: impl FnOnce(&mut Frame) -> Result<R>) -> std::result::Result<R, i32> {
    let step = |frame: &mut Frame| match &frame.error {
        Some(e) => Err(Error::value(format!("{what}: VM TIR function {:?} failed before: {e}", frame.name))),
        None => body(frame),
    };
    let outcome = match catch_unwind(AssertUnwindSafe(|| with_innermost(step))) {
        Ok(r) => r,
        Err(_) => Err(Error::value(format!("{what} panicked"))),
    };
    outcome.map_err(|e| {
        raised::set_error(&e);
        fail(e);
        -1
    })
}

/// The innermost frame of this thread, when one runs and has not failed: the fast path of the
/// AnyList functions, which fall back to their checked path (with its errors) otherwise.
#[inline]
fn healthy_innermost() -> Option<*mut Frame> {
    let frame = thread_state::with(innermost_ptr);
    // SAFETY: a pointer `Entered` set to a live frame (see `with_innermost`), read only.
    (!frame.is_null() && unsafe { (*frame).error.is_none() }).then_some(frame)
}

/// `TVMBackendAnyListMoveFromPackedReturn`'s work when every check passes (false, with nothing
/// changed, otherwise: the checked path then says what failed).
///
/// # Safety
/// When `args` is not null and `offset` not negative, `args[offset]` is readable and writable.
#[inline]
unsafe fn move_fast(frame: &mut Frame, list: *mut c_void, index: i32, args: *mut TVMFFIAny, offset: i32) -> bool {
    let (Ok(offset), Ok(i)) = (usize::try_from(offset), usize::try_from(index)) else { return false };
    if args.is_null() || list.cast_const().cast::<TVMFFIAny>() != frame.regs.as_ptr() || i >= frame.regs.len() {
        return false;
    }
    // SAFETY: the caller's contract.
    let slot = unsafe { args.add(offset) };
    // SAFETY: as above.
    let new = unsafe { slot.read() };
    if !cells::storable(&new) || (cells::is_object(&new) && !frame.owned.hold(&new)) {
        return false;
    }
    let old = std::mem::replace(&mut frame.regs[i], new);
    frame.release(old);
    // SAFETY: as above; a move leaves None behind, as tvm-ffi's does. The last step (see
    // `finish`): nothing in this frame is left to drop.
    unsafe { slot.write(TVMFFIAny::NONE) };
    true
}

/// The register list of `frame`, which `list` must be: the only list native code may write.
fn registers_of<'f>(frame: &'f mut Frame, list: *mut c_void, what: &str) -> Result<&'f mut [TVMFFIAny]> {
    if list.cast_const().cast::<TVMFFIAny>() == frame.regs.as_ptr() {
        return Ok(&mut frame.regs[..]);
    }
    Err(Error::value(format!(
        "{what}: {list:p} is not the register list of the running function {:?} (the constant and function lists are read-only)",
        frame.name
    )))
}

/// Checks `index` against a list of `len` items.
fn checked(index: i32, len: usize, what: &str) -> Result<usize> {
    usize::try_from(index)
        .ok()
        .filter(|i| *i < len)
        .ok_or_else(|| Error::index(format!("{what}: list item"), index.into(), len))
}

/// `TVMBackendAnyListSetPackedArg(list, index, args, offset)`: `args[offset] = list[index]`,
/// a borrowed view for one call.
///
/// # Safety
/// `args` has room for `offset + 1` values (native code's argument stack).
#[no_mangle]
pub unsafe extern "C" fn RVMBackendAnyListSetPackedArg(
    list: *mut c_void,
    index: i32,
    args: *mut TVMFFIAny,
    offset: i32,
) -> i32 {
    // The path of every well-formed call: one read of the innermost frame, no error built.
    if let Some(frame) = healthy_innermost() {
        // SAFETY: as `with_innermost`'s; only read here.
        let frame = unsafe { &*frame };
        let item = frame.list(list).and_then(|items| items.get(usize::try_from(index).ok()?));
        if let (Some(item), Ok(offset)) = (item, usize::try_from(offset)) {
            if !args.is_null() {
                // SAFETY: the caller's contract: `args[offset]` is writable; nothing is left to
                // drop (see `finish`).
                unsafe { args.add(offset).write(*item) };
                return 0;
            }
        }
    }
    let what = "TVMBackendAnyListSetPackedArg";
    let item = finish(what, |frame| {
        let offset = usize::try_from(offset).map_err(|_| negative_offset(what))?;
        if args.is_null() {
            return Err(Error::value(format!("{what}: a null argument stack")));
        }
        let Some(items) = frame.list(list) else {
            return Err(Error::value(format!(
                "{what}: {list:p} is not a list of the running function {:?}",
                frame.name
            )));
        };
        Ok((offset, items[checked(index, items.len(), what)?]))
    });
    match item {
        Ok((offset, item)) => {
            // SAFETY: the caller's contract: `args[offset]` is writable. The last step (see
            // `finish`): nothing in this frame is left to drop.
            unsafe { args.add(offset).write(item) };
            0
        }
        Err(rc) => {
            if !args.is_null() {
                if let Ok(offset) = usize::try_from(offset) {
                    // TVM's code goes on after a failure: the slot must not keep what it held
                    // before (a value of an earlier call, maybe released since).
                    // SAFETY: the caller's contract: `args[offset]` is writable.
                    unsafe { args.add(offset).write(TVMFFIAny::NONE) };
                }
            }
            rc
        }
    }
}

/// `TVMBackendAnyListMoveFromPackedReturn(list, index, args, offset)`: moves the result of a
/// call (`args[offset]`, which must be a scalar or an object relaxvm returned) into register
/// `index`, releasing what the register held.
///
/// # Safety
/// `args[offset]` is readable and writable.
#[no_mangle]
pub unsafe extern "C" fn RVMBackendAnyListMoveFromPackedReturn(
    list: *mut c_void,
    index: i32,
    args: *mut TVMFFIAny,
    offset: i32,
) -> i32 {
    if let Some(frame) = healthy_innermost() {
        // SAFETY: as `with_innermost`'s; `args[offset]` is readable and writable (the caller's
        // contract, once checked non-null and the offset non-negative).
        if unsafe { move_fast(&mut *frame, list, index, args, offset) } {
            return 0;
        }
    }
    let what = "TVMBackendAnyListMoveFromPackedReturn";
    let slot = finish(what, |frame| {
        let offset = usize::try_from(offset).map_err(|_| negative_offset(what))?;
        if args.is_null() {
            return Err(Error::value(format!("{what}: a null result")));
        }
        // SAFETY: the caller's contract.
        let slot = unsafe { args.add(offset) };
        // SAFETY: as above.
        let new = unsafe { slot.read() };
        if !cells::storable(&new) {
            return Err(Error::value(format!(
                "{what}: a value of tvm-ffi type index {} cannot be kept in a register (a pointer relaxvm did not hand out)",
                new.type_index
            )));
        }
        let i = {
            let regs = registers_of(frame, list, what)?;
            checked(index, regs.len(), what)?
        };
        // One lookup checks the object and counts the register holding it (before the old
        // value is let go of: the same cell stored again keeps its count).
        if cells::is_object(&new) && !frame.owned.hold(&new) {
            return Err(cells::unknown_object(&new, what));
        }
        let old = std::mem::replace(&mut frame.regs[i], new);
        frame.release(old);
        Ok(slot)
    });
    match slot {
        Ok(slot) => {
            // SAFETY: as above; a move leaves None behind, as tvm-ffi's does. The last step
            // (see `finish`): nothing in this frame is left to drop.
            unsafe { slot.write(TVMFFIAny::NONE) };
            0
        }
        Err(rc) => rc,
    }
}

/// `TVMBackendAnyListResetItem(list, index)`: register `index` becomes None.
///
/// # Safety
/// None beyond the C signature: `list` is compared with the running function's lists, never
/// read unless it is one of them.
#[no_mangle]
pub unsafe extern "C" fn RVMBackendAnyListResetItem(list: *mut c_void, index: i32) -> i32 {
    let what = "TVMBackendAnyListResetItem";
    let done = finish(what, |frame| {
        let regs = registers_of(frame, list, what)?;
        let i = checked(index, regs.len(), what)?;
        let old = std::mem::replace(&mut regs[i], TVMFFIAny::NONE);
        frame.release(old);
        Ok(())
    });
    done.err().unwrap_or(0)
}

/// A call by native code of the innermost running function to the packed function `handle`
/// names (`TVMFFIFunctionCall` on a handle from the library's lookup): the arguments become
/// values, the call goes through the VM ([`CallCtx::call_named`]: a step, seen by the
/// instrument hook), and the result is stored for native code as a new cell of the frame.
///
/// # Safety
/// `args` holds `args.len()` values whose DLTensors and strings are live for the call;
/// `result` is writable.
pub unsafe fn call(frame: Innermost, handle: &Handle, args: &[TVMFFIAny], result: *mut TVMFFIAny) -> i32 {
    let name = handle.name.as_str();
    // Filled in place (a few hundred bytes, not moved through the results below).
    let mut values: SmallVec<[Value; 8]> = SmallVec::new();
    let mut copies = convert::CallbackArgs::default();
    let prepared = frame.with(|frame| {
        // Outside the kernel-call guard here (`services::function_call`): the values of the
        // cells let go of since the last call are dropped.
        frame.owned.drop_released();
        if let Some(e) = &frame.error {
            return Err(Error::value(format!(
                "a call of {name:?}: VM TIR function {:?} failed before: {e}",
                frame.name
            )));
        }
        let f = match frame.handles.resolve(handle) {
            Ok(f) => f,
            // Not the frame's failure: the call never started (native code reports it).
            Err(e) => return Ok(Err(e)),
        };
        values.reserve(args.len());
        for (i, a) in args.iter().enumerate() {
            // SAFETY: the caller's contract.
            values.push(unsafe { frame.value_of(a, &mut copies, &|| format!("argument {i} of a call of {name:?}")) }?);
        }
        Ok(Ok((f, frame.ctx, frame.sites.next(handle.index))))
    });
    let (f, ctx, mut site) = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            raised::set("RuntimeError".into(), e.to_string());
            return -1;
        }
        Err(e) => {
            raised::set_error(&e);
            fail(e);
            return -1;
        }
    };
    // SAFETY: `ctx` is the live context of the packed call running the innermost frame, which
    // its owner does not use while native code runs (see `super::invoke`); no other reference
    // to it is used during this call.
    let out = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: as above.
        let ctx = unsafe { &mut *ctx };
        match &mut site {
            Some(site) => ctx.call_native_code_at(name, f.func(), &values, &mut site.cache),
            None => ctx.call_named(name, &Value::Func(Arc::new(f.func().clone())), &values),
        }
    }))
    .unwrap_or_else(|p| Err(Error::value(format!("{name} panicked: {}", relaxvm::packed::panic_message(&*p)))));
    drop(values);
    // SAFETY: the DLTensors native code passed are still live (it is inside this call).
    unsafe { copies.write_back() };
    let stored = frame.with(|frame| {
        if let Some(site) = site {
            frame.sites.put_back(site);
        }
        frame.handles.give_back(handle.index, f);
        let v = out?;
        let ctx_ptr = frame.ctx_ptr();
        frame.owned.hand_out(v, ctx_ptr, &mut frame.staged)
    });
    match stored {
        Ok(any) => {
            // SAFETY: the caller's contract.
            unsafe { result.write(any) };
            0
        }
        Err(e) => {
            raised::set_error(&e);
            fail(e);
            -1
        }
    }
}

/// The refusal of a negative argument-stack offset, named by the callback (`what`) that got it.
fn negative_offset(what: &str) -> Error {
    Error::value(format!("{what}: negative offset"))
}
