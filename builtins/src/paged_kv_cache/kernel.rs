//! How the cache calls a kernel: through the calling VM as a named call
//! ([`CallCtx::call_named`]), so that each kernel call is a step of the VM (its limits and
//! interrupts) and an event the profiler and tracer record, under the kernel's own name and at
//! the instruction of the cache builtin that made it. A plain run pays a step count per call.

use relaxvm::{CallCtx, Result, Value};

/// Calls kernel `f` (named `what` in errors) with `args`.
pub(crate) fn call_kernel(ctx: &mut CallCtx<'_>, f: &Value, what: &str, args: &[Value]) -> Result<()> {
    let name = f.as_func().map_err(|e| e.context(&format!("{what} kernel")))?.name();
    ctx.call_named(name, f, args).map(drop).map_err(|e| e.context(&format!("{what} kernel")))
}
