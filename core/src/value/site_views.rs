//! A call site's cache (a value) as the place it keeps a tensor header between calls, and the
//! storage a site keeps seen from the headers other sites of the same VM keep (see
//! `tensor/pooled.rs`'s module docs): when that storage is free to hand out again, and letting
//! those headers go of it. Here, not beside the headers, because a site's cache is a
//! list of values and tensors do not know the value type.

use super::Value;
use crate::tensor::{Tensor, TensorSlot};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A value is where a call site keeps its tensor header between calls (its site cache).
impl TensorSlot for Value {
    fn tensor_mut(&mut self) -> Option<&mut Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    fn hold(&mut self, t: Tensor) {
        *self = Value::Tensor(t);
    }
}

impl Tensor {
    /// Whether the storage the call site `caches[own]` kept (a [`Value::Storage`]) is free for
    /// that site to hand out again: its only other holders are tensor headers other sites of
    /// `caches` keep and nothing else holds (they view it from an earlier run: see the module
    /// docs). `false` when `caches[own]` holds no storage.
    ///
    /// The sites the last such search found those headers at are looked at first: a hint the
    /// storage keeps (up to four site indices, increasing, 16 bits each). A model views its
    /// storages from the same sites at every call, and those may lie anywhere among the
    /// program's sites (every call instruction has one, and a storage's views are spread over
    /// the function), so a search of every site costs about as many sites as the program has.
    /// Each named site is checked as the search checks it, and the names must increase, so a
    /// stale or mixed hint (the storage may be shared, and the hint is relaxed) can only send
    /// the call to the search, which then names what it found.
    pub fn site_storage_is_free(caches: &[Value], own: usize) -> bool {
        let Some(Value::Storage(s)) = caches.get(own) else { return false };
        Tensor::site_storage_is_free_hinted(caches, own, s.views_hint())
    }

    /// [`site_storage_is_free`](Self::site_storage_is_free) with the hint `hint`.
    fn site_storage_is_free_hinted(caches: &[Value], own: usize, hint: &AtomicU64) -> bool {
        let Some(Value::Storage(s)) = caches.get(own) else { return false };
        let views = |i: usize| {
            i != own
                && matches!(caches.get(i), Some(Value::Tensor(t)) if t.handle_count() == 1 && t.storage().ptr_eq(s))
        };
        let wanted = s.handles() - 1;
        if wanted > 0 && !hinted_views(hint.load(Ordering::Relaxed), wanted, views) {
            // Every other site, once: those after this one first (a program views a storage
            // after allocating it), up to the last holder to account for.
            let mut found = 0;
            let mut names = NO_VIEWS;
            for i in (own + 1..caches.len()).chain(0..own) {
                if views(i) {
                    if found < HINTED {
                        // Truncated past 16 bits: `sorted_names` then keeps no hint.
                        names = with_name(names, found, i as u16);
                    }
                    found += 1;
                    if found == wanted {
                        break;
                    }
                }
            }
            if found != wanted {
                return false;
            }
            if let Some(sorted) = sorted_names(names, wanted, caches.len()) {
                hint.store(sorted, Ordering::Relaxed);
            }
        }
        // Every handle is this VM's own, and none can be cloned meanwhile (a header only its
        // slot holds cannot be): order what their earlier users did before the reuse, as
        // `Storage::is_sole` does.
        fence(Ordering::Acquire);
        true
    }

    /// The headers other sites of `caches` keep that view the storage site `caches[own]` kept
    /// let go of it ([`Tensor::release_shared_storage`]): called when the site replaces its
    /// storage, which then goes once nothing else holds it.
    pub fn release_site_storage_views(caches: &mut [Value], own: usize) {
        let Some(Value::Storage(s)) = caches.get(own) else { return };
        let s = s.clone();
        for (i, c) in caches.iter_mut().enumerate() {
            if i != own && matches!(c, Value::Tensor(t) if t.storage().ptr_eq(&s)) {
                Tensor::release_shared_storage(c);
            }
        }
    }
}

/// A hint that names no site.
const NO_VIEWS: u64 = u64::MAX;

/// How many sites a hint names at most.
const HINTED: usize = 4;

/// `names` (a hint) with `site` as its `k`-th name: the one place the packing is written.
#[inline]
fn with_name(names: u64, k: usize, site: u16) -> u64 {
    names & !(0xffff << (16 * k)) | (u64::from(site) << (16 * k))
}

/// The `k`-th name of `names` (a hint); `u16::MAX` names no site.
#[inline]
fn name(names: u64, k: usize) -> u16 {
    (names >> (16 * k)) as u16
}

/// Whether the first `wanted` sites `names` holds (a hint) all satisfy `views` and increase
/// (so are distinct).
#[inline]
fn hinted_views(names: u64, wanted: usize, views: impl Fn(usize) -> bool) -> bool {
    if wanted > HINTED {
        return false;
    }
    let mut last = None;
    for k in 0..wanted {
        let i = name(names, k);
        if i == u16::MAX || last.is_some_and(|l| i <= l) || !views(usize::from(i)) {
            return false;
        }
        last = Some(i);
    }
    true
}

/// The first `wanted` of `names` in increasing order, as a hint; `None` when there are more
/// than a hint holds or a site index does not fit in 16 bits (`len` sites).
fn sorted_names(names: u64, wanted: usize, len: usize) -> Option<u64> {
    if wanted > HINTED || len >= usize::from(u16::MAX) {
        return None;
    }
    let mut v: [u16; HINTED] = std::array::from_fn(|k| name(names, k));
    v[..wanted].sort_unstable();
    Some(v[..wanted].iter().enumerate().fold(NO_VIEWS, |acc, (k, i)| with_name(acc, k, *i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::dtype::DataType;
    use crate::shape::Shape;
    use crate::storage::Storage;

    /// A hint naming `sites` (increasing or not, as given).
    fn naming(sites: &[u16]) -> AtomicU64 {
        AtomicU64::new(sites.iter().enumerate().fold(NO_VIEWS, |acc, (k, i)| with_name(acc, k, *i)))
    }

    /// Sites: 0 a storage site whose storage sites 2 and 5 view (headers only they keep),
    /// 1, 3 and 4 unrelated.
    fn caches() -> Vec<Value> {
        let s = Storage::alloc(64, Device::cpu(0)).unwrap();
        let other = Storage::alloc(64, Device::cpu(0)).unwrap();
        let shape = Shape::from(&[4][..]);
        let mut caches =
            vec![Value::Storage(s.clone()), Value::Null, Value::Null, Value::Int(3), Value::Null, Value::Null];
        Tensor::view_in_slot(&mut caches[2], &s, 0, &shape, DataType::F32).unwrap();
        Tensor::view_in_slot(&mut caches[5], &s, 16, &shape, DataType::F32).unwrap();
        Tensor::view_in_slot(&mut caches[4], &other, 0, &shape, DataType::F32).unwrap();
        caches
    }

    #[test]
    fn a_search_names_the_views_it_found_and_the_next_call_checks_only_those() {
        let caches = caches();
        let hint = AtomicU64::new(NO_VIEWS);
        assert!(Tensor::site_storage_is_free_hinted(&caches, 0, &hint));
        assert_eq!(hint.load(Ordering::Relaxed), naming(&[2, 5]).load(Ordering::Relaxed));
        assert!(Tensor::site_storage_is_free_hinted(&caches, 0, &hint));
        // The storage site moved after the views (the search wraps around): found in another
        // order, named increasing all the same.
        let mut moved = caches;
        moved.swap(0, 3);
        let hint = AtomicU64::new(NO_VIEWS);
        assert!(Tensor::site_storage_is_free_hinted(&moved, 3, &hint));
        assert_eq!(hint.load(Ordering::Relaxed), naming(&[2, 5]).load(Ordering::Relaxed));
    }

    #[test]
    fn each_storage_keeps_its_own_sites_hint() {
        let caches = caches();
        let Value::Storage(s) = &caches[0] else { unreachable!() };
        assert_eq!(s.views_hint().load(Ordering::Relaxed), NO_VIEWS);
        assert!(Tensor::site_storage_is_free(&caches, 0));
        assert_eq!(s.views_hint().load(Ordering::Relaxed), naming(&[2, 5]).load(Ordering::Relaxed));
        // The other storage (site 4's view) is no site's: its hint is untouched.
        let Value::Tensor(t) = &caches[4] else { unreachable!() };
        assert_eq!(t.storage().views_hint().load(Ordering::Relaxed), NO_VIEWS);
        // A wrong hint in the storage: the same answer, and the hint corrected.
        s.views_hint().store(naming(&[4]).load(Ordering::Relaxed), Ordering::Relaxed);
        assert!(Tensor::site_storage_is_free(&caches, 0));
        assert_eq!(s.views_hint().load(Ordering::Relaxed), naming(&[2, 5]).load(Ordering::Relaxed));
    }

    #[test]
    fn a_wrong_stale_or_repeated_hint_never_changes_the_answer() {
        let caches = caches();
        // Wrong sites, the site itself, out of range, decreasing: the search answers, and
        // names the right ones.
        for wrong in [&[1, 4][..], &[0, 2], &[2, 9], &[5, 2], &[2], &[]] {
            let hint = naming(wrong);
            assert!(Tensor::site_storage_is_free_hinted(&caches, 0, &hint), "{wrong:?}");
            assert_eq!(hint.load(Ordering::Relaxed), naming(&[2, 5]).load(Ordering::Relaxed), "{wrong:?}");
        }
        // Something else holds the storage too: one kept header and one outside handle. A hint
        // naming that header twice must not count it twice.
        let mut held = self::caches();
        held[5] = Value::Null;
        let outside = held[0].clone();
        for hint in [naming(&[2, 2]), naming(&[2, 5]), AtomicU64::new(NO_VIEWS)] {
            assert!(!Tensor::site_storage_is_free_hinted(&held, 0, &hint));
        }
        drop(outside);
        // A kept header held elsewhere too is a holder, hinted or not.
        let result = held[2].clone();
        assert!(!Tensor::site_storage_is_free_hinted(&held, 0, &naming(&[2])));
        drop(result);
        assert!(Tensor::site_storage_is_free_hinted(&held, 0, &naming(&[2])));
        // Not a storage site: never free.
        assert!(!Tensor::site_storage_is_free_hinted(&caches, 2, &naming(&[0])));
    }

    #[test]
    fn sites_beyond_sixteen_bits_or_more_views_than_a_hint_holds_are_searched_every_time() {
        let s = Storage::alloc(64, Device::cpu(0)).unwrap();
        let shape = Shape::from(&[1][..]);
        let mut caches = vec![Value::Storage(s.clone())];
        for k in 0..6 {
            caches.push(Value::Null);
            let last = caches.len() - 1;
            Tensor::view_in_slot(&mut caches[last], &s, 4 * k, &shape, DataType::F32).unwrap();
        }
        drop(s);
        let hint = AtomicU64::new(NO_VIEWS);
        assert!(Tensor::site_storage_is_free_hinted(&caches, 0, &hint));
        assert_eq!(hint.load(Ordering::Relaxed), NO_VIEWS, "six views: not named");
        assert_eq!(sorted_names(naming(&[3, 1]).load(Ordering::Relaxed), 2, 1 << 16), None);
        assert_eq!(
            sorted_names(naming(&[3, 1]).load(Ordering::Relaxed), 2, 8),
            Some(naming(&[1, 3]).load(Ordering::Relaxed))
        );
    }
}
