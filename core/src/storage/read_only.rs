//! Memory the hardware refuses to write: the pages that hold an executable's constants.
//!
//! A frozen storage refuses every safe write, but native code — a kernel given a constant as
//! its destination argument — writes through raw pointers, which no Rust check can see. So the
//! bytes of constants live in pages mapped read-only ([`ReadOnlyPages`]): a write faults
//! instead of changing them, and the fault becomes an error where kernels are called (the
//! `relaxvm-tvm` crate's guard). Each block of such pages is listed in a process-wide registry,
//! which a signal handler asks, with [`contains`], whether a faulting address is one of them.
//!
//! The registry is a list of fixed-size chunks of slots that only grows (chunks are never
//! freed), read and written with atomic operations only, so a lookup from a signal handler
//! takes no lock and allocates nothing.

use memmap2::{Mmap, MmapMut};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// Slots per chunk of the registry.
const SLOTS: usize = 64;

/// One registered range `[start, end)`; `start` is 0 while the slot is free.
struct Slot {
    claimed: AtomicBool,
    start: AtomicUsize,
    end: AtomicUsize,
}

struct Chunk {
    slots: [Slot; SLOTS],
    next: AtomicPtr<Chunk>,
}

impl Chunk {
    const fn new() -> Self {
        #[allow(clippy::declare_interior_mutable_const)] // each use is a fresh slot: the point
        const FREE: Slot =
            Slot { claimed: AtomicBool::new(false), start: AtomicUsize::new(0), end: AtomicUsize::new(0) };
        Chunk { slots: [FREE; SLOTS], next: AtomicPtr::new(std::ptr::null_mut()) }
    }
}

static FIRST: Chunk = Chunk::new();

/// The chunks of the registry, first to last.
fn chunks() -> impl Iterator<Item = &'static Chunk> {
    std::iter::successors(Some(&FIRST), |c| {
        // SAFETY: `next` is null or a chunk leaked by `register`, never freed.
        unsafe { c.next.load(Ordering::Acquire).as_ref() }
    })
}

/// A range listed in the registry; dropping it takes it out.
struct Registration(&'static Slot);

impl Drop for Registration {
    fn drop(&mut self) {
        self.0.start.store(0, Ordering::Release);
        self.0.end.store(0, Ordering::Release);
        self.0.claimed.store(false, Ordering::Release);
    }
}

/// Lists `[start, start + len)` (`start` non-zero, `len` non-zero) until the result drops.
fn register(start: usize, len: usize) -> Registration {
    #[cfg(test)]
    let _serial = tests::NO_NEW_PAGES.lock().unwrap_or_else(|p| p.into_inner());
    let mut chunk = &FIRST;
    loop {
        for slot in &chunk.slots {
            if slot.claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                // `end` first: a reader that sees `start` sees this `end` (or a later one).
                slot.end.store(start + len, Ordering::Release);
                slot.start.store(start, Ordering::Release);
                return Registration(slot);
            }
        }
        let next = chunk.next.load(Ordering::Acquire);
        if let Some(next) = NonNull::new(next) {
            // SAFETY: a chunk leaked below, never freed.
            chunk = unsafe { next.as_ref() };
            continue;
        }
        let fresh = Box::into_raw(Box::new(Chunk::new()));
        match chunk.next.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: just leaked; it stays allocated for the life of the process.
            Ok(_) => chunk = unsafe { &*fresh },
            Err(theirs) => {
                // Another thread appended one first: free ours (never shared) and use theirs.
                // SAFETY: `fresh` came from `Box::into_raw` above and nothing else saw it;
                // `theirs` is a leaked chunk, never freed.
                unsafe {
                    drop(Box::from_raw(fresh));
                    chunk = &*theirs;
                }
            }
        }
    }
}

/// True when `addr` lies in registered read-only pages. Takes no lock and allocates nothing:
/// safe to call from a signal handler.
pub fn contains(addr: usize) -> bool {
    overlaps(addr, 1)
}

/// True when `[addr, addr + len)` (`len` > 0) shares a byte with registered read-only pages.
/// Lock-free, like [`contains`].
pub fn overlaps(addr: usize, len: usize) -> bool {
    let last = addr.saturating_add(len.max(1) - 1);
    chunks().any(|c| {
        c.slots.iter().any(|s| {
            let start = s.start.load(Ordering::Acquire);
            start != 0 && hits(start, s.end.load(Ordering::Acquire), addr, last)
        })
    })
}

/// True when `[start, end)` and `[addr, last]` share a byte.
fn hits(start: usize, end: usize, addr: usize, last: usize) -> bool {
    start <= last && addr < end
}

/// A block of pages mapped read-only, and listed in the registry while it lives.
pub struct ReadOnlyPages {
    /// Keeps the pages mapped (a read-only anonymous mapping, or a file mapping's owner).
    _map: Box<dyn Any + Send + Sync>,
    ptr: NonNull<u8>,
    len: usize,
    /// Taken out (in `Drop`) before `_map` unmaps the pages.
    registration: Option<Registration>,
}

impl Drop for ReadOnlyPages {
    fn drop(&mut self) {
        // Out of the registry before the pages are unmapped (`_map` drops after this body).
        self.registration.take();
    }
}

// SAFETY: the pages are never written (mapped read-only); the owner is Send + Sync.
unsafe impl Send for ReadOnlyPages {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for ReadOnlyPages {}

impl ReadOnlyPages {
    /// Fresh anonymous pages holding `len` bytes that `fill` writes, then mapped read-only.
    /// An error (not an abort) when the memory cannot be mapped; `len` must be non-zero.
    pub fn filled(len: usize, fill: impl FnOnce(&mut [u8]) -> crate::Result<()>) -> crate::Result<Self> {
        let oom = |e: std::io::Error| crate::Error::alloc(len as u128, format!("cannot map read-only pages: {e}"));
        let mut map = MmapMut::map_anon(len).map_err(oom)?;
        fill(&mut map)?;
        let map: Mmap = map.make_read_only().map_err(oom)?;
        let ptr = NonNull::new(map.as_ptr().cast_mut()).expect("a mapping is non-null");
        Ok(ReadOnlyPages { ptr, len, registration: Some(register(ptr.as_ptr() as usize, len)), _map: Box::new(map) })
    }

    /// Pages that `map` keeps mapped read-only (a file mapped without write access).
    ///
    /// # Safety
    /// `ptr` must point to `len` (> 0) bytes of pages mapped without write permission, which
    /// stay mapped, unchanged, for as long as `map` lives.
    pub unsafe fn from_mapping(map: Box<dyn Any + Send + Sync>, ptr: NonNull<u8>, len: usize) -> Self {
        ReadOnlyPages { ptr, len, registration: Some(register(ptr.as_ptr() as usize, len)), _map: map }
    }

    /// The first byte.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the block holds no bytes (never: blocks are made non-empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Held by a test that checks an address is no longer listed after its pages went: no
    /// other test registers pages (which the system may place at the same address) meanwhile.
    pub(crate) static NO_NEW_PAGES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Drops `pages` and tells whether `addr` is still listed, with no pages registered between.
    pub(crate) fn listed_after_drop<T>(pages: T, addr: usize) -> bool {
        let _serial = NO_NEW_PAGES.lock().unwrap_or_else(|p| p.into_inner());
        drop(pages);
        contains(addr)
    }

    #[test]
    fn pages_are_registered_while_they_live() {
        let pages = ReadOnlyPages::filled(10_000, |b| {
            b.fill(7);
            Ok(())
        })
        .unwrap();
        let start = pages.as_ptr().as_ptr() as usize;
        assert!(contains(start) && contains(start + 9_999));
        assert!(overlaps(start - 5, 6) && overlaps(start + 9_999, 100));
        // The bounds (neighbouring addresses may hold other tests' pages, so they are checked
        // on the comparison itself).
        assert!(hits(100, 200, 199, 199) && hits(100, 200, 95, 100));
        assert!(!hits(100, 200, 200, 300) && !hits(100, 200, 95, 99));
        // SAFETY: the pages hold 10,000 bytes while `pages` lives.
        assert!(unsafe { std::slice::from_raw_parts(start as *const u8, 10_000) }.iter().all(|b| *b == 7));
        assert!(!listed_after_drop(pages, start));
    }

    #[test]
    fn the_registry_grows_past_one_chunk_and_reuses_slots() {
        let blocks: Vec<ReadOnlyPages> =
            (0..SLOTS * 2 + 3).map(|_| ReadOnlyPages::filled(1, |_| Ok(())).unwrap()).collect();
        assert!(blocks.iter().all(|b| contains(b.as_ptr().as_ptr() as usize)));
        let first = blocks[0].as_ptr().as_ptr() as usize;
        assert!(!listed_after_drop(blocks, first));
        let again = ReadOnlyPages::filled(1, |_| Ok(())).unwrap();
        assert!(contains(again.as_ptr().as_ptr() as usize));
    }

    #[test]
    fn a_failed_fill_is_its_error() {
        let e = ReadOnlyPages::filled(8, |_| Err(crate::Error::value("no"))).err().expect("an error");
        assert_eq!(e.to_string(), crate::Error::value("no").to_string());
    }
}
