//! The counting global allocator of relaxvm's no-allocation tests (one copy for every test
//! binary that checks a steady state allocates nothing: the interpreter's, a decode step's,
//! a kernel call's).
//!
//! A test binary installs it with
//! `#[global_allocator] static GLOBAL: relaxvm_test_alloc::Counting = relaxvm_test_alloc::Counting;`
//! and asserts `allocations_during(|| ...).0 == 0`. It forwards every call to the system
//! allocator and counts allocations and reallocations per thread (the test harness's own
//! threads, and other tests running meanwhile, do not count), so the binary's other tests run
//! as before.

#![deny(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting each thread's allocations.
pub struct Counting;

thread_local! {
    /// Allocations (and reallocations) made by this thread.
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: during the thread's exit the counter may be gone; nothing is counted then.
    let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts calls, in a
// const-initialised thread-local without a destructor, which never allocates itself.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, which is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, which is System's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, which is System's (`ptr` came from it).
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, which is System's (`ptr` came from it).
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// How many allocations this thread made while `f` ran (0 unless [`Counting`] is the global
/// allocator), and what `f` returned.
pub fn allocations_during<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (ALLOCS.with(Cell::get) - before, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    #[test]
    fn allocations_of_this_thread_are_counted_and_none_are_made_up() {
        assert_eq!(allocations_during(|| drop(std::hint::black_box(vec![1u8; 100]))).0, 1);
        let mut v: Vec<u64> = Vec::with_capacity(1);
        let (grown, ()) = allocations_during(|| v.extend(std::hint::black_box(0..100u64)));
        assert_eq!(grown, 1, "a growth is a reallocation");
        let x = 0u64;
        assert_eq!(allocations_during(|| x + std::hint::black_box(1)), (0, 1));
        // Another thread's allocations are not this thread's: its counter starts at zero.
        let theirs = std::thread::spawn(|| ALLOCS.with(Cell::get)).join().unwrap();
        assert!(ALLOCS.with(Cell::get) > 2 && theirs <= 1, "a new thread counts only its own ({theirs})");
    }
}
