//! A decode step after a decode step allocates nothing in the paged KV cache (docs/llm.md;
//! review R-decode-2): a counting global allocator watches the cache's part of a step —
//! `begin_forward`, the attention of every layer (kernel stand-ins that allocate nothing) and
//! `end_forward` — at batch 1 and batch 4, after warm-up steps.
//!
//! The allocator (`relaxvm_test_alloc`, shared by the no-allocation tests) counts per thread
//! (each test runs on its own thread) and forwards to the system allocator, so the other tests
//! of this binary run as before.

use crate::common::{registry, shape};
use crate::kv_errors::{create, create_args, i, zeros};
use relaxvm::{CallCtx, PackedFunc, Value};
use relaxvm_test_alloc::{allocations_during, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A decode step's calls, their arguments made beforehand (as a VM's registers hold them).
struct Step {
    begin: (&'static PackedFunc, Vec<Value>),
    attention: Vec<(&'static PackedFunc, Vec<Value>)>,
    end: (&'static PackedFunc, Vec<Value>),
}

impl Step {
    fn new(c: &Value, ids: &[i64]) -> Step {
        let f = |name: &str| registry().get(name).unwrap_or_else(|| panic!("{name} is not registered"));
        let rows = ids.len() as i64;
        // create_args: 2 layers, 4 query heads, 2 KV heads, head dim 8, float32.
        let attention = (0..2)
            .map(|layer| {
                let args = vec![c.clone(), i(layer), Value::Float(0.5), zeros(&[rows, 8, 8]), zeros(&[rows, 4, 8])];
                (f("vm.builtin.attention_kv_cache_attention_with_fused_qkv"), args)
            })
            .collect();
        Step {
            begin: (f("vm.builtin.kv_state_begin_forward"), vec![c.clone(), shape(ids), shape(&vec![1; ids.len()])]),
            attention,
            end: (f("vm.builtin.kv_state_end_forward"), vec![c.clone()]),
        }
    }

    fn run(&self) {
        let mut ctx = CallCtx::detached();
        let calls = std::iter::once(&self.begin).chain(&self.attention).chain(std::iter::once(&self.end));
        for (f, args) in calls {
            if let Err(e) = f.call(&mut ctx, args) {
                panic!("{}: {e}", f.name());
            }
        }
    }
}

fn decode_steps_allocate_nothing(batch: i64) {
    let c = create(&create_args(&[4, 256, 16, 16, 0]));
    let add = registry().get("vm.builtin.kv_state_add_sequence").unwrap();
    let ids: Vec<i64> = (0..batch).collect();
    for &id in &ids {
        add.call(&mut CallCtx::detached(), &[c.clone(), i(id)]).unwrap();
    }
    // A prefill, then decode steps: the first decode step packs its arrays (a new layout), the
    // second refills them and brings every buffer to its size; the steps after must not allocate.
    let prefill = || {
        let begin = registry().get("vm.builtin.kv_state_begin_forward").unwrap();
        begin.call(&mut CallCtx::detached(), &[c.clone(), shape(&ids), shape(&vec![3; ids.len()])]).unwrap();
        let end = registry().get("vm.builtin.kv_state_end_forward").unwrap();
        end.call(&mut CallCtx::detached(), std::slice::from_ref(&c)).unwrap();
    };
    prefill();
    let step = Step::new(&c, &ids);
    step.run();
    step.run();
    for n in 0..4 {
        let (allocs, ()) = allocations_during(|| step.run());
        assert_eq!(allocs, 0, "batch {batch}: decode step {n} after warm-up allocated {allocs} times");
    }
    // The counter sees the cache's allocations: a prefill step (another layout) packs new arrays.
    assert!(allocations_during(prefill).0 > 0, "a step of a new layout allocates its arrays");
}

#[test]
fn a_decode_step_after_a_decode_step_allocates_nothing_at_batch_1() {
    decode_steps_allocate_nothing(1);
}

#[test]
fn a_decode_step_after_a_decode_step_allocates_nothing_at_batch_4() {
    decode_steps_allocate_nothing(4);
}
