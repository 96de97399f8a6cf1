//! This thread's state for calls into kernel code, in one thread-local: the innermost guard
//! (`guard.rs`), whether the raised-error slot may hold something (`raised.rs`) and the
//! innermost running VM TIR function (`crate::vmtir::frame`). A kernel call reads the first
//! two, a call of native code back into relaxvm (`services::function_call`) the first and the
//! last; in a dynamically loaded library (the Python extension) each thread-local is a call
//! into the dynamic loader (`__tls_get_addr`, about 11 instructions), so one block makes one
//! lookup a call instead of two or three.

use std::cell::Cell;
use std::ffi::c_void;

/// See the module docs.
pub(crate) struct ThreadState {
    /// The innermost guard of this thread (a `struct guard *` of `csrc/guard.c`), or null
    /// outside guarded calls. The signal handler reads it through [`top_slot`].
    top: Cell<*mut c_void>,
    /// False only while this thread's raised-error slot is surely empty (see `raised.rs`).
    raised_dirty: Cell<bool>,
    /// The innermost running VM TIR function of this thread (a `crate::vmtir::frame::Frame`,
    /// null when none runs): only `vmtir::frame` reads and writes it.
    innermost: Cell<*mut c_void>,
}

thread_local! {
    /// Const-initialised and without a destructor: an access is a plain thread-local access
    /// (no lazy initialisation, no destructor registration, no failure), which the signal
    /// handler relies on (see [`top_slot`]).
    static STATE: ThreadState = const {
        ThreadState {
            top: Cell::new(std::ptr::null_mut()),
            raised_dirty: Cell::new(false),
            innermost: Cell::new(std::ptr::null_mut()),
        }
    };
}

const _: () = assert!(!std::mem::needs_drop::<ThreadState>());

/// Runs `f` with this thread's state (one lookup).
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadState) -> R) -> R {
    // The address only, taken by a closure small enough that `LocalKey::with` is inlined (a
    // kernel call's closure is not: the compiler then called the thread-local's accessor
    // through a function pointer, about 30 instructions more a call).
    let state: *const ThreadState = STATE.with(std::ptr::from_ref);
    // SAFETY: the address of this thread's `STATE`, which lives until the thread exits (it
    // has no destructor, so it is never torn down before). The reference is used on this
    // thread only: by `f`, and past it by what `f` returns only when that is not `Send` and
    // is dropped on this thread before it exits (`guard::Unguarded` keeps the address so; see
    // its `Drop`). `ThreadState` is only read and written through `Cell`s.
    f(unsafe { &*state })
}

impl ThreadState {
    /// Where this thread's innermost guard is kept, for the C side.
    #[inline]
    pub(crate) fn top(&self) -> *mut *mut c_void {
        self.top.as_ptr()
    }

    /// This thread's innermost guard, or null outside guarded calls.
    #[cfg(test)]
    pub(crate) fn top_guard(&self) -> *mut c_void {
        self.top.get()
    }

    /// Makes `top` this thread's innermost guard (null: outside guarded calls); the one before.
    #[inline]
    pub(crate) fn replace_top(&self, top: *mut c_void) -> *mut c_void {
        self.top.replace(top)
    }

    /// Whether the raised-error slot may hold something.
    #[inline]
    pub(crate) fn raised_dirty(&self) -> bool {
        self.raised_dirty.get()
    }

    /// The innermost running VM TIR function of this thread (null when none runs).
    #[inline]
    pub(crate) fn innermost(&self) -> *mut c_void {
        self.innermost.get()
    }

    /// Makes `frame` the innermost running VM TIR function of this thread; the one before.
    #[inline]
    pub(crate) fn replace_innermost(&self, frame: *mut c_void) -> *mut c_void {
        self.innermost.replace(frame)
    }

    /// Marks the raised-error slot as possibly holding something (`true`) or surely empty.
    #[inline]
    pub(crate) fn set_raised_dirty(&self, dirty: bool) {
        self.raised_dirty.set(dirty);
    }
}

/// The signal handler's way to this thread's guard slot (`csrc/guard.c`).
///
/// Async-signal-safe as the handler uses it: the thread-local is const-initialised and has no
/// destructor, so an access only computes its address — except that a thread's first access
/// to a thread-local of a dynamically loaded library may allocate the library's block, which a
/// handler must not do. The handler calls this only for a fault on registered read-only pages,
/// which no code but a guarded kernel writes to (relaxvm refuses every write of its own, and
/// numpy's views of constants are read-only), and a thread that ran a guarded call has its
/// block already. (Initial-exec TLS would need no block, but does not fit the static TLS space
/// a dlopened library may use.)
pub(crate) extern "C" fn top_slot() -> *mut *mut c_void {
    with(ThreadState::top)
}
