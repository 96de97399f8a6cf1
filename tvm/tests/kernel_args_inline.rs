//! A kernel call with up to 24 arguments builds its argument lists on the stack: a counting
//! global allocator watches calls of every arity after a warm-up call (review R-perfmlp-2; TVM's
//! paged-attention kernels take about twenty arguments, called at every decode step).

mod common;

use common::{compile, kernels_source};
use relaxvm::{CallCtx, DataType, Device, NativeLibrary, Tensor, Value};
use relaxvm_tvm::ffi::Library;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    /// Allocations made by this thread: other threads (the test harness's) do not count.
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts calls (in a const-initialised
// thread-local, which never allocates itself).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (ALLOCS.with(Cell::get) - before, r)
}

/// The most arguments a kernel call keeps on the stack (`kernel.rs`'s `WIDE_ARGS`).
const INLINE: usize = 24;

#[test]
fn kernel_calls_of_up_to_24_arguments_allocate_nothing() {
    let lib = Library::open(&compile("kernels", &kernels_source())).unwrap();
    // `counter` takes any arguments and returns how often it ran.
    let f = lib.get_function("counter").unwrap();
    // Aligned, as the runtime allocates them (a misaligned one would be passed as a copy).
    let tensors: Vec<Tensor> =
        (0..INLINE).map(|_| Tensor::zeros([2], DataType::F32, Device::cpu(0)).unwrap()).collect();
    let mut ctx = CallCtx::detached();
    // The counter counts: a list built inside the window is seen.
    let (seen, _) = allocations_during(|| std::hint::black_box(vec![1u8; 3]));
    assert_eq!(seen, 1, "the counting allocator must see this thread's allocations");
    let mut expected = 0;
    for n in 0..=INLINE {
        // Tensors and ints, in turn: both kinds of argument, the direct arrays (up to 8) and
        // the wide ones (9 to 24).
        let args: Vec<Value> =
            (0..n).map(|i| if i % 2 == 0 { Value::Tensor(tensors[i].clone()) } else { Value::Int(i as i64) }).collect();
        // A warm-up call (the guard's handler is installed at the first kernel call).
        f.call(&mut ctx, &args).unwrap();
        let (allocs, got) = allocations_during(|| f.call(&mut ctx, &args).unwrap());
        expected += 2;
        assert!(matches!(got, Value::Int(c) if c == expected), "{n} arguments: {}", got.describe());
        assert_eq!(allocs, 0, "a kernel call with {n} arguments allocated {allocs} times");
    }
}
