//! Runs generated programs that pass the verifier, with random arguments, under a step budget
//! and a call-depth limit: any result or error is fine; a panic, an abort, a hang or a builtin
//! that panicked (`ErrorKind::Panic`) is a failure.
//!
//! The generator lives in `builtins/tests/support/gen_program.rs`, which
//! `builtins/tests/reliability_interp_replay.rs` shares to replay `corpus/interp/`.
//!
//! The step budget bounds time, not memory: in 10,000 steps a program may legitimately build
//! gigabytes (closures capturing closures grow quadratically). So this target counts live heap
//! bytes and interrupts the running program, through its `InterruptHandle`, above
//! [`HEAP_LIMIT`]: the run ends in an `Interrupted` error instead of exhausting the machine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaxvm::InterruptHandle;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

#[path = "../../builtins/tests/support/gen_program.rs"]
#[allow(dead_code)]
mod gen_program;

/// Live heap bytes above which the running program is interrupted.
const HEAP_LIMIT: usize = 1 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static RUNNING: Mutex<Option<InterruptHandle>> = Mutex::new(None);

/// The system allocator, counting live bytes.
struct Counting;

impl Counting {
    fn grew(&self, n: usize) {
        if LIVE.fetch_add(n, Ordering::Relaxed) + n > HEAP_LIMIT {
            // `try_lock`: the harness may hold the lock while it allocates; never wait on it.
            if let Ok(running) = RUNNING.try_lock() {
                if let Some(handle) = running.as_ref() {
                    handle.interrupt();
                }
            }
        }
    }
}

// SAFETY: every call forwards to the system allocator with the same arguments; the counting
// around it neither allocates nor touches the memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            self.grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fuzz_target!(|data: &[u8]| {
    gen_program::run_with(data, |vm| *RUNNING.lock().unwrap() = Some(vm.interrupt_handle()));
    *RUNNING.lock().unwrap() = None;
});
