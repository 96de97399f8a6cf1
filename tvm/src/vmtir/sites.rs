//! The call sites of a VM TIR function's native code, each with its site cache
//! ([`relaxvm::CallCtx::site_cache`]), so that compiled mode honours `memory_cfg` as the
//! interpreter does: with the pooled allocator (the default) each `alloc_storage` and
//! `alloc_tensor` site of the machine code keeps what it made last and hands it out again at a
//! later call once nothing else holds it; with `"naive"` nothing is kept
//! ([`relaxvm::CallCtx::pool_cache`] decides, as for bytecode).
//!
//! The machine code calls every builtin of one name through one function handle, so a site is
//! not a handle: it is the position of the call among the calls one run of the function makes
//! (its first call, its second...). A function's body is straight-line code between its
//! branches, so a position names the same call instruction at every run; where branches make
//! the positions differ, the handle recorded with a site tells (the cache starts over), and a
//! cache is only ever a hint (the builtins reuse what it holds only when nothing else holds it
//! and it fits). The caches of a function are the VM's (kept with its program lists, dropped
//! by `memory_manager.clear` and by switching to the naive allocator), taken by a run of the
//! function for its length: a nested or concurrent run of the same function starts with none.

use relaxvm::{Tensor, Value};
use std::collections::HashMap;
use std::sync::Mutex;

/// The most call sites one run of a function keeps caches for; later calls have none (a
/// function that makes more calls than this allocates at each of them, as with `"naive"`).
pub const MAX_SITES: usize = 1 << 12;

/// One call site: the handle it called last and its cache.
struct Site {
    handle: usize,
    cache: Value,
}

/// The site caches of a VM's VM TIR functions, by function (see [`super::adapter`]'s ids).
#[derive(Default)]
pub struct SiteCaches {
    by_function: Mutex<HashMap<usize, Vec<Site>, rustc_hash::FxBuildHasher>>,
}

impl SiteCaches {
    /// The caches of function `function` for one run of it (none when a run holds them). The
    /// tensor headers they keep let go of storage other holders share, as the interpreter's
    /// sites do before each call from outside ([`Tensor::release_shared_storage`]): what the
    /// last run's registers held is gone, so each storage's own site finds it free.
    pub fn take(&self, function: usize) -> Running {
        let sites = self.by_function.lock().unwrap_or_else(|p| p.into_inner()).remove(&function).unwrap_or_default();
        let mut running = Running { sites, next: 0 };
        for s in &mut running.sites {
            if let Value::Tensor(_) = s.cache {
                Tensor::release_shared_storage(&mut s.cache);
            }
        }
        running
    }

    /// Gives back the caches a run of function `function` took.
    pub fn put(&self, function: usize, running: Running) {
        if running.sites.is_empty() {
            return;
        }
        self.by_function.lock().unwrap_or_else(|p| p.into_inner()).insert(function, running.sites);
    }
}

/// The site caches of one running function and the position of its next call.
#[derive(Default)]
pub struct Running {
    sites: Vec<Site>,
    next: usize,
}

/// A call's site: its position, and its cache taken out for the call (see [`Running::next`]).
pub struct CallSite {
    position: usize,
    /// The cache the called function may use.
    pub cache: Value,
}

impl Running {
    /// The site of the next call, made through function handle `handle`: its cache, empty
    /// when the site called another handle last (or is new); `None` past [`MAX_SITES`].
    pub fn next(&mut self, handle: usize) -> Option<CallSite> {
        let position = self.next;
        self.next += 1;
        if position >= MAX_SITES {
            return None;
        }
        // Positions are taken in order from 0: a position not seen yet is the list's next.
        if position == self.sites.len() {
            self.sites.push(Site { handle, cache: Value::Null });
        }
        let s = &mut self.sites[position];
        if s.handle != handle {
            // Another handle than last run's called here: the cache starts over.
            s.handle = handle;
            s.cache = Value::Null;
        }
        Some(CallSite { position, cache: std::mem::take(&mut s.cache) })
    }

    /// Keeps what the call left in its site's cache.
    pub fn put_back(&mut self, site: CallSite) {
        // The site exists (`next` made it) and its cache is empty (`next` took it).
        if let Some(s) = self.sites.get_mut(site.position) {
            s.cache = site.cache;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_keeps_its_cache_for_the_same_handle_and_starts_over_for_another() {
        let caches = SiteCaches::default();
        let mut run = caches.take(7);
        let mut a = run.next(1).unwrap();
        assert!(matches!(a.cache, Value::Null));
        a.cache = Value::Int(5);
        run.put_back(a);
        let mut b = run.next(2).unwrap();
        b.cache = Value::Int(6);
        run.put_back(b);
        caches.put(7, run);
        // The next run: position 0 calls handle 1 again, position 1 another handle.
        let mut run = caches.take(7);
        // A nested run of the same function meanwhile finds none.
        assert!(matches!(caches.take(7).next(1).unwrap().cache, Value::Null));
        assert!(matches!(run.next(1).unwrap().cache, Value::Int(5)));
        assert!(matches!(run.next(3).unwrap().cache, Value::Null));
    }

    #[test]
    fn calls_past_the_last_site_have_no_cache() {
        let mut run = SiteCaches::default().take(0);
        for _ in 0..MAX_SITES {
            assert!(run.next(0).is_some());
        }
        assert!(run.next(0).is_none());
    }
}
