//! `VmConfig`, the old name of a VM's settings, kept so that code written against it still
//! compiles. It mixed the limits ([`Limits`]) with the permission to profile
//! ([`VirtualMachine::set_profiling_enabled`]), which is not a limit; the two are now apart.
#![allow(deprecated)]

use super::{Limits, VirtualMachine};
use std::ops::{Deref, DerefMut};

/// The limits of one VM and whether it may be profiled, as one struct.
#[deprecated(note = "split: use `Limits` (`VirtualMachine::limits`, `limits_mut`) and \
                     `VirtualMachine::set_profiling_enabled`")]
#[derive(Clone, Debug)]
pub struct VmConfig {
    /// [`Limits::max_call_depth`].
    pub max_call_depth: usize,
    /// [`Limits::max_reentry`].
    pub max_reentry: usize,
    /// [`Limits::step_budget`].
    pub step_budget: Option<u64>,
    /// [`Limits::max_stack_registers`].
    pub max_stack_registers: usize,
    /// [`VirtualMachine::set_profiling_enabled`].
    pub profile: bool,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig::new(&Limits::default(), false)
    }
}

impl VmConfig {
    fn new(l: &Limits, profile: bool) -> Self {
        VmConfig {
            max_call_depth: l.max_call_depth,
            max_reentry: l.max_reentry,
            step_budget: l.step_budget,
            max_stack_registers: l.max_stack_registers,
            profile,
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            max_call_depth: self.max_call_depth,
            max_reentry: self.max_reentry,
            step_budget: self.step_budget,
            max_stack_registers: self.max_stack_registers,
        }
    }
}

/// A VM's settings as a [`VmConfig`] to change in place; written back to the VM when dropped.
#[deprecated(note = "use `VirtualMachine::limits_mut` and `VirtualMachine::set_profiling_enabled`")]
pub struct ConfigMut<'a> {
    vm: &'a mut VirtualMachine,
    config: VmConfig,
}

impl Deref for ConfigMut<'_> {
    type Target = VmConfig;
    fn deref(&self) -> &VmConfig {
        &self.config
    }
}

impl DerefMut for ConfigMut<'_> {
    fn deref_mut(&mut self) -> &mut VmConfig {
        &mut self.config
    }
}

impl Drop for ConfigMut<'_> {
    fn drop(&mut self) {
        *self.vm.limits_mut() = self.config.limits();
        self.vm.profiling = self.config.profile;
    }
}

impl VirtualMachine {
    /// The limits and the profiling switch, as one [`VmConfig`].
    #[deprecated(note = "use `VirtualMachine::limits` and `VirtualMachine::profiling_enabled`")]
    pub fn config(&self) -> VmConfig {
        VmConfig::new(&self.limits, self.profiling)
    }

    /// The limits and the profiling switch, to change in place as one [`VmConfig`]
    /// (`*vm.config_mut() = VmConfig { .. }`, `vm.config_mut().step_budget = ..`).
    #[deprecated(note = "use `VirtualMachine::limits_mut` and `VirtualMachine::set_profiling_enabled`")]
    pub fn config_mut(&mut self) -> ConfigMut<'_> {
        let config = VmConfig::new(&self.limits, self.profiling);
        ConfigMut { vm: self, config }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executable::{Executable, ExecutableParts};
    use std::sync::Arc;

    #[test]
    fn old_config_reads_and_writes_the_split_settings() {
        let exe = Arc::new(Executable::from_parts(ExecutableParts::default()).unwrap());
        let mut vm = VirtualMachine::new(exe).unwrap();
        assert_eq!(vm.config().max_call_depth, Limits::default().max_call_depth);
        assert!(!vm.config().profile);
        *vm.config_mut() = VmConfig { profile: true, step_budget: Some(7), ..VmConfig::default() };
        assert!(vm.profiling_enabled());
        assert_eq!(vm.limits().step_budget, Some(7));
        vm.config_mut().max_reentry = 3;
        assert_eq!(vm.limits(), &Limits { max_reentry: 3, step_budget: Some(7), ..Limits::default() });
        assert!(vm.profiling_enabled());
    }
}
