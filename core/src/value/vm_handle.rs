//! What a packed function can reach of the VM that calls it: the [`VmHandle`] trait the
//! interpreter implements and the [`CallCtx`] a packed function receives.

use super::{Closure, Value};
use crate::device::Device;
use crate::error::Result;

/// What a packed function can reach of the VM that calls it (for `vm_state` builtins).
pub trait VmHandle {
    /// Calls a function value (bytecode or packed) with `args` followed by its captures.
    fn call_closure(&mut self, f: &Closure, args: &[Value]) -> Result<Value>;
    /// The VM's default device.
    fn device(&self) -> Device;
    /// Checks for an interrupt or a signal (see `relaxvm::VirtualMachine::poll`).
    fn poll(&mut self) -> Result<()>;
    /// The value kept for the called function `entry` (see [`CallCtx::site_cache`]); `None`
    /// when the handle keeps none.
    fn site_cache(&mut self, entry: u32) -> Option<&mut Value> {
        let _ = entry;
        None
    }
    /// Every call site's kept value ([`Self::site_cache`] of each entry, by entry): an
    /// allocating site checks which of the others still view its block
    /// ([`CallCtx::pool_sites`]). Empty when the handle keeps none.
    fn site_caches(&mut self) -> &mut [Value] {
        &mut []
    }
    /// The allocator the VM's builtins use ([`crate::allocator::Allocator`]); a handle that
    /// keeps no site caches allocates at every call.
    fn allocator(&self) -> crate::allocator::Allocator {
        crate::allocator::Allocator::Naive
    }
    /// Drops the blocks and tensor headers the allocation sites keep for reuse (TVM's
    /// `vm.builtin.memory_manager.clear`); a handle that keeps none has nothing to do.
    fn clear_pools(&mut self) {}
    /// Calls `f` (named `name`) on behalf of native code the VM is running (a VM TIR function
    /// of a TVM `exec_mode="compiled"` model calling a builtin or closure through its
    /// function table): the call counts as a step (limits, interrupts) and the instrument hook
    /// sees it, as it sees a `call` instruction, attributed to the instruction whose packed
    /// call made it. Without a VM, a plain call.
    fn call_named(&mut self, name: &str, f: &Closure, args: &[Value]) -> Result<Value> {
        let _ = name;
        self.call_closure(f, args)
    }
    /// As [`Self::call_named`], for a call site of native code that keeps its own site cache
    /// `site` (a compiled-mode function keeps one per call it makes): a packed function called
    /// gets `site` as its [`CallCtx::site_cache`] (and, when the VM pools allocations, as its
    /// [`CallCtx::pool_cache`]), as a `call` instruction's builtin gets the instruction's. A
    /// handle that keeps no site caches ignores it.
    ///
    /// The called function's storage comes zeroed at a reused site, as for any caller: only
    /// [`Self::call_native_code_at`] marks a call as machine code's ([`CallCtx::from_native_site`]).
    fn call_named_at(&mut self, name: &str, f: &Closure, args: &[Value], site: &mut Value) -> Result<Value> {
        let _ = site;
        self.call_named(name, f, args)
    }
    /// As [`Self::call_named_at`], for a call of machine code TVM compiled (a VM TIR function):
    /// the called function's context says so ([`CallCtx::from_native_site`]), and its
    /// allocations at a reused site hand storage out as the last run left it, as TVM's pooled
    /// allocator does. Only the compiled-mode runtime calls it; a handle that keeps no site
    /// caches makes a plain [`Self::call_named`].
    #[doc(hidden)]
    fn call_native_code_at(&mut self, name: &str, f: &Closure, args: &[Value], site: &mut Value) -> Result<Value> {
        self.call_named_at(name, f, args, site)
    }
    /// Calls `f` (named `name`) for a builtin in the middle of an operation a stop would leave
    /// half done (a KV cache running its kernels layer by layer under its lock): the
    /// instrument hook sees it as it sees [`Self::call_named`]'s calls, but it is no step, so
    /// neither a step budget nor an interrupt can stop the operation between two kernels.
    fn call_observed(&mut self, name: &str, f: &Closure, args: &[Value]) -> Result<Value> {
        let _ = name;
        self.call_closure(f, args)
    }
    /// The executable's constants, the VM's function table as values, and one slot the VM
    /// keeps for native code it runs (a compiled model's lists, made once per VM); `None` when
    /// the handle has no program.
    fn program_lists(&mut self) -> Option<ProgramLists<'_>> {
        None
    }
}

/// What [`VmHandle::program_lists`] returns: constants, function values, the native code's slot.
pub type ProgramLists<'a> = (&'a [Value], &'a [Value], &'a mut Value);

/// The context of one packed-function call: the calling VM, if any, and the entry of the
/// function the VM called (for [`CallCtx::site_cache`]).
pub struct CallCtx<'a> {
    pub(crate) vm: Option<&'a mut dyn VmHandle>,
    pub(crate) entry: Option<u32>,
    /// The site cache of the calling site when the caller keeps it (native code's call sites,
    /// [`VmHandle::call_named_at`]); `entry` is then unused.
    pub(crate) site: Option<&'a mut Value>,
    /// Whether the call comes from machine code TVM compiled ([`CallCtx::from_native_site`]):
    /// set only by [`CallCtx::at_native_code_site`], never inferred from `site`.
    pub(crate) native: bool,
}
