//! The function handles a running VM TIR function's native code calls
//! (`crate::ffi::function_handle::Handle`, one per name), resolved to the packed functions they name.

use crate::ffi::function_handle::Handle;
use relaxvm::{Callable, Closure, PackedFunc, Result};

/// A function handle's packed function as the VM calls it, looked up at registry generation
/// `generation`: the lookup stands while the registry is unchanged (a re-registered name takes
/// effect at the next call, as without the cache).
pub struct Resolved {
    /// `None` between runs: `func` is then `None` too, and the box waits to be refilled.
    generation: Option<u64>,
    /// The packed function, as a closure capturing nothing. Between runs the box is kept for
    /// the next run, what it resolved to is not (attack perf/02): it holds `None` then (emptied
    /// by a drop alone: no placeholder is made or dropped per handle and run).
    func: Option<Closure>,
}

impl Resolved {
    /// The closure to call: what the handle resolved to ([`Handles::resolve`] returns only
    /// filled boxes; an emptied one would give [`emptied`]'s, which refuses to be called).
    pub fn func(&self) -> &Closure {
        match &self.func {
            Some(f) => f,
            None => emptied(),
        }
    }
}

/// What an emptied [`Resolved`] stands for: a function of its own, made once and shared by
/// all, never called.
fn emptied() -> &'static Closure {
    static EMPTY: std::sync::LazyLock<Closure> = std::sync::LazyLock::new(|| {
        let f = PackedFunc::from_fn("relaxvm.vmtir.unresolved", |_| {
            Err(relaxvm::Error::value("a function handle of a finished run of a VM TIR function was called"))
        });
        Closure { callable: Callable::Packed(f), captured: Vec::new() }
    });
    &EMPTY
}

/// The function handles of one running function: what they resolved to in this run, and where
/// their names were found in the registry, both by the handle's `index`.
#[derive(Default)]
pub struct Handles {
    /// For this run only: nothing outlives the run, so a function replaced in or removed from
    /// the registry is never kept alive by a VM (attack perf/02). Boxed: taken out for a call
    /// and put back by moving a pointer (moved by value, a closure cost a copy of its size at
    /// each call). The list and its boxes are kept from run to run, each box emptied of its
    /// function ([`Handles::recycle`]): a run allocates nothing to resolve its handles.
    resolved: Vec<Option<Box<Resolved>>>,
    /// Kept from run to run (it holds no function), so that a handle resolves without hashing
    /// its name while the registry is unchanged.
    located: Vec<Option<relaxvm::registry::Location>>,
}

impl Handles {
    /// Empties what this run resolved, for another run (where names were found is kept).
    pub fn recycle(&mut self) {
        for r in self.resolved.iter_mut().flatten() {
            r.generation = None;
            r.func = None;
        }
    }

    /// The function `handle` names, looked up in the registry unless this run has it from the
    /// same generation of the registry; taken out for one call (see [`Handles::give_back`]).
    pub fn resolve(&mut self, handle: &Handle) -> Result<Box<Resolved>> {
        let generation = relaxvm::registry::generation();
        // Taken out for the call (a pointer), not cloned: a closure's clone counts several
        // references, and a nested call may resolve again meanwhile.
        let taken = self.resolved.get_mut(handle.index).and_then(Option::take);
        let mut boxed = match taken {
            Some(r) if r.generation == Some(generation) => return Ok(r),
            // A box of an earlier run (emptied) or of an older registry: refilled in place.
            Some(r) => r,
            None => Box::new(Resolved { generation: None, func: None }),
        };
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
        boxed.generation = Some(generation);
        boxed.func = Some(Closure { callable: Callable::Packed(packed), captured: Vec::new() });
        Ok(boxed)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_resolution_refuses_to_be_called_and_is_refilled() {
        let Callable::Packed(p) = &emptied().callable else { panic!("a packed function") };
        let e = p.call(&mut relaxvm::CallCtx::detached(), &[]).unwrap_err().to_string();
        assert!(e.contains("a function handle of a finished run of a VM TIR function was called"), "{e}");
        // A kept box (emptied by `recycle`) is refilled by the next run's lookup.
        relaxvm::registry::register_global(
            PackedFunc::from_fn("test.vmtir.handles.one", |_| Ok(relaxvm::Value::Int(1))),
            true,
        )
        .unwrap();
        let handle = Handle { name: "test.vmtir.handles.one".into(), index: 0 };
        let mut handles = Handles::default();
        let r = handles.resolve(&handle).unwrap();
        handles.give_back(0, r);
        handles.recycle();
        // Emptied: nothing resolved is held, and the box stands for the refusing function.
        let kept = handles.resolved[0].as_ref().unwrap();
        assert!(kept.func.is_none() && kept.generation.is_none());
        assert!(matches!(&kept.func().callable, Callable::Packed(p) if p.name() == "relaxvm.vmtir.unresolved"));
        let r = handles.resolve(&handle).unwrap();
        let Callable::Packed(p) = &r.func().callable else { panic!("a packed function") };
        assert_eq!(p.name(), "test.vmtir.handles.one");
    }
}
