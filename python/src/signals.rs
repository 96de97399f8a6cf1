//! Ctrl-C during a long native run: the VM's poll hook runs Python's signal handlers.

use crate::errors::from_pyerr;
use pyo3::prelude::*;

/// The thread that imported the module: CPython runs signal handlers only in the main thread,
/// which is where `import` almost always happens.
static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// Records the calling thread as the one that receives signals (called at module import).
pub fn note_main_thread() {
    MAIN_THREAD.get_or_init(|| std::thread::current().id());
}

/// The VM's poll hook: lets other threads take the GIL in a call that keeps it
/// ([`crate::kept_call::yield_if_kept`]), then, on the main thread, runs Python's signal handlers
/// (briefly taking the GIL), so Ctrl-C stops a long native run with `KeyboardInterrupt`.
pub fn deliver_signals() -> relaxvm::Result<()> {
    crate::kept_call::yield_if_kept();
    if MAIN_THREAD.get() != Some(&std::thread::current().id()) {
        return Ok(());
    }
    Python::attach(|py| py.check_signals()).map_err(from_pyerr)
}
