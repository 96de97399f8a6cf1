//! The runtime services a TVM library reaches through its `__TVM*` pointer slots: workspace
//! memory, and calls from kernels back into packed functions by name (sort and top-k kernels
//! call `tvm.contrib.sort.*`). Parallel launch and the barrier live in `pool.rs`.

use super::abi::TVMFFIAny;
use super::convert;
use super::function_handle::Handle;
use super::mapped_blocks;
use super::raised;
use super::small_blocks;
use relaxvm::{CallCtx, Value};
use std::alloc::Layout;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// Workspace blocks are aligned like relaxvm's tensors; the block's size is kept in a header of
/// this many bytes in front of it, so that freeing needs only the pointer.
pub(super) const WORKSPACE_HEADER: usize = relaxvm::storage::ALIGNMENT;

/// Workspaces of at least this many bytes (with the header) are mapped from the system, and
/// the blocks freed are kept for the next workspaces ([`super::mapped_blocks`], as TVM's
/// workspace pool keeps them). Kernels take and free large workspaces (a convolution's padded
/// input) at every call, often on pool threads: through `malloc`, each free of a mapped block
/// raises the allocator's mapping threshold, later blocks then come from the heap or a thread's
/// arena and stay resident after they are freed (a run's peak memory then depends on which
/// thread freed what), outside any bound. Mapped here, what stays resident is what the bounded
/// cache keeps. (The size of `malloc`'s initial mapping threshold.)
const MAPPED_WORKSPACE: usize = 128 << 10;

/// `TVMBackendAllocWorkspace(device_type, device_id, nbytes, dtype_code_hint, dtype_bits_hint)`:
/// 64-byte-aligned memory, or null (the kernel then reports an error) when it cannot be had.
pub extern "C" fn alloc_workspace(
    device_type: i32,
    _device_id: i32,
    nbytes: u64,
    _code: i32,
    _bits: i32,
) -> *mut c_void {
    if device_type != 1 {
        raised::set(
            "RuntimeError".into(),
            format!("workspace requested on device type {device_type}; relaxvm runs CPU kernels"),
        );
        return std::ptr::null_mut();
    }
    let total = usize::try_from(nbytes).ok().and_then(|n| n.checked_add(WORKSPACE_HEADER));
    let Some(layout) = total.and_then(|t| Layout::from_size_align(t, WORKSPACE_HEADER).ok()) else {
        raised::set("MemoryError".into(), format!("cannot allocate a workspace of {nbytes} bytes"));
        return std::ptr::null_mut();
    };
    let (size, base) = if layout.size() >= MAPPED_WORKSPACE {
        mapped_blocks::PROCESS.take_or_map(layout.size())
    } else {
        small_blocks::take_or_alloc(layout.size())
    };
    if base.is_null() {
        raised::set("MemoryError".into(), format!("cannot allocate a workspace of {nbytes} bytes"));
        return std::ptr::null_mut();
    }
    // SAFETY: `base` is valid for `size` bytes (at least `layout.size()`), aligned to 64, so the
    // header fits.
    unsafe {
        base.cast::<usize>().write(size);
        base.add(WORKSPACE_HEADER).cast()
    }
}

/// `TVMBackendFreeWorkspace(device_type, device_id, ptr)`.
///
/// # Safety
/// `ptr` is null or was returned by [`alloc_workspace`] and not freed since.
pub unsafe extern "C" fn free_workspace(_device_type: i32, _device_id: i32, ptr: *mut c_void) -> i32 {
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: `ptr` came from `alloc_workspace`, so the header sits WORKSPACE_HEADER bytes
    // before it and records the length of the block, which tells where it came from: mapped
    // (at least MAPPED_WORKSPACE bytes, the mapping's whole length, from the process's cache)
    // or from the small blocks (below it, the block's whole length). The kernel is done with
    // it, so a cache may keep it.
    unsafe {
        let base = ptr.cast::<u8>().sub(WORKSPACE_HEADER);
        let size = base.cast::<usize>().read();
        if size >= MAPPED_WORKSPACE {
            mapped_blocks::PROCESS.give_back(size, base);
        } else {
            small_blocks::give_back(size, base);
        }
    }
    0
}

/// The handles given out, one per name, process-wide: libraries cache them in their globals, and
/// the same file opened twice shares one mapping, so no library may own them.
// Boxed so each handle keeps its address while the table grows.
#[allow(clippy::vec_box)]
static HANDLES: Mutex<Vec<Box<Handle>>> = Mutex::new(Vec::new());

fn handle_for(name: &str) -> *mut c_void {
    let mut handles = HANDLES.lock().unwrap_or_else(|p| p.into_inner());
    let h = match handles.iter().position(|h| h.name == name) {
        Some(i) => &handles[i],
        None => {
            let index = handles.len();
            handles.push(Box::new(Handle { name: name.to_string(), index }));
            handles.last().expect("just pushed")
        }
    };
    // The Box never moves or drops (the table only grows), so the pointer stays valid.
    (&**h as *const Handle).cast_mut().cast()
}

/// The value the loader stores in a library's `__tvm_ffi__library_ctx` slot; lookups ignore
/// it (every library resolves names in the same registry), but it must not be null.
pub static LIBRARY_CTX: u8 = 0;

/// `TVMFFIEnvModLookupFromImports(library_ctx, name, &out)`: a handle for the packed function
/// `name` of relaxvm's registry; an error when nothing is registered under that name.
///
/// # Safety
/// `name` is a NUL-terminated string and `out` is writable.
pub unsafe extern "C" fn lookup_from_imports(_ctx: *mut c_void, name: *const c_char, out: *mut *mut c_void) -> i32 {
    if name.is_null() || out.is_null() {
        raised::set("RuntimeError".into(), "function lookup with a null argument".into());
        return -1;
    }
    // SAFETY: the caller's contract.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    if !relaxvm::registry::global().contains(&name) {
        raised::set(
            "RuntimeError".into(),
            format!("a kernel looked up packed function {name:?}, which is not registered"),
        );
        return -1;
    }
    // SAFETY: `out` is writable (the caller's contract).
    unsafe { *out = handle_for(&name) };
    0
}

/// `TVMFFIFunctionCall(handle, args, num_args, result)`: calls a handle from
/// [`lookup_from_imports`] with arguments converted from tvm-ffi values. Tensors are owned
/// copies of the kernel's memory, whose changes are written back when the function returns
/// ([`convert::CallbackArgs`]): a function that keeps one never reaches memory the kernel
/// frees.
///
/// # Safety
/// `handle` came from `lookup_from_imports` of a live library; `args` holds `num_args` values;
/// `result` is writable.
pub unsafe extern "C" fn function_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    // One thread-local lookup finds this thread's guard and its running VM TIR function.
    // SAFETY: the caller's contract.
    super::thread_state::with(|state| unsafe { function_call_in(state, handle, args, num_args, result) })
}

/// [`function_call`] with this thread's state at hand (`state` is this thread's).
///
/// # Safety
/// As [`function_call`].
unsafe fn function_call_in(
    state: &super::thread_state::ThreadState,
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    // Rust code from here on: a fault in it is never jumped over by the kernel-call guard.
    let _unguarded = super::guard::Unguarded::enter_in(state);
    if handle.is_null() || result.is_null() || (args.is_null() && num_args > 0) {
        raised::set("RuntimeError".into(), "function call with a null argument".into());
        return -1;
    }
    // SAFETY: the caller's contract: a pointer from `handle_for`, never freed.
    let handle = unsafe { &*(handle as *const Handle) };
    let n = usize::try_from(num_args).unwrap_or(0);
    // SAFETY: `args` holds `num_args` values (checked non-null when n > 0).
    let args = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(args, n) } };
    if let Some(frame) = crate::vmtir::frame::innermost_in(state) {
        // A call of a compiled function's native code (or of a kernel it runs on this thread):
        // through the VM, with its objects (see crate::vmtir).
        // SAFETY: the caller's contract, as below.
        return unsafe { crate::vmtir::frame::call(frame, handle, args, result) };
    }
    let func = match relaxvm::registry::get_global(&handle.name) {
        Ok(f) => f,
        Err(e) => {
            raised::set("RuntimeError".into(), e.to_string());
            return -1;
        }
    };
    let mut copies = convert::CallbackArgs::default();
    // SAFETY: every DLTensor and string pointer among `args` is live for this call (the
    // kernel's own), and its elements stay writable until the kernel's call returns.
    let values = match args.iter().map(|a| unsafe { copies.value(a) }).collect::<relaxvm::Result<Vec<Value>>>() {
        Ok(v) => v,
        Err(e) => {
            raised::set("TypeError".into(), format!("{}: {e}", func.name()));
            return -1;
        }
    };
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| func.call(&mut CallCtx::detached(), &values)));
    drop(values);
    // SAFETY: the kernel is still inside this call, so the memory of its DLTensors is live.
    // What the function wrote goes back even when it failed, as it would have in place.
    unsafe { copies.write_back() };
    match out {
        Ok(Ok(v)) => match convert::result_to_ffi(&v) {
            Ok(any) => {
                // SAFETY: `result` is writable.
                unsafe { *result = any };
                0
            }
            Err(e) => {
                raised::set("TypeError".into(), format!("{}: {e}", func.name()));
                -1
            }
        },
        Ok(Err(e)) => {
            raised::set_error(&e);
            -1
        }
        Err(_) => {
            raised::set("RuntimeError".into(), format!("{} panicked", func.name()));
            -1
        }
    }
}

/// `TVMFFIHandleInitOnce(handle_addr, init)`: runs `init` the first time, storing its result in
/// `*handle_addr`; later calls see the stored handle. One lock serializes first calls.
///
/// # Safety
/// `handle_addr` is a valid, pointer-aligned location (a library global); `init` is callable.
pub unsafe extern "C" fn handle_init_once(
    handle_addr: *mut *mut c_void,
    init: Option<unsafe extern "C" fn(*mut *mut c_void) -> i32>,
) -> i32 {
    static LOCK: Mutex<()> = Mutex::new(());
    let Some(init) = init else { return -1 };
    if handle_addr.is_null() {
        return -1;
    }
    // SAFETY: the caller's contract: a valid, pointer-aligned location, which every caller
    // (this function, under the lock) writes atomically.
    let slot = unsafe { AtomicPtr::from_ptr(handle_addr) };
    // Native code calls this before every use of a handle (a compiled function, at each call of
    // a builtin): once set, the handle is read without the lock, and still inside the kernel-call
    // guard (a fault of this one read, as of a kernel's own, skips a frame owning nothing).
    if !slot.load(Ordering::Acquire).is_null() {
        return 0;
    }
    // Rust code holding a lock around `init`: a fault is never jumped over by the guard.
    let _unguarded = super::guard::Unguarded::enter();
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if !slot.load(Ordering::Acquire).is_null() {
        return 0;
    }
    let mut out = std::ptr::null_mut();
    // SAFETY: the caller's contract: `init` is callable; the lock orders first initializations.
    let rc = unsafe { init(&mut out) };
    if rc == 0 {
        slot.store(out, Ordering::Release);
    }
    rc
}

#[cfg(test)]
#[path = "services_tests.rs"]
mod tests;
