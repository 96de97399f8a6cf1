//! The running VM TIR functions of each thread, and what their native code calls: the three
//! AnyList functions TVM's runtime exports (`TVMBackendAnyList*`), and calls of packed
//! functions through `TVMFFIFunctionCall` (routed here by `ffi::services`).
//!
//! A [`Frame`] lives on the Rust stack of [`super::invoke`] while its native function runs,
//! and is reachable from the callbacks through a thread-local stack of pointers. Only the
//! innermost frame is ever used, and only for the length of one callback step (never across
//! a call into the VM, which may push and pop frames of its own): so no two mutable borrows of
//! one frame exist at once.

use super::cells::{self, Cells, Prepared, Staged};
use crate::ffi::abi::{type_index, TVMFFIAny};
use crate::ffi::{convert, raised};
use relaxvm::{CallCtx, Callable, Closure, Error, Result, Value};
use std::cell::RefCell;
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
    /// never outlives that call, see [`super::invoke`]).
    pub ctx: *mut CallCtx<'static>,
    /// Tensors passed to native code as copies, written back when the function returns.
    pub staged: Vec<Staged>,
    /// The first failure of a callback of this function (a call, an AnyList function): the
    /// function's error, given to the caller unchanged (its kind, a Python exception it
    /// carries), even when the machine code goes on (TVM's code ignores the AnyList functions'
    /// return codes). Once set, every later callback of the function refuses.
    pub error: Option<Error>,
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
    unsafe fn value_of(&self, a: &TVMFFIAny, copies: &mut convert::CallbackArgs, what: &str) -> Result<Value> {
        if cells::is_object(a) {
            let address = a.payload as usize;
            let found = self.owned.get(address).or_else(|| self.consts.cells.get(address));
            return found
                .or_else(|| self.funcs.cells.get(address))
                .cloned()
                .ok_or_else(|| cells::unknown_object(a, what));
        }
        if a.type_index == type_index::OPAQUE_PTR {
            return if a.as_ptr().cast_const() == self.ctx_ptr() {
                Ok(Value::VmState)
            } else {
                Err(Error::value(format!("{what}: an opaque pointer {:#x} that is not the VM context", a.payload)))
            };
        }
        // SAFETY: the caller's contract.
        unsafe { copies.value(a) }
    }

    /// Releases the cell `old` held, unless another register still holds it.
    fn release(&mut self, old: TVMFFIAny) {
        if cells::is_object(&old) && !self.regs.iter().any(|r| cells::is_object(r) && r.payload == old.payload) {
            self.owned.remove(old.payload as usize);
        }
    }
}

thread_local! {
    /// The running VM TIR functions of this thread, innermost last.
    static FRAMES: RefCell<Vec<*mut Frame>> = const { RefCell::new(Vec::new()) };
}

/// Keeps `frame` the innermost running function of this thread while it lives.
pub struct Entered(());

impl Entered {
    /// Pushes `frame`; it must stay in place, unused by its owner, until this is dropped.
    pub fn enter(frame: *mut Frame) -> Self {
        FRAMES.with(|f| f.borrow_mut().push(frame));
        Entered(())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        FRAMES.with(|f| f.borrow_mut().pop());
    }
}

/// Whether a VM TIR function runs on this thread (its native code's calls then come here).
pub fn running() -> bool {
    FRAMES.with(|f| !f.borrow().is_empty())
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

/// An error when the innermost frame failed before: native code that goes on after a failure
/// gets nothing more done.
fn refuse_after_failure(what: &str) -> Result<()> {
    with_innermost(|frame| match &frame.error {
        Some(e) => Err(Error::value(format!("{what}: VM TIR function {:?} failed before: {e}", frame.name))),
        None => Ok(()),
    })
}

/// Runs `step` on the innermost frame; an error (`RuntimeError`) when there is none.
fn with_innermost<R>(step: impl FnOnce(&mut Frame) -> Result<R>) -> Result<R> {
    let frame = FRAMES.with(|f| f.borrow().last().copied());
    let Some(frame) = frame else {
        return Err(Error::value("an AnyList function called outside a running VM TIR function"));
    };
    // SAFETY: `Entered` pushed a pointer to a live frame that its owner does not use while the
    // native code runs, and pops it before the frame goes; every use of it is one of these
    // steps, none nested in another (see the module's note).
    step(unsafe { &mut *frame })
}

/// Ends a C entry point: 0, or -1 with the error raised for native code to report. A panic is
/// caught here: it never unwinds into native code.
fn finish(what: &str, body: impl FnOnce() -> Result<()>) -> i32 {
    let _unguarded = crate::ffi::guard::Unguarded::enter();
    let outcome = match catch_unwind(AssertUnwindSafe(|| refuse_after_failure(what).and_then(|()| body()))) {
        Ok(r) => r,
        Err(_) => Err(Error::value(format!("{what} panicked"))),
    };
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            raised::set_error(&e);
            fail(e);
            -1
        }
    }
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

/// Whether `list` is a list of the function running innermost on this thread: a call of an
/// AnyList function that relaxvm's machine code did not make otherwise (another runtime's).
fn is_ours(list: *mut c_void) -> bool {
    let p = list.cast_const().cast::<TVMFFIAny>();
    with_innermost(|frame| {
        Ok(p == frame.regs.as_ptr() || p == frame.consts.anys.as_ptr() || p == frame.funcs.anys.as_ptr())
    })
    .unwrap_or(false)
}

/// Another runtime's definition of `symbol` (TVM's, in its `libtvm_runtime`): a library that
/// runtime loads after relaxvm made its symbols global binds relaxvm's AnyList functions, which
/// hand the calls for lists that are not relaxvm's on to it. Looked for after relaxvm's in the
/// global scope, then in every loaded object (TVM loads its runtime privately); found once.
fn next_definition(symbol: &std::ffi::CStr, ours: *const c_void) -> Option<*const c_void> {
    use std::sync::Mutex;
    static FOUND: Mutex<Vec<(&'static str, usize)>> = Mutex::new(Vec::new());
    let key = symbol.to_str().ok()?;
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, at)) = found.iter().find(|(k, _)| *k == key) {
        return Some(*at as *const c_void);
    }
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name only reads the loader's tables.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, symbol.as_ptr()) }.cast_const();
    let at = if !next.is_null() && next != ours { Some(next) } else { in_loaded_objects(symbol, ours) }?;
    // The names are the three AnyList functions (static strings in this file).
    let key: &'static str =
        ["TVMBackendAnyListSetPackedArg", "TVMBackendAnyListMoveFromPackedReturn", "TVMBackendAnyListResetItem"]
            .into_iter()
            .find(|k| *k == key)?;
    found.push((key, at as usize));
    Some(at)
}

/// A definition of `symbol` other than `ours` in any loaded object.
fn in_loaded_objects(symbol: &std::ffi::CStr, ours: *const c_void) -> Option<*const c_void> {
    let mut names: Vec<std::ffi::CString> = Vec::new();
    unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
        // SAFETY: dl_iterate_phdr passes a valid info and our `names` vector as `data`.
        let (info, names) = unsafe { (&*info, &mut *(data as *mut Vec<std::ffi::CString>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: a NUL-terminated path of a loaded object.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                names.push(name.to_owned());
            }
        }
        0
    }
    // SAFETY: the callback only reads what the loader passes and pushes to `names`.
    unsafe { libc::dl_iterate_phdr(Some(collect), (&mut names as *mut Vec<std::ffi::CString>).cast()) };
    names.iter().find_map(|name| {
        // SAFETY: RTLD_NOLOAD loads nothing: it returns a handle of an object already loaded,
        // kept (never closed) so that the definition found stays mapped.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return None;
        }
        // SAFETY: a live handle and a NUL-terminated name.
        let at = unsafe { libc::dlsym(handle, symbol.as_ptr()) }.cast_const();
        (!at.is_null() && at != ours).then_some(at)
    })
}

type MoveFn = unsafe extern "C" fn(*mut c_void, i32, *mut TVMFFIAny, i32) -> i32;
type ResetFn = unsafe extern "C" fn(*mut c_void, i32) -> i32;

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
pub unsafe extern "C" fn TVMBackendAnyListSetPackedArg(
    list: *mut c_void,
    index: i32,
    args: *mut TVMFFIAny,
    offset: i32,
) -> i32 {
    if !is_ours(list) {
        let ours = TVMBackendAnyListSetPackedArg as MoveFn as *const c_void;
        if let Some(next) = next_definition(c"TVMBackendAnyListSetPackedArg", ours) {
            // SAFETY: the next definition of this C function, with the same signature
            // (TVM's runtime), called with the caller's arguments.
            return unsafe { std::mem::transmute::<*const c_void, MoveFn>(next)(list, index, args, offset) };
        }
    }
    let rc = finish("TVMBackendAnyListSetPackedArg", || {
        let what = "TVMBackendAnyListSetPackedArg";
        let offset = usize::try_from(offset).map_err(|_| Error::value(format!("{what}: negative offset")))?;
        if args.is_null() {
            return Err(Error::value(format!("{what}: a null argument stack")));
        }
        let item = with_innermost(|frame| {
            let p = list.cast_const().cast::<TVMFFIAny>();
            let items: &[TVMFFIAny] = if p == frame.regs.as_ptr() {
                &frame.regs
            } else if p == frame.consts.anys.as_ptr() {
                &frame.consts.anys
            } else if p == frame.funcs.anys.as_ptr() {
                &frame.funcs.anys
            } else {
                return Err(Error::value(format!(
                    "{what}: {list:p} is not a list of the running function {:?}",
                    frame.name
                )));
            };
            Ok(items[checked(index, items.len(), what)?])
        })?;
        // SAFETY: the caller's contract: `args[offset]` is writable.
        unsafe { args.add(offset).write(item) };
        Ok(())
    });
    if rc != 0 && !args.is_null() {
        if let Ok(offset) = usize::try_from(offset) {
            // TVM's code goes on after a failure: the slot must not keep what it held before
            // (a value of an earlier call, maybe released since).
            // SAFETY: the caller's contract: `args[offset]` is writable.
            unsafe { args.add(offset).write(TVMFFIAny::NONE) };
        }
    }
    rc
}

/// `TVMBackendAnyListMoveFromPackedReturn(list, index, args, offset)`: moves the result of a
/// call (`args[offset]`, which must be a scalar or an object relaxvm returned) into register
/// `index`, releasing what the register held.
///
/// # Safety
/// `args[offset]` is readable and writable.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListMoveFromPackedReturn(
    list: *mut c_void,
    index: i32,
    args: *mut TVMFFIAny,
    offset: i32,
) -> i32 {
    if !is_ours(list) {
        let ours = TVMBackendAnyListMoveFromPackedReturn as MoveFn as *const c_void;
        if let Some(next) = next_definition(c"TVMBackendAnyListMoveFromPackedReturn", ours) {
            // SAFETY: as in `TVMBackendAnyListSetPackedArg`.
            return unsafe { std::mem::transmute::<*const c_void, MoveFn>(next)(list, index, args, offset) };
        }
    }
    finish("TVMBackendAnyListMoveFromPackedReturn", || {
        let what = "TVMBackendAnyListMoveFromPackedReturn";
        let offset = usize::try_from(offset).map_err(|_| Error::value(format!("{what}: negative offset")))?;
        if args.is_null() {
            return Err(Error::value(format!("{what}: a null result")));
        }
        // SAFETY: the caller's contract.
        let slot = unsafe { args.add(offset) };
        // SAFETY: as above.
        let new = unsafe { slot.read() };
        with_innermost(|frame| {
            if cells::is_object(&new) && !frame.owned.contains(new.payload as usize) {
                return Err(cells::unknown_object(&new, what));
            }
            if !cells::storable(&new) {
                return Err(Error::value(format!(
                    "{what}: a value of tvm-ffi type index {} cannot be kept in a register (a pointer relaxvm did not hand out)",
                    new.type_index
                )));
            }
            let regs = registers_of(frame, list, what)?;
            let i = checked(index, regs.len(), what)?;
            let old = std::mem::replace(&mut regs[i], new);
            if old.payload != new.payload || old.type_index != new.type_index {
                frame.release(old);
            }
            Ok(())
        })?;
        // SAFETY: as above; a move leaves None behind, as tvm-ffi's does.
        unsafe { slot.write(TVMFFIAny::NONE) };
        Ok(())
    })
}

/// `TVMBackendAnyListResetItem(list, index)`: register `index` becomes None.
///
/// # Safety
/// A list that is not relaxvm's goes to the next definition (another runtime's), which
/// requires `list` to be that runtime's list with an item `index`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAnyListResetItem(list: *mut c_void, index: i32) -> i32 {
    if !is_ours(list) {
        let ours = TVMBackendAnyListResetItem as ResetFn as *const c_void;
        if let Some(next) = next_definition(c"TVMBackendAnyListResetItem", ours) {
            // SAFETY: as in `TVMBackendAnyListSetPackedArg`.
            return unsafe { std::mem::transmute::<*const c_void, ResetFn>(next)(list, index) };
        }
    }
    finish("TVMBackendAnyListResetItem", || {
        let what = "TVMBackendAnyListResetItem";
        with_innermost(|frame| {
            let regs = registers_of(frame, list, what)?;
            let i = checked(index, regs.len(), what)?;
            let old = std::mem::replace(&mut regs[i], TVMFFIAny::NONE);
            frame.release(old);
            Ok(())
        })
    })
}

/// A call by native code of the innermost running function to packed function `name` of the
/// registry (`TVMFFIFunctionCall` on a handle from the library's lookup): the arguments become
/// values, the call goes through the VM ([`CallCtx::call_named`]: a step, seen by the
/// instrument hook), and the result is stored for native code as a new cell of the frame.
///
/// # Safety
/// `args` holds `args.len()` values whose DLTensors and strings are live for the call;
/// `result` is writable.
pub unsafe fn call(name: &str, func: relaxvm::PackedFunc, args: &[TVMFFIAny], result: *mut TVMFFIAny) -> i32 {
    let what = format!("a call of {name:?}");
    if let Err(e) = refuse_after_failure(&what) {
        raised::set_error(&e);
        return -1;
    }
    let mut copies = convert::CallbackArgs::default();
    let prepared = with_innermost(|frame| {
        let values = args
            .iter()
            .enumerate()
            // SAFETY: the caller's contract.
            .map(|(i, a)| unsafe { frame.value_of(a, &mut copies, &format!("argument {i} of {what}")) })
            .collect::<Result<Vec<Value>>>()?;
        Ok((values, frame.ctx))
    });
    let (values, ctx) = match prepared {
        Ok(p) => p,
        Err(e) => {
            raised::set_error(&e);
            fail(e);
            return -1;
        }
    };
    let f = Value::Func(Arc::new(Closure { callable: Callable::Packed(func), captured: Vec::new() }));
    // SAFETY: `ctx` is the live context of the packed call running the innermost frame, which
    // its owner does not use while native code runs (see `super::invoke`); no other reference
    // to it is used during this call.
    let out = catch_unwind(AssertUnwindSafe(|| unsafe { &mut *ctx }.call_named(name, &f, &values)))
        .unwrap_or_else(|p| Err(Error::value(format!("{name} panicked: {}", relaxvm::packed::panic_message(&*p)))));
    drop(values);
    // SAFETY: the DLTensors native code passed are still live (it is inside this call).
    unsafe { copies.write_back() };
    match out {
        Ok(v) => {
            let stored = with_innermost(|frame| {
                let ctx_ptr = frame.ctx_ptr();
                let mut staged = std::mem::take(&mut frame.staged);
                let any = frame.owned.hand_out(v, ctx_ptr, &mut staged);
                frame.staged = staged;
                any
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
        Err(e) => {
            raised::set_error(&e);
            fail(e);
            -1
        }
    }
}
