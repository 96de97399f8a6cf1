//! `VirtualMachine::profile` and `VirtualMachine::trace`: one run with the profiler's or the
//! tracer's recorder as the instrument hook.

use super::VirtualMachine;
use super::{InstrumentAction, InstrumentCall};
use crate::code::Callee;
use crate::error::{Error, Result};
use crate::profile::{CallKind, ProfileReport, Recorder};
#[cfg(feature = "tooling")]
use crate::trace::{Trace, TraceOptions, TraceRecorder, TracedError};
use crate::value::Value;
use std::sync::{Arc, Mutex};
use std::time::Instant;

impl VirtualMachine {
    /// Allows [`profile`](Self::profile) (TVM's `profile=True`); off by default, so that
    /// profiling is always asked for. Runs are not slower either way: profiling is a separate
    /// entry point.
    pub fn set_profiling_enabled(&mut self, enabled: bool) {
        self.profiling = enabled;
    }

    /// Whether [`profile`](Self::profile) may run.
    pub fn profiling_enabled(&self) -> bool {
        self.profiling
    }

    /// Runs function `name` once with `args`, timing every call it makes (see
    /// [`crate::profile`]). Needs [`set_profiling_enabled`](Self::set_profiling_enabled): a VM
    /// without it refuses, so that profiling is always asked for. An instrument hook installed
    /// with [`set_instrument`](Self::set_instrument) is set aside for the run and restored
    /// after it, also when the run fails; the error is the run's.
    pub fn profile(&mut self, name: &str, args: &[Value]) -> Result<ProfileReport> {
        if !self.profiling {
            return Err(Error::value(
                "this VM was built without profiling: enable it with \
                 VirtualMachine::set_profiling_enabled(true) (Python: VirtualMachine(ex, profile=True); CLI: \
                 relaxvm profile)",
            ));
        }
        let f = self.get_function(name)?;
        let t0 = Instant::now();
        let recorder = Arc::new(Mutex::new(Recorder::new(t0)));
        let hook_recorder = Arc::clone(&recorder);
        let start = Instant::now();
        let result = self.run_with_hook(&f, args, move |call| lock(&hook_recorder).record(call));
        let total_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        result?;
        let recorder = std::mem::replace(&mut *lock(&recorder), Recorder::new(t0));
        let mut rows: Vec<_> = recorder.rows.into_values().collect();
        for row in rows.iter_mut().filter(|r| r.kind == CallKind::Builtin) {
            if self.is_kernel(&row.name) {
                row.kind = CallKind::Kernel;
            }
        }
        Ok(ProfileReport::new(name, total_ns, rows, recorder.events))
    }

    /// Runs function `name` once with `args`, recording every call it makes with copies of its
    /// arguments, result and written arguments (see [`crate::trace`]), keeping at most
    /// `options.max_bytes` of them. Works on any VM. When the run raises, the error comes with
    /// the trace up to it. An instrument hook installed with
    /// [`set_instrument`](Self::set_instrument) is set aside for the run and restored after it.
    #[cfg(feature = "tooling")]
    pub fn trace(
        &mut self,
        name: &str,
        args: &[Value],
        options: TraceOptions,
    ) -> std::result::Result<Trace, TracedError> {
        let recorder = Arc::new(Mutex::new(TraceRecorder::new(options.max_bytes)));
        let hook_recorder = Arc::clone(&recorder);
        let result = self
            .get_function(name)
            .and_then(|f| self.run_with_hook(&f, args, move |call| lock(&hook_recorder).record(call)));
        let recorder = std::mem::replace(&mut *lock(&recorder), TraceRecorder::new(0));
        match result {
            Ok(value) => Ok(recorder.into_trace(name, value)),
            Err(error) => Err(TracedError { error, trace: Box::new(recorder.into_trace(name, Value::Null)) }),
        }
    }

    /// Calls `f` with `hook` as the instrument hook, then puts back the hook that was there,
    /// whether the call succeeded or not.
    fn run_with_hook(
        &mut self,
        f: &Value,
        args: &[Value],
        mut hook: impl FnMut(&InstrumentCall<'_>) -> InstrumentAction + Send + 'static,
    ) -> Result<Value> {
        let saved = self.instrument.replace(Box::new(move |call| Ok(hook(call))));
        let result = self.invoke_closure(f, args);
        self.instrument = saved;
        result
    }

    /// True when packed function `name` resolved to a kernel of the executable's native
    /// libraries: a library provides it and what the VM calls is not the registry's function.
    fn is_kernel(&self, name: &str) -> bool {
        let resolved = self.exe.func_index(name).and_then(|i| match &self.code.callees[i as usize] {
            Callee::Packed(p) => Some(p),
            Callee::Bytecode { .. } => None,
        });
        let Some(resolved) = resolved else { return false };
        let registered = crate::registry::global().get(name).is_some_and(|g| g.ptr_eq(resolved));
        !registered
            && self.exe.libraries().iter().filter_map(|l| l.loaded.as_ref()).any(|l| l.get_function(name).is_some())
    }
}

/// The recorder behind `m`: a panic in a hook while it held the lock leaves it usable (the
/// panic became the run's error).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
