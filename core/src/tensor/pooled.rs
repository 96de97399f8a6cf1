//! Tensor headers kept by a call site between calls, as a pooled allocator keeps blocks: a
//! compiled model makes the same views of the same storages at every call, and a header that
//! nothing but its site holds any more is made into the next view in place (no allocation,
//! no free). A header anything else holds (a register, a tuple, a result the caller kept, a
//! Python object) is never changed: the site then makes a new one and keeps that.

use super::{check_view, Tensor};
use crate::dtype::DataType;
use crate::error::Result;
use crate::shape::Shape;
use crate::storage::Storage;
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
            // `get_mut` succeeds only for the one handle (no other strong or weak reference),
            // and orders what the dropped handles did before the writes below.
            if let Some(inner) = Arc::get_mut(kept) {
                check_view(storage, byte_offset, shape, None, dtype)?;
                inner.storage = storage.clone();
                inner.byte_offset = byte_offset;
                inner.dtype = dtype;
                if !inner.shape.ptr_eq(shape) {
                    inner.shape = shape.clone();
                }
                inner.strides = None;
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
