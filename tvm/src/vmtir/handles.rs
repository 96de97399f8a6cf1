//! The function handles a running VM TIR function's native code calls
//! (`crate::ffi::function_handle::Handle`, one per name), resolved to the packed functions they name.

use crate::ffi::function_handle::Handle;
use relaxvm::{Callable, Closure, Result};

/// A function handle's packed function as the VM calls it, looked up at registry generation
/// `generation`: the lookup stands while the registry is unchanged (a re-registered name takes
/// effect at the next call, as without the cache).
pub struct Resolved {
    generation: u64,
    /// The packed function, as a closure capturing nothing.
    pub func: Closure,
}

/// The function handles of one running function: what they resolved to in this run, and where
/// their names were found in the registry, both by the handle's `index`.
#[derive(Default)]
pub struct Handles {
    /// For this run only: nothing outlives the run, so a function replaced in or removed from
    /// the registry is never kept alive by a VM (attack perf/02). Boxed: taken out for a call
    /// and put back by moving a pointer (moved by value, a closure cost a copy of its size at
    /// each call, more than the box's allocation). The list keeps its length from run to run
    /// (emptied, not cleared: no growth at each run).
    resolved: Vec<Option<Box<Resolved>>>,
    /// Kept from run to run (it holds no function), so that a handle resolves without hashing
    /// its name while the registry is unchanged.
    located: Vec<Option<relaxvm::registry::Location>>,
}

impl Handles {
    /// Empties what this run resolved, for another run (where names were found is kept).
    pub fn recycle(&mut self) {
        for r in &mut self.resolved {
            *r = None;
        }
    }

    /// The function `handle` names, looked up in the registry unless this run has it from the
    /// same generation of the registry; taken out for one call (see [`Handles::give_back`]).
    pub fn resolve(&mut self, handle: &Handle) -> Result<Box<Resolved>> {
        let generation = relaxvm::registry::generation();
        // Taken out for the call (a pointer), not cloned: a closure's clone counts several
        // references, and a nested call may resolve again meanwhile.
        let taken = self.resolved.get_mut(handle.index).and_then(Option::take);
        if let Some(r) = taken {
            if r.generation == generation {
                return Ok(r);
            }
        }
        let known = self.located.get(handle.index).copied().flatten();
        let packed = match known.and_then(|at| relaxvm::registry::get_global_at(at, &handle.name)) {
            Some(packed) => packed,
            None => {
                let (packed, at) = relaxvm::registry::get_global_located(&handle.name)?;
                if self.located.len() <= handle.index {
                    self.located.resize(handle.index + 1, None);
                }
                self.located[handle.index] = Some(at);
                packed
            }
        };
        Ok(Box::new(Resolved {
            generation,
            func: Closure { callable: Callable::Packed(packed), captured: Vec::new() },
        }))
    }

    /// Gives back what [`Handles::resolve`] took for handle `index`, for its next call in this
    /// run (unless a nested call of the same handle gave back its own meanwhile).
    pub fn give_back(&mut self, index: usize, r: Box<Resolved>) {
        if self.resolved.len() <= index {
            self.resolved.resize_with(index + 1, || None);
        }
        let slot = &mut self.resolved[index];
        if slot.is_none() {
            *slot = Some(r);
        }
    }
}
