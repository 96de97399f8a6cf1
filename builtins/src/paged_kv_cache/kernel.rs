//! How the cache calls a kernel: through the calling VM as an observed call
//! ([`CallCtx::call_observed`]), so that each kernel call is an event the profiler and tracer
//! record, under the kernel's own name and at the instruction of the cache builtin that made
//! it. It is no step of the VM: an operation runs its kernels layer by layer under the cache's
//! lock, and a step budget or an interrupt stopping it between two layers would leave some
//! layers' pages changed (a commit's compaction half done) where the rollback restores only
//! the page table.

use relaxvm::{CallCtx, Result, Value};

/// Calls kernel `f` (named `what` in errors) with `args`.
pub(crate) fn call_kernel(ctx: &mut CallCtx<'_>, f: &Value, what: &str, args: &[Value]) -> Result<()> {
    let name = f.as_func().map_err(|e| e.context(&format!("{what} kernel")))?.name();
    ctx.call_observed(name, f, args).map(drop).map_err(|e| e.context(&format!("{what} kernel")))
}
