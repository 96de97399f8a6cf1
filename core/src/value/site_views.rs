//! A call site's cache (a value) as the place it keeps a tensor header between calls, and the
//! storage a site keeps seen from the headers other sites of the same VM keep (see
//! `tensor/pooled.rs`'s module docs): when that storage is free to hand out again, and letting
//! those headers go of it. Here, not beside the headers, because a site's cache is a
//! list of values and tensors do not know the value type.

use super::Value;
use crate::tensor::{Tensor, TensorSlot};

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
    pub fn site_storage_is_free(caches: &[Value], own: usize) -> bool {
        let Some(Value::Storage(s)) = caches.get(own) else { return false };
        let handles = s.handles();
        if handles != 1 {
            let views = |c: &&Value| matches!(c, Value::Tensor(t) if t.handle_count() == 1 && t.storage().ptr_eq(s));
            // The sites after this one first (a program views a storage after allocating it),
            // up to the last holder to account for.
            let others = caches[own + 1..].iter().chain(&caches[..own]);
            if others.filter(views).take(handles - 1).count() + 1 != handles {
                return false;
            }
        }
        // Every handle is this VM's own, and none can be cloned meanwhile (a header only its
        // slot holds cannot be): order what their earlier users did before the reuse, as
        // `Storage::is_sole` does.
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
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
