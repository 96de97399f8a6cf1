//! `VirtualMachine::profile`: one run with the profiler's recorder as the instrument hook.

use super::VirtualMachine;
use crate::code::Callee;
use crate::error::{Error, Result};
use crate::profile::{CallKind, ProfileReport, Recorder};
use crate::value::Value;
use std::sync::{Arc, Mutex};
use std::time::Instant;

impl VirtualMachine {
    /// Runs function `name` once with `args`, timing every call it makes (see
    /// [`crate::profile`]). Needs [`VmConfig::profile`](super::VmConfig::profile): a VM built
    /// without it refuses, so that profiling is always asked for. An instrument hook installed
    /// with [`set_instrument`](Self::set_instrument) is set aside for the run and restored
    /// after it, also when the run fails; the error is the run's.
    pub fn profile(&mut self, name: &str, args: &[Value]) -> Result<ProfileReport> {
        if !self.config.profile {
            return Err(Error::value(
                "this VM was built without profiling: set VmConfig::profile (Python: \
                 VirtualMachine(ex, profile=True); CLI: relaxvm profile)",
            ));
        }
        let f = self.get_function(name)?;
        let t0 = Instant::now();
        let recorder = Arc::new(Mutex::new(Recorder::new(t0)));
        let hook_recorder = Arc::clone(&recorder);
        let saved = self
            .instrument
            .replace(Box::new(move |call| Ok(hook_recorder.lock().unwrap_or_else(|p| p.into_inner()).record(call))));
        let start = Instant::now();
        let result = self.invoke_closure(&f, args);
        let total_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.instrument = saved;
        result?;
        let recorder = std::mem::replace(&mut *recorder.lock().unwrap_or_else(|p| p.into_inner()), Recorder::new(t0));
        let mut rows: Vec<_> = recorder.rows.into_values().collect();
        for row in rows.iter_mut().filter(|r| r.kind == CallKind::Builtin) {
            if self.is_kernel(&row.name) {
                row.kind = CallKind::Kernel;
            }
        }
        Ok(ProfileReport::new(name, total_ns, rows, recorder.events))
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
