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
        let start = Instant::now();
        let (result, recorder) = self.run_with_hook(&f, args, Recorder::new(t0), Recorder::record);
        let total_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        result?;
        let (mut rows, events) = recorder.unwrap_or_else(|| Recorder::new(t0)).into_parts();
        for row in rows.iter_mut().filter(|r| r.kind == CallKind::Builtin) {
            if self.is_kernel(&row.name) {
                row.kind = CallKind::Kernel;
            }
        }
        Ok(ProfileReport::new(name, total_ns, rows, events))
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
        let (result, recorder) = match self.get_function(name) {
            Ok(f) => self.run_with_hook(&f, args, TraceRecorder::new(options.max_bytes), TraceRecorder::record),
            Err(e) => (Err(e), None),
        };
        let recorder = recorder.unwrap_or_else(|| TraceRecorder::new(0));
        match result {
            Ok(value) => Ok(recorder.into_trace(name, value)),
            Err(error) => Err(TracedError { error, trace: Box::new(recorder.into_trace(name, Value::Null)) }),
        }
    }

    /// Calls `f` with `recorder` (its method `record`) as the instrument hook, then puts back
    /// the hook that was there, whether the call succeeded or not. The recorder comes back
    /// (`None` only if a callback of the run took the hook away and still holds it).
    fn run_with_hook<R: Send + 'static>(
        &mut self,
        f: &Value,
        args: &[Value],
        recorder: R,
        record: fn(&mut R, &InstrumentCall<'_>) -> InstrumentAction,
    ) -> (Result<Value>, Option<R>) {
        // The hook owns the recorder, so recording takes no lock; it hands the recorder back
        // through `out` when it is dropped: below, or earlier if a callback replaces it.
        let out = Arc::new(Mutex::new(None));
        let mut owned = HandBack { recorder: Some(recorder), out: Arc::clone(&out) };
        let hook = move |call: &InstrumentCall<'_>| match owned.recorder.as_mut() {
            Some(r) => Ok(record(r, call)),
            None => Ok(InstrumentAction::Continue),
        };
        let saved = self.instrument.replace(Box::new(hook));
        let result = self.invoke_closure(f, args);
        self.instrument = saved;
        let recorder = lock(&out).take();
        (result, recorder)
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

/// A recorder owned by the instrument hook, handed to `out` when the hook is dropped.
struct HandBack<R> {
    recorder: Option<R>,
    out: Arc<Mutex<Option<R>>>,
}

impl<R> Drop for HandBack<R> {
    fn drop(&mut self) {
        *lock(&self.out) = self.recorder.take();
    }
}

/// The slot behind `m`; a poisoned lock (a panic while it was held) still gives it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
