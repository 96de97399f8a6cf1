//! The numpy arrays passed last on this thread and the tensors that view them, so that an array
//! passed again, unchanged, becomes the same tensor without a new conversion.
//!
//! Callers pass the same arrays call after call: a preallocated input refilled in place, weights
//! or state given at every call. Viewing an array costs three allocations (storage, its owner,
//! tensor) and their frees, and a tensor returned to Python a new `rx.Tensor` object: as much
//! again as the rest of a short call. An entry keeps the tensor's `rx.Tensor` object (once the
//! array has come twice), so a tensor passed through comes back as the same object, as an
//! `rx.Tensor` passed in does.
//!
//! An entry holds a reference to its array (through the tensor's storage), so only small arrays
//! are kept — at most [`SLOTS`] of at most [`MAX_BYTES`] each per thread — and
//! [`clear_array_cache`] drops them (numpy's `resize` refuses an array referenced elsewhere). A hit
//! needs the array's header unchanged since it was viewed: the same data pointer, dtype object,
//! flags, shape and strides (numpy lets all of them be reassigned in place). Arrays that were
//! copied rather than viewed are not kept, nor bool arrays, whose bytes are checked at every
//! conversion (another view may have written a byte that is not 0 or 1).

use crate::from_numpy::numpy_to_tensor;
use crate::tensor::PyTensor;
use numpy::npyffi::{NPY_ARRAY_ALIGNED, NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_WRITEABLE};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::ffi;
use pyo3::prelude::*;
use relaxvm::{DataType, Tensor};
use std::cell::RefCell;

/// How many arrays are kept per thread.
const SLOTS: usize = 8;

/// The largest array kept, in bytes: conversion matters for small arrays, and the bound keeps
/// what the cache holds alive under half a MiB per thread.
const MAX_BYTES: usize = 64 << 10;

/// The largest rank kept (its header is compared dimension by dimension).
const MAX_RANK: usize = 6;

/// The flags a view depends on.
const FLAGS: i32 = NPY_ARRAY_WRITEABLE | NPY_ARRAY_ALIGNED | NPY_ARRAY_C_CONTIGUOUS;

/// What of an array's header a view was made from.
#[derive(PartialEq, Eq, Clone, Copy)]
struct Header {
    array: *mut ffi::PyObject,
    data: *mut std::ffi::c_char,
    descr: *mut numpy::npyffi::PyArray_Descr,
    flags: i32,
    rank: usize,
    dims: [isize; MAX_RANK],
    strides: [isize; MAX_RANK],
}

impl Header {
    /// `a`'s header, or `None` when its rank is past [`MAX_RANK`].
    #[inline]
    fn of(a: &Bound<'_, PyUntypedArray>) -> Option<Header> {
        // SAFETY: `a` is a live ndarray (its type was checked by the cast that made the
        // `PyUntypedArray`); its header's `nd` dimensions and strides are readable while we hold
        // it and the GIL.
        unsafe {
            let raw = &(*a.as_array_ptr()).fields;
            let rank = usize::try_from(raw.nd).ok().filter(|r| *r <= MAX_RANK)?;
            let mut h = Header {
                array: a.as_ptr(),
                data: raw.data,
                descr: raw.descr,
                flags: raw.flags & FLAGS,
                rank,
                dims: [0; MAX_RANK],
                strides: [0; MAX_RANK],
            };
            for i in 0..rank {
                h.dims[i] = *raw.dimensions.add(i);
                h.strides[i] = *raw.strides.add(i);
            }
            Some(h)
        }
    }
}

/// A kept view: the header it was made from, the tensor, and its `rx.Tensor` object once the
/// array came a second time.
struct Remembered {
    header: Header,
    /// The header's dtype, held so that its address cannot be reused by another dtype while
    /// the entry compares it (the array and the data are held by the tensor's storage).
    _descr: Py<PyAny>,
    tensor: Tensor,
    object: Option<Py<PyTensor>>,
}

/// A thread's kept views, replaced in turn.
struct Recent {
    entries: [Option<Remembered>; SLOTS],
    next: usize,
}

impl Recent {
    const EMPTY: Recent = Recent { entries: [const { None }; SLOTS], next: 0 };

    /// The entry of an array with header `h`.
    fn entry(&mut self, h: &Header) -> Option<&mut Remembered> {
        self.entries.iter_mut().flatten().find(|e| e.header == *h)
    }
}

thread_local! {
    static RECENT: RefCell<Recent> = const { RefCell::new(Recent::EMPTY) };
}

/// The tensor kept for the numpy array `a`, when `a` is unchanged since it was viewed (see the
/// module's note): the fast path of a call's arguments, which falls back to [`tensor_of`].
pub fn kept(a: &Bound<'_, PyUntypedArray>) -> Option<Tensor> {
    find(a.py(), &Header::of(a)?)
}

/// The kept tensor of `ob` when it is a numpy array whose kept tensor has its Python object
/// made already (else `None`): this runs no Python code and makes no Python object, so it may
/// run while the VM is held. With nothing kept on this thread it looks no further: telling an
/// array from other objects needs numpy's C API, whose first use imports numpy (Python code);
/// anything kept was converted through that API, so it is set up then.
pub fn kept_made(ob: &Bound<'_, PyAny>) -> Option<Tensor> {
    let none_kept = RECENT.try_with(|r| r.try_borrow().map_or(true, |r| r.entries.iter().all(Option::is_none)));
    if none_kept.unwrap_or(true) {
        return None;
    }
    let (tensor, has_object) = lookup(&Header::of(ob.cast_exact::<PyUntypedArray>().ok()?)?)?;
    has_object.then_some(tensor)
}

/// The tensor viewing (or copying) the numpy array `a`: the one made for it before when `a` is
/// unchanged since, else a new one (see the module's note).
pub fn tensor_of(a: &Bound<'_, PyUntypedArray>) -> PyResult<Tensor> {
    let Some(header) = Header::of(a) else { return numpy_to_tensor(a).map(|(t, _)| t) };
    if let Some(t) = find(a.py(), &header) {
        return Ok(t);
    }
    let (tensor, viewed) = numpy_to_tensor(a)?;
    if viewed && tensor.dtype() != DataType::Bool && tensor.nbytes() <= MAX_BYTES {
        let descr = a.dtype().into_any().unbind();
        let evicted = RECENT
            .try_with(|r| {
                let mut r = r.borrow_mut();
                let slot = r.next;
                r.next = (slot + 1) % SLOTS;
                r.entries[slot].replace(Remembered { header, _descr: descr, tensor: tensor.clone(), object: None })
            })
            .ok()
            .flatten();
        // Dropped after the borrow ends: releasing an array may run Python code that converts
        // arrays again.
        drop(evicted);
    }
    Ok(tensor)
}

/// The kept tensor of an array with header `h`, if any, and whether its Python object is made.
#[inline]
fn lookup(h: &Header) -> Option<(Tensor, bool)> {
    RECENT.try_with(|r| r.try_borrow_mut().ok()?.entry(h).map(|e| (e.tensor.clone(), e.object.is_some()))).ok()?
}

/// The kept tensor of an array with header `h`, if any, with its Python object made.
#[inline]
fn find(py: Python<'_>, h: &Header) -> Option<Tensor> {
    let (tensor, has_object) = lookup(h)?;
    if !has_object {
        keep_object(py, h, &tensor);
    }
    Some(tensor)
}

/// Gives the entry of an array with header `h` its tensor's object, on the array's second use.
/// The object is made outside the borrow: allocating it may start Python's garbage collector,
/// whose finalizers may pass arrays to a VM again.
#[cold]
fn keep_object(py: Python<'_>, h: &Header, tensor: &Tensor) {
    let mut object = PyTensor::wrap(py, tensor.clone()).ok().map(Bound::unbind);
    let _ = RECENT.try_with(|r| {
        if let Some(e) = r.borrow_mut().entry(h).filter(|e| e.object.is_none()) {
            e.object = object.take();
        }
    });
    // Not kept (the entry went meanwhile): released here, outside the borrow.
    drop(object);
}

/// Drops the tensors this thread keeps for the numpy arrays passed last, and with them their
/// references to the arrays (see the module's note).
#[pyfunction]
pub fn clear_array_cache() {
    let kept = RECENT.try_with(|r| std::mem::replace(&mut *r.borrow_mut(), Recent::EMPTY));
    drop(kept);
}
