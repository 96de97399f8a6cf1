//! Allocations a call site makes again at every call of a model (its storages, its shape
//! heap), served from the site's cache ([`CallCtx::site_cache`]) when nothing else holds what
//! the site made last: an arena per call site, planned by the first call.
//!
//! A compiled model allocates the same storages at every call and drops them at its end. Each
//! site keeps the last one it made; at the next call, when that one is no longer held anywhere
//! else (no register, tensor, numpy array or result the caller kept: [`Storage::is_sole`],
//! [`Tensor::is_sole`]) and has the size asked for, it is handed out again, zeroed as new
//! storage is, with no allocation or free. Anything still held is never handed out twice: the
//! site then allocates anew and keeps the new one. As TVM's pooled allocator keeps freed blocks,
//! a VM keeps each site's last allocation while it lives. `alloc_tensor`'s sites keep their
//! last tensor header likewise ([`relaxvm::Tensor::view_in_slot`]); before each call from
//! outside, the VM has such headers let go of the storage they view, so that the storage's own
//! site finds it free. With TVM's `memory_cfg="naive"` ([`relaxvm::Allocator::Naive`]) no site
//! keeps anything ([`CallCtx::pool_cache`] is `None`).
//!
//! [`CallCtx::site_cache`]: relaxvm::CallCtx::site_cache
//! [`CallCtx::pool_cache`]: relaxvm::CallCtx::pool_cache

use relaxvm::{DataType, Device, Result, Shape, Storage, Tensor, Value};

/// `nbytes` of zeroed storage on `device`: the site's last storage when that is free and of the
/// same size, else new storage, which becomes the site's last. `cache` is the site's cache
/// (`None` when the call has none).
pub(crate) fn storage(cache: Option<&mut Value>, nbytes: i128, device: Device) -> Result<Storage> {
    let Some(cache) = cache else { return Storage::alloc_checked(nbytes, device) };
    if let Value::Storage(s) = cache {
        let fits = i128::try_from(s.len()).is_ok_and(|len| len == nbytes) && s.device() == device;
        // A sole handle has no reader or writer but us: the zeroing cannot fail, but if it
        // did, new storage serves the call.
        if fits && s.is_sole() && s.write_with(|b| b.fill(0)).is_ok() {
            return Ok(s.clone());
        }
    }
    let s = Storage::alloc_checked(nbytes, device)?;
    *cache = Value::Storage(s.clone());
    Ok(s)
}

/// A zeroed 1-D tensor of `len` elements of `dtype` on `device` in storage of its own: the
/// site's last one when that (and its storage) is free and the same, else a new one, which
/// becomes the site's last.
pub(crate) fn own_tensor(cache: Option<&mut Value>, len: i64, dtype: DataType, device: Device) -> Result<Tensor> {
    let new = || {
        let storage = Storage::alloc_checked(i128::from(len) * dtype.itemsize() as i128, device)?;
        Tensor::from_parts(storage, 0, Shape::interned(&[len]), None, dtype)
    };
    let Some(cache) = cache else { return new() };
    if let Value::Tensor(t) = cache {
        let same = t.dtype() == dtype && t.shape().has_dims(&[len]) && t.storage().device() == device;
        let sole = same && t.is_sole() && t.storage().is_sole();
        if sole && t.storage().write_with(|b| b.fill(0)).is_ok() {
            return Ok(t.clone());
        }
    }
    let t = new()?;
    *cache = Value::Tensor(t.clone());
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(cache: &Value) -> &Storage {
        match cache {
            Value::Storage(s) => s,
            other => panic!("expected a storage, found {}", other.describe()),
        }
    }

    #[test]
    fn a_site_reuses_its_storage_only_once_nothing_else_holds_it() {
        let dev = Device::cpu(0);
        let mut cache = Value::Null;
        let a = storage(Some(&mut cache), 64, dev).unwrap();
        a.write(0, &[7; 64]).unwrap();
        // Still held (by `a`): a second call gets other storage.
        let b = storage(Some(&mut cache), 64, dev).unwrap();
        assert!(!b.ptr_eq(&a));
        // The site keeps `b`: written here, it must come back zeroed.
        b.write(0, &[5; 64]).unwrap();
        drop(a);
        drop(b);
        // Only the cache holds the last one: it comes back, zeroed.
        let c = storage(Some(&mut cache), 64, dev).unwrap();
        assert!(c.ptr_eq(cached(&cache)));
        assert!(c.bytes().iter().all(|x| *x == 0));
        c.write(0, &[1]).unwrap();
        drop(c);
        // Another size: new storage.
        let d = storage(Some(&mut cache), 32, dev).unwrap();
        assert_eq!(d.len(), 32);
        // A tensor viewing the last storage holds it.
        drop(d);
        let view = Tensor::from_parts(cached(&cache).clone(), 0, Shape::from(&[8][..]), None, DataType::F32).unwrap();
        let e = storage(Some(&mut cache), 32, dev).unwrap();
        assert!(!e.ptr_eq(view.storage()));
        // Without a cache, always new.
        assert!(storage(None, 32, dev).unwrap().bytes().iter().all(|x| *x == 0));
    }

    #[test]
    fn a_site_reuses_its_own_tensor_zeroed_once_free() {
        let dev = Device::cpu(0);
        let mut cache = Value::Null;
        let a = own_tensor(Some(&mut cache), 3, DataType::I64, dev).unwrap();
        a.storage().write(0, &[9; 24]).unwrap();
        let storage = a.storage().clone();
        drop(a);
        // Its storage is still held: a new one.
        let b = own_tensor(Some(&mut cache), 3, DataType::I64, dev).unwrap();
        assert!(!b.storage().ptr_eq(&storage));
        drop((b, storage));
        let c = own_tensor(Some(&mut cache), 3, DataType::I64, dev).unwrap();
        assert!(c.ptr_eq(cache.as_tensor().unwrap()));
        assert_eq!(c.to_vec::<i64>().unwrap(), [0, 0, 0]);
        drop(c);
        assert_eq!(own_tensor(Some(&mut cache), 2, DataType::I64, dev).unwrap().numel(), 2);
    }
}
