//! Reference-counted blocks of memory that tensors view.
//!
//! A [`Storage`] is either memory we allocated (64-byte aligned, zeroed) or memory owned by
//! someone else — a numpy array, a memory-mapped executable file, a `Vec` produced by ndarray —
//! kept alive by an owner object for as long as any tensor views it.

use crate::device::Device;
use crate::error::{Error, Result};
use std::alloc::Layout;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// The alignment of memory the runtime allocates (a cache line; what DLPack consumers expect).
pub const ALIGNMENT: usize = 64;

/// A shared block of device memory.
#[derive(Clone)]
pub struct Storage(Arc<Block>);

struct Block {
    ptr: NonNull<u8>,
    len: usize,
    device: Device,
    owner: Owner,
}

enum Owner {
    /// Allocated here with `Layout { len, ALIGNMENT }`; freed on drop.
    Aligned,
    /// Memory owned by this object; `ptr` stays valid while it lives.
    External(#[allow(dead_code)] Box<dyn Any + Send + Sync>),
}

// SAFETY: `Block` only holds a pointer into memory that it owns (Aligned) or that its owner
// keeps alive (External, whose owner is itself Send + Sync). The runtime never mutates the
// memory behind a shared `Storage` except through explicit copy routines whose callers own
// the destination; concurrent writers elsewhere (numpy) carry the same contract as numpy's.
unsafe impl Send for Block {}
// SAFETY: see `Send` above; `&Block` exposes only the pointer and length.
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        if let Owner::Aligned = self.owner {
            if self.len > 0 {
                // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout (see `alloc`).
                unsafe { std::alloc::dealloc(self.ptr.as_ptr(), aligned_layout(self.len).expect("layout was valid")) }
            }
        }
    }
}

fn aligned_layout(len: usize) -> Result<Layout> {
    Layout::from_size_align(len, ALIGNMENT).map_err(|_| Error::alloc(len as u128, "size exceeds the address space"))
}

impl Storage {
    /// Allocates `nbytes` zeroed bytes, 64-byte aligned, on `device`. Fails with an error,
    /// never aborts, when the memory cannot be had.
    pub fn alloc(nbytes: usize, device: Device) -> Result<Self> {
        if nbytes == 0 {
            return Ok(Storage(Arc::new(Block {
                ptr: NonNull::<u64>::dangling().cast(),
                len: 0,
                device,
                owner: Owner::Aligned,
            })));
        }
        let layout = aligned_layout(nbytes)?;
        // SAFETY: the layout has a non-zero size (checked above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| Error::alloc(nbytes as u128, "out of memory"))?;
        Ok(Storage(Arc::new(Block { ptr, len: nbytes, device, owner: Owner::Aligned })))
    }

    /// Allocates storage for a size given as a signed or oversized number, with a clear error for
    /// negative sizes and sizes beyond the address space.
    pub fn alloc_checked(nbytes: i128, device: Device) -> Result<Self> {
        if nbytes < 0 {
            return Err(Error::value(format!("storage size must be non-negative, got {nbytes}")));
        }
        let n = usize::try_from(nbytes).map_err(|_| Error::alloc(nbytes as u128, "size exceeds the address space"))?;
        if n > isize::MAX as usize - ALIGNMENT {
            return Err(Error::alloc(n as u128, "size exceeds the address space"));
        }
        Storage::alloc(n, device)
    }

    /// Takes ownership of a vector of plain elements without copying it.
    pub fn from_vec<T: Copy + Send + Sync + 'static>(v: Vec<T>) -> Self {
        let mut v = std::mem::ManuallyDrop::new(v);
        let len = v.len() * std::mem::size_of::<T>();
        let ptr = NonNull::new(v.as_mut_ptr().cast::<u8>()).expect("Vec pointer is non-null");
        // SAFETY: rebuilding the same Vec (pointer, length, capacity) that we just leaked; the
        // owner keeps it alive, and it is dropped exactly once, with the Block.
        let owner = unsafe { Vec::from_raw_parts(v.as_mut_ptr(), v.len(), v.capacity()) };
        Storage(Arc::new(Block { ptr, len, device: Device::cpu(0), owner: Owner::External(Box::new(owner)) }))
    }

    /// Wraps memory owned by `owner`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as `owner` is alive,
    /// and must not be freed by anyone but `owner`'s destructor.
    pub unsafe fn from_external(
        ptr: NonNull<u8>,
        len: usize,
        device: Device,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        Storage(Arc::new(Block { ptr, len, device, owner: Owner::External(owner) }))
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True when the storage holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// The device the memory lives on.
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// The start of the memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.0.ptr.as_ptr()
    }

    /// True when both handles share one block.
    pub fn ptr_eq(&self, other: &Storage) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The bytes, read-only.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` bytes while the block lives (see the constructors),
        // and the block lives at least as long as `&self`.
        unsafe { std::slice::from_raw_parts(self.0.ptr.as_ptr(), self.0.len) }
    }

    /// Copies `src` into the storage at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        let end = offset.checked_add(src.len()).filter(|e| *e <= self.len());
        if end.is_none() {
            return Err(Error::index("storage bytes", (offset + src.len()) as i64, self.len()));
        }
        // SAFETY: the range [offset, offset + src.len()) lies inside the block (checked above);
        // `src` cannot overlap a region we are writing unless the caller passed a view of this
        // storage, for which `copy` (memmove semantics) is correct.
        unsafe { std::ptr::copy(src.as_ptr(), self.as_ptr().add(offset), src.len()) };
        Ok(())
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({} bytes on {})", self.len(), self.device())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_zeroed_and_aligned() {
        let s = Storage::alloc(1000, Device::cpu(0)).unwrap();
        assert_eq!(s.len(), 1000);
        assert_eq!(s.as_ptr() as usize % ALIGNMENT, 0);
        assert!(s.bytes().iter().all(|b| *b == 0));
    }

    #[test]
    fn huge_alloc_is_an_error() {
        let pib = 1i128 << 50;
        let e = Storage::alloc_checked(pib, Device::cpu(0)).unwrap_err();
        assert!(e.to_string().contains("cannot allocate"), "{e}");
        assert!(Storage::alloc_checked(-1, Device::cpu(0)).is_err());
        assert!(Storage::alloc_checked(i128::MAX, Device::cpu(0)).is_err());
    }

    #[test]
    fn from_vec_is_zero_copy() {
        let v = vec![1.0f32, 2.0, 3.0];
        let p = v.as_ptr() as usize;
        let s = Storage::from_vec(v);
        assert_eq!(s.as_ptr() as usize, p);
        assert_eq!(s.len(), 12);
    }

    #[test]
    fn write_checks_bounds() {
        let s = Storage::alloc(4, Device::cpu(0)).unwrap();
        s.write(1, &[7, 8]).unwrap();
        assert_eq!(s.bytes(), &[0, 7, 8, 0]);
        assert!(s.write(3, &[1, 2]).is_err());
        let empty = Storage::alloc(0, Device::cpu(0)).unwrap();
        assert!(empty.is_empty() && empty.bytes().is_empty());
    }
}
