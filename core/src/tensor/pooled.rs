//! Tensor headers kept by a call site between calls, as a pooled allocator keeps blocks: a
//! compiled model makes the same views of the same storages at every call, and a header that
//! nothing but its site holds any more is made into the next view in place (no allocation,
//! no free; when the view is the one it already is, not even its checks run again). A header
//! anything else holds (a register, a tuple, a result the caller kept, a Python object) is
//! never changed: the site then makes a new one and keeps that.
//!
//! A kept header still views the storage of its last view, so that storage's own site counts
//! such headers as no holders ([`Tensor::site_storage_is_free`]): nothing can read a header only
//! its site holds until that site makes it a view again.

use super::{check_view, Inner, Tensor};
use crate::dtype::DataType;
use crate::error::Result;
use crate::shape::Shape;
use crate::storage::Storage;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// Where a call site keeps a tensor header between calls: a place that may hold a tensor
/// (a `Value`, its site cache, which implements this beside the value type). Defined here so
/// that tensors need not know the value type.
pub trait TensorSlot {
    /// The tensor the slot holds, if it holds one.
    fn tensor_mut(&mut self) -> Option<&mut Tensor>;
    /// Makes the slot hold `t`.
    fn hold(&mut self, t: Tensor);
}

impl Tensor {
    /// The contiguous view [`Tensor::from_parts`] makes of `storage` (same checks, same
    /// errors), made in the header `slot` holds when nothing else holds that header; otherwise
    /// a new header, which `slot` then holds.
    pub fn view_in_slot(
        slot: &mut impl TensorSlot,
        storage: &Storage,
        byte_offset: usize,
        shape: &Shape,
        dtype: DataType,
    ) -> Result<Tensor> {
        if let Some(Tensor(kept)) = slot.tensor_mut() {
            // The view it already is (a model's next run of this site), held by the slot alone:
            // handed out as it is, without `get_mut`'s atomic exchange. Its checks passed for
            // exactly these parts, none of which can change (a storage's length is fixed, a
            // shape immutable), and no other handle exists to read it meanwhile (`sole`: one
            // strong handle, whose fence orders what dropped handles did before this; no weak
            // handles are made of tensors).
            if crate::storage::sole(kept) && is_view(kept, storage, byte_offset, shape, dtype) {
                // The rule `sole` relies on, checked wherever debug builds run (review
                // R-perfmlp-1): a weak handle, upgraded on another thread, would read this
                // header while it is handed out as the only one.
                debug_assert_eq!(Arc::weak_count(kept), 0, "no weak handles are made of tensors");
                // A binding's object, if one was made, is gone (it held the header).
                kept.binding.store(std::ptr::null_mut(), Ordering::Relaxed);
                return Ok(Tensor(Arc::clone(kept)));
            }
            // `get_mut` succeeds only for the one handle (no other strong or weak reference),
            // and orders what the dropped handles did before the writes below.
            if let Some(inner) = Arc::get_mut(kept) {
                // The view it already is only if another handle was dropped since the check
                // above; then as there.
                if !is_view(inner, storage, byte_offset, shape, dtype) {
                    check_view(storage, byte_offset, shape, None, dtype)?;
                    if !inner.storage.ptr_eq(storage) {
                        inner.storage = storage.clone();
                    }
                    inner.byte_offset = byte_offset;
                    inner.dtype = dtype;
                    if !inner.shape.ptr_eq(shape) {
                        inner.shape = shape.clone();
                    }
                    inner.strides = None;
                }
                // A binding's object, if one was made, is gone (it held the header).
                *inner.binding.get_mut() = std::ptr::null_mut();
                return Ok(Tensor(Arc::clone(kept)));
            }
        }
        let t = Tensor::from_parts(storage.clone(), byte_offset, shape.clone(), None, dtype)?;
        slot.hold(t.clone());
        Ok(t)
    }

    /// When `slot` holds a tensor header that nothing else holds, viewing storage that
    /// something else holds too (a site's cache, another tensor), lets go of that storage: the
    /// header then views empty storage (shape `(0,)`), until [`Tensor::view_in_slot`] makes it
    /// a view again. A kept header must not keep its storage from being free, or the storage's
    /// own site could never hand that storage out again; storage only the header holds stays
    /// (it is the header's own, as the shape heap's tensor is).
    pub fn release_shared_storage(slot: &mut impl TensorSlot) {
        let Some(Tensor(kept)) = slot.tensor_mut() else { return };
        let Some(inner) = Arc::get_mut(kept) else { return };
        if inner.storage.is_sole() {
            return;
        }
        let (storage, shape) = empty();
        inner.storage = storage.clone();
        inner.byte_offset = 0;
        inner.shape = shape.clone();
        inner.strides = None;
        *inner.binding.get_mut() = std::ptr::null_mut();
    }
}

/// Whether `inner` is the contiguous view of `storage` at `byte_offset` with `shape` (the very
/// object) and `dtype`.
#[inline]
fn is_view(inner: &Inner, storage: &Storage, byte_offset: usize, shape: &Shape, dtype: DataType) -> bool {
    inner.shape.ptr_eq(shape)
        && inner.storage.ptr_eq(storage)
        && inner.byte_offset == byte_offset
        && inner.dtype == dtype
        && inner.strides.is_none()
}

/// Empty storage and the shape `(0,)`, shared by every released header.
fn empty() -> &'static (Storage, Shape) {
    static EMPTY: OnceLock<(Storage, Shape)> = OnceLock::new();
    EMPTY.get_or_init(|| {
        let storage = Storage::alloc(0, crate::device::Device::cpu(0)).expect("empty storage allocates nothing");
        (storage, Shape::from(&[0][..]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::value::Value;

    fn storage(n: usize) -> Storage {
        Storage::alloc(n, Device::cpu(0)).unwrap()
    }

    #[test]
    fn a_header_is_made_again_only_once_nothing_else_holds_it() {
        let mut slot = Value::Null;
        let s = storage(64);
        let shape = Shape::from(&[4][..]);
        let a = Tensor::view_in_slot(&mut slot, &s, 0, &shape, DataType::F32).unwrap();
        assert!(a.ptr_eq(slot.as_tensor().unwrap()));
        // Still held by `a`: a second view is a new header, and `a` is unchanged.
        let b = Tensor::view_in_slot(&mut slot, &s, 16, &Shape::from(&[2][..]), DataType::F32).unwrap();
        assert!(!b.ptr_eq(&a));
        assert_eq!((a.byte_offset(), a.shape().dims()), (0, &[4][..]));
        assert!(b.ptr_eq(slot.as_tensor().unwrap()));
        drop(b);
        // Only the slot holds it: the same header comes back, viewing the new parts.
        let other = storage(32);
        let c = Tensor::view_in_slot(&mut slot, &other, 8, &Shape::from(&[3][..]), DataType::I16).unwrap();
        assert!(c.ptr_eq(slot.as_tensor().unwrap()));
        assert!(c.storage().ptr_eq(&other));
        assert_eq!((c.byte_offset(), c.shape().dims(), c.dtype()), (8, &[3][..], DataType::I16));
        assert!(c.is_contiguous());
    }

    #[test]
    fn a_kept_header_checks_its_view_as_from_parts_does() {
        let mut slot = Value::Null;
        let s = storage(16);
        let t = Tensor::view_in_slot(&mut slot, &s, 0, &Shape::from(&[4][..]), DataType::F32).unwrap();
        drop(t);
        let e = Tensor::view_in_slot(&mut slot, &s, 4, &Shape::from(&[4][..]), DataType::F32).unwrap_err();
        let from_parts = Tensor::from_parts(s.clone(), 4, Shape::from(&[4][..]), None, DataType::F32).unwrap_err();
        assert_eq!(e.to_string(), from_parts.to_string());
        // The refused view left the kept header as it was.
        assert_eq!(slot.as_tensor().unwrap().byte_offset(), 0);
    }

    #[test]
    fn the_same_shape_object_at_another_offset_or_dtype_is_checked() {
        // The fast path skips the checks only when every part of the view is the one it has:
        // the same shape object with another offset or dtype must be checked as a new view.
        let mut slot = Value::Null;
        let s = storage(16);
        let shape = Shape::from(&[4][..]);
        drop(Tensor::view_in_slot(&mut slot, &s, 0, &shape, DataType::F32).unwrap());
        let past_end = Tensor::view_in_slot(&mut slot, &s, 4, &shape, DataType::F32).unwrap_err();
        let expected = Tensor::from_parts(s.clone(), 4, shape.clone(), None, DataType::F32).unwrap_err();
        assert_eq!(past_end.to_string(), expected.to_string());
        let wider = Tensor::view_in_slot(&mut slot, &s, 0, &shape, DataType::F64).unwrap_err();
        let expected = Tensor::from_parts(s.clone(), 0, shape.clone(), None, DataType::F64).unwrap_err();
        assert_eq!(wider.to_string(), expected.to_string());
        // Both refusals left the kept header as it was.
        let kept = slot.as_tensor().unwrap();
        assert_eq!((kept.byte_offset(), kept.dtype()), (0, DataType::F32));
    }

    #[test]
    fn the_same_view_again_is_the_same_header_unchanged() {
        let mut slot = Value::Null;
        let s = storage(64);
        let shape = Shape::from(&[4][..]);
        let a = Tensor::view_in_slot(&mut slot, &s, 16, &shape, DataType::F32).unwrap();
        // A binding wrapped it; that object is gone once only the slot holds the header.
        let mut wrapper = 0u8;
        a.binding_slot().store((&raw mut wrapper).cast(), std::sync::atomic::Ordering::Relaxed);
        drop(a);
        let b = Tensor::view_in_slot(&mut slot, &s, 16, &shape, DataType::F32).unwrap();
        assert!(b.ptr_eq(slot.as_tensor().unwrap()));
        assert!(b.binding_slot().load(std::sync::atomic::Ordering::Relaxed).is_null(), "the wrapper is forgotten");
        assert!(b.storage().ptr_eq(&s) && b.shape().ptr_eq(&shape));
        assert_eq!((b.byte_offset(), b.dtype(), b.is_contiguous()), (16, DataType::F32, true));
        drop(b);
        // An equal shape that is another object is checked and taken as any new view.
        let other = Shape::from(&[4][..]);
        let c = Tensor::view_in_slot(&mut slot, &s, 16, &other, DataType::F32).unwrap();
        assert!(c.shape().ptr_eq(&other));
    }

    #[test]
    fn a_site_storage_is_free_when_only_headers_no_one_else_holds_view_it() {
        let s = storage(64);
        let shape = Shape::from(&[4][..]);
        let mut caches = vec![Value::Storage(s.clone()), Value::Null, Value::Null, Value::Null];
        let t1 = Tensor::view_in_slot(&mut caches[1], &s, 0, &shape, DataType::F32).unwrap();
        let t2 = Tensor::view_in_slot(&mut caches[2], &s, 16, &shape, DataType::F32).unwrap();
        // A header of other storage does not count.
        Tensor::view_in_slot(&mut caches[3], &storage(16), 0, &shape, DataType::F32).unwrap();
        drop(s);
        assert!(!Tensor::site_storage_is_free(&caches, 0), "t1 and t2 hold their headers");
        drop(t1);
        assert!(!Tensor::site_storage_is_free(&caches, 0), "t2 still holds its header");
        let kept_storage = t2.storage().clone();
        drop(t2);
        assert!(!Tensor::site_storage_is_free(&caches, 0), "a handle of the storage is held");
        drop(kept_storage);
        assert!(Tensor::site_storage_is_free(&caches, 0));
        // Not a storage site: never free.
        assert!(!Tensor::site_storage_is_free(&caches, 1));
        assert!(!Tensor::site_storage_is_free(&caches, 9));
        // Letting go: both views of it lose it, the other header keeps its own.
        Tensor::release_site_storage_views(&mut caches, 0);
        assert!(matches!(&caches[0], Value::Storage(s) if s.is_sole()));
        assert_eq!(caches[3].as_tensor().unwrap().numel(), 4);
    }

    #[test]
    fn a_free_header_lets_go_of_shared_storage_only() {
        let mut slot = Value::Null;
        let s = storage(16);
        let t = Tensor::view_in_slot(&mut slot, &s, 0, &Shape::from(&[4][..]), DataType::F32).unwrap();
        // Held by `t`: nothing changes.
        Tensor::release_shared_storage(&mut slot);
        assert!(t.storage().ptr_eq(&s));
        drop(t);
        Tensor::release_shared_storage(&mut slot);
        assert!(s.is_sole(), "the header let go of the storage");
        let kept = slot.as_tensor().unwrap();
        assert_eq!((kept.numel(), kept.storage().len()), (0, 0));
        // A header that is its storage's only holder keeps it.
        let own = Tensor::zeros(Shape::from(&[2][..]), DataType::I64, Device::cpu(0)).unwrap();
        let mut slot = Value::Tensor(own);
        Tensor::release_shared_storage(&mut slot);
        assert_eq!(slot.as_tensor().unwrap().numel(), 2);
    }
}
