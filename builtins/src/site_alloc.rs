//! Allocations a call site makes again at every call of a model (its storages, its shape
//! heap), served from the site's cache ([`CallCtx::site_cache`]) when nothing else holds what
//! the site made last: an arena per call site, planned by the first call.
//!
//! A compiled model allocates the same storages at every call and drops them at its end. Each
//! site keeps the last one it made; at the next call (or the next run of the site within one
//! call: a loop, a recursion), when that one is no longer held anywhere else (no register,
//! tensor, numpy array or result the caller kept: [`Storage::is_sole`], [`Tensor::is_sole`])
//! and has the size asked for, it is handed out again, with no allocation or free: zeroed as
//! new storage is, except at the sites of compiled-mode machine code ([`Reuse::AsLeft`]). Anything still held is never handed out twice: the site then allocates
//! anew and keeps the new one. As TVM's pooled allocator keeps freed blocks, a VM keeps each
//! site's last allocation while it lives. `alloc_tensor`'s sites keep their last tensor header
//! likewise ([`relaxvm::Tensor::view_in_slot`]), still viewing its storage: a storage site
//! counts such headers, when nothing else holds them, as no holders
//! ([`relaxvm::Tensor::site_storage_is_free`]), so that the header's site finds the same view
//! at its next run. (A compiled-mode site sees only its own cache: its kept headers let go of
//! shared storage at the start of each run instead; see relaxvm-tvm's `vmtir/sites.rs`.) With TVM's `memory_cfg="naive"` ([`relaxvm::Allocator::Naive`]) no site
//! keeps anything ([`CallCtx::pool_cache`] is `None`).
//!
//! [`CallCtx::site_cache`]: relaxvm::CallCtx::site_cache
//! [`CallCtx::pool_cache`]: relaxvm::CallCtx::pool_cache

use relaxvm::{Device, Result, Storage, Tensor, Value};

/// What a site's reused storage holds when it is handed out again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Zeroes, as new storage: the contract of `alloc_storage` for bytecode, whose programs
    /// (ours, hand-written ones) may read what they allocate before writing it.
    Zeroed,
    /// The bytes the site's last run left in it, not zeroed again: for the sites of a VM TIR
    /// function's machine code ([`CallCtx::from_native_site`]). TVM's pooled allocator hands
    /// such code recycled blocks uninitialised, so the kernels TVM built for it write what
    /// they allocate before they read it, and zeroing would only cost (about 53k
    /// instructions a call of the transformer block). The bytes are never uninitialised memory:
    /// new storage starts zeroed, and a reused block holds what this VM's earlier runs (or
    /// a caller that held its result) wrote, readable by nobody else meanwhile (it is reused
    /// only when nothing else holds it).
    ///
    /// [`CallCtx::from_native_site`]: relaxvm::CallCtx::from_native_site
    AsLeft,
}

/// `nbytes` of storage on `device`: the site's last storage when that is free and of the same
/// size (zeroed or as left, by `reuse`), else new, zeroed storage, which becomes the site's
/// last. `sites` is every site cache of the VM and the index of this site's
/// ([`CallCtx::pool_sites`]; `None` when the call has none).
///
/// [`CallCtx::pool_sites`]: relaxvm::CallCtx::pool_sites
// Inlined into `alloc_storage` (a frame less per allocation); `#[inline]` alone left it out.
#[inline(always)]
pub(crate) fn storage(
    sites: Option<(&mut [Value], usize)>,
    nbytes: i128,
    device: Device,
    reuse: Reuse,
) -> Result<Storage> {
    let Some((caches, own)) = sites else { return Storage::alloc_checked(nbytes, device) };
    if let Value::Storage(s) = &caches[own] {
        let fits = i128::try_from(s.len()).is_ok_and(|len| len == nbytes) && s.device() == device;
        // Free, it has no reader or writer but us: the zeroing cannot fail, but if it did,
        // new storage serves the call.
        if fits
            && Tensor::site_storage_is_free(caches, own)
            && (reuse == Reuse::AsLeft || s.write_with(|b| b.fill(0)).is_ok())
        {
            return Ok(s.clone());
        }
        // Replaced: the headers other sites keep no longer keep it.
        Tensor::release_site_storage_views(caches, own);
    }
    let s = Storage::alloc_checked(nbytes, device)?;
    caches[own] = Value::Storage(s.clone());
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{DataType, Shape};

    fn cached(cache: &Value) -> &Storage {
        match cache {
            Value::Storage(s) => s,
            other => panic!("expected a storage, found {}", other.describe()),
        }
    }

    #[test]
    fn a_site_reuses_its_storage_only_once_nothing_else_holds_it() {
        let dev = Device::cpu(0);
        let mut caches = [Value::Null];
        macro_rules! site {
            () => {
                Some((&mut caches[..], 0))
            };
        }
        let a = storage(site!(), 64, dev, Reuse::Zeroed).unwrap();
        a.write(0, &[7; 64]).unwrap();
        // Still held (by `a`): a second call gets other storage.
        let b = storage(site!(), 64, dev, Reuse::Zeroed).unwrap();
        assert!(!b.ptr_eq(&a));
        // The site keeps `b`: written here, it must come back zeroed.
        b.write(0, &[5; 64]).unwrap();
        drop(a);
        drop(b);
        // Only the cache holds the last one: it comes back, zeroed.
        let c = storage(site!(), 64, dev, Reuse::Zeroed).unwrap();
        assert!(c.ptr_eq(cached(&caches[0])));
        assert!(c.bytes().iter().all(|x| *x == 0));
        c.write(0, &[1]).unwrap();
        drop(c);
        // Another size: new storage.
        let d = storage(site!(), 32, dev, Reuse::Zeroed).unwrap();
        assert_eq!(d.len(), 32);
        // A tensor viewing the last storage holds it.
        drop(d);
        let view =
            Tensor::from_parts(cached(&caches[0]).clone(), 0, Shape::from(&[8][..]), None, DataType::F32).unwrap();
        let e = storage(site!(), 32, dev, Reuse::Zeroed).unwrap();
        assert!(!e.ptr_eq(view.storage()));
        // Without a cache, always new.
        assert!(storage(None, 32, dev, Reuse::Zeroed).unwrap().bytes().iter().all(|x| *x == 0));
    }

    #[test]
    fn a_native_code_site_reuses_its_storage_as_left_and_new_storage_starts_zeroed() {
        let dev = Device::cpu(0);
        let mut caches = [Value::Null];
        let a = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::AsLeft).unwrap();
        assert!(a.bytes().iter().all(|x| *x == 0), "new storage starts zeroed");
        a.write(0, &[7; 64]).unwrap();
        // Still held: never handed out twice, and the new one starts zeroed.
        let b = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::AsLeft).unwrap();
        assert!(!b.ptr_eq(&a) && b.bytes().iter().all(|x| *x == 0));
        b.write(0, &[9; 64]).unwrap();
        drop((a, b));
        // Free: the same block, holding what the last run wrote (TVM's pooled allocator's
        // recycled blocks are uninitialised; ours are what was left).
        let c = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::AsLeft).unwrap();
        assert!(c.ptr_eq(cached(&caches[0])));
        assert!(c.bytes().iter().all(|x| *x == 9));
        drop(c);
        // The same block at a bytecode site's reuse is zeroed.
        let d = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::Zeroed).unwrap();
        assert!(d.ptr_eq(cached(&caches[0])) && d.bytes().iter().all(|x| *x == 0));
    }

    /// Sites: 0 a storage site, 1 and 2 tensor sites keeping headers (1 views the storage).
    fn sites_with_a_kept_view(dev: Device) -> ([Value; 3], Storage) {
        let mut caches = [Value::Null, Value::Null, Value::Null];
        let s = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::Zeroed).unwrap();
        let t = Tensor::view_in_slot(&mut caches[1], &s, 0, &Shape::from(&[16][..]), DataType::F32).unwrap();
        let other = Storage::alloc(64, dev).unwrap();
        Tensor::view_in_slot(&mut caches[2], &other, 0, &Shape::from(&[16][..]), DataType::F32).unwrap();
        drop(t);
        (caches, s)
    }

    #[test]
    fn a_header_only_its_site_keeps_does_not_hold_the_storage_it_views() {
        let dev = Device::cpu(0);
        let (mut caches, s) = sites_with_a_kept_view(dev);
        s.write(0, &[5; 64]).unwrap();
        // Held by `s`: not free, and the kept header keeps viewing it meanwhile.
        let fresh = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::Zeroed).unwrap();
        assert!(!fresh.ptr_eq(&s));
        assert!(!caches[1].as_tensor().unwrap().storage().ptr_eq(&s), "the replaced storage is let go of");
        drop((s, fresh));
        // Now the header views the new one, and only it and the site hold that: it comes back.
        let s = cached(&caches[0]).clone();
        Tensor::view_in_slot(&mut caches[1], &s, 0, &Shape::from(&[16][..]), DataType::F32).unwrap();
        s.write(0, &[5; 64]).unwrap();
        drop(s);
        let again = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::Zeroed).unwrap();
        assert!(again.ptr_eq(cached(&caches[0])));
        assert!(again.bytes().iter().all(|x| *x == 0), "zeroed again");
        // The header still views it, and its site makes the same view without a new header.
        let kept = caches[1].as_tensor().unwrap().clone();
        assert!(kept.storage().ptr_eq(&again));
        drop(kept);
        let view = Tensor::view_in_slot(&mut caches[1], &again, 0, &Shape::from(&[16][..]), DataType::F32).unwrap();
        assert!(view.ptr_eq(caches[1].as_tensor().unwrap()));
    }

    #[test]
    fn a_kept_header_something_else_holds_keeps_the_storage_in_use() {
        let dev = Device::cpu(0);
        let (mut caches, s) = sites_with_a_kept_view(dev);
        drop(s);
        let result = caches[1].as_tensor().unwrap().clone();
        result.storage().write(0, &[3; 64]).unwrap();
        let fresh = storage(Some((&mut caches[..], 0)), 64, dev, Reuse::Zeroed).unwrap();
        assert!(!fresh.ptr_eq(result.storage()));
        assert_eq!(result.storage().bytes()[0], 3, "the held view's data is untouched");
    }

    #[test]
    fn a_replaced_storage_is_let_go_of_by_the_headers_only_their_sites_keep() {
        let dev = Device::cpu(0);
        let (mut caches, s) = sites_with_a_kept_view(dev);
        // Another size: the site's storage is replaced, and the kept view lets go of it.
        let fresh = storage(Some((&mut caches[..], 0)), 32, dev, Reuse::Zeroed).unwrap();
        assert!(s.is_sole(), "only the test's handle is left");
        assert!(!caches[1].as_tensor().unwrap().storage().ptr_eq(&s));
        // The unrelated header keeps its view.
        assert_eq!(caches[2].as_tensor().unwrap().numel(), 16);
        drop(fresh);
    }
}
