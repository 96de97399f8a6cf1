//! Instruction-count probe for the interpreter rows of the bench (scripts/bench_programs.py): the
//! shape-heap triple program (1000 triples), with `copy` 1000 calls of `vm.builtin.copy`, or with
//! `sum` the counting loop (1000 iterations), or with `fib` the recursive `fib(15)` (1973 calls
//! of `fib`), invoked REPS times, plainly or (with a third argument) under
//! `VirtualMachine::profile`.
//!
//! Per-unit counts are the difference of two runs, which cancels the setup (building, verifying
//! and decoding the program):
//!
//! ```text
//! cargo build --release -p relaxvm-builder --example instr_count
//! valgrind --tool=callgrind target/release/examples/instr_count 20 shape
//! valgrind --tool=callgrind target/release/examples/instr_count 120 shape
//! ```
//!
//! then (`Ir` of the second - `Ir` of the first) / 100,000 (100 more invocations of 1000 units).
//! What a unit is: `shape`, a whole triple (`shape_of` + `match_shape` + `make_shape`: the
//! loop's dispatch and call setup and the three builtins); `copy`, one call (dispatch only: the
//! call is decoded as a register move); `sum`, one iteration of the loop (its three ops); `fib`,
//! the invocation (divide by 1973 for one call of `fib`); `copy p`, one profiled call (the plain call, the instrument hook and the profiler's
//! recording). The share of the interpreter loop alone is the difference of the `run_loop`
//! function's own (exclusive) count in `callgrind_annotate --inclusive=no` of the two runs,
//! divided the same way (for `shape`, the loop's part of the triple, about a third).
use relaxvm::{Arg, Executable, Tensor, Value, VirtualMachine};
use relaxvm_builder::ExecBuilder;
use std::hint::black_box;
use std::sync::Arc;

#[path = "../benches/programs/mod.rs"]
mod programs;

fn main() {
    use Arg::*;
    let reps: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(100);
    let which = std::env::args().nth(2).unwrap_or_else(|| "shape".into());
    relaxvm_builtins::ensure_registered();
    let mut ib = ExecBuilder::new();
    let ctx = ib.convert_constant(Value::str("bench")).unwrap();
    ib.function("main", 1, None).unwrap();
    if which == "shape" {
        ib.emit_call("vm.builtin.alloc_shape_heap", &[Imm(2)], Some(1)).unwrap();
        for _ in 0..1000 {
            ib.emit_call("vm.builtin.shape_of", &[Reg(0)], Some(2)).unwrap();
            let store = [Reg(2), Reg(1), Imm(2), Imm(1), Imm(0), Imm(1), Imm(1), Const(ctx)];
            ib.emit_call("vm.builtin.match_shape", &store, None).unwrap();
            ib.emit_call("vm.builtin.make_shape", &[Reg(1), Imm(2), Imm(1), Imm(0), Imm(1), Imm(1)], Some(3)).unwrap();
        }
        ib.emit_ret(3).unwrap();
    } else if which == "sum" {
        programs::emit_sum_body(&mut ib);
    } else if which == "fib" {
        // `emit_fib` of scripts/bench_programs.py, recursing into `main` itself.
        ib.emit_call("vm.builtin.int.lt", &[Reg(0), Imm(2)], Some(1)).unwrap();
        ib.emit_if(1, 2).unwrap();
        ib.emit_ret(0).unwrap();
        ib.emit_call("vm.builtin.int.sub", &[Reg(0), Imm(1)], Some(2)).unwrap();
        ib.emit_call("main", &[Reg(2)], Some(3)).unwrap();
        ib.emit_call("vm.builtin.int.sub", &[Reg(0), Imm(2)], Some(4)).unwrap();
        ib.emit_call("main", &[Reg(4)], Some(5)).unwrap();
        ib.emit_call("vm.builtin.int.add", &[Reg(3), Reg(5)], Some(6)).unwrap();
        ib.emit_ret(6).unwrap();
    } else {
        for _ in 0..1000 {
            ib.emit_call("vm.builtin.copy", &[Reg(0)], Some(1)).unwrap();
        }
        ib.emit_ret(1).unwrap();
    }
    ib.end_function().unwrap();
    let exe: Executable = ib.get().unwrap().executable;
    let mut vm = VirtualMachine::new(Arc::new(exe)).unwrap();
    let x = if which == "sum" {
        [Value::Int(1000)]
    } else if which == "fib" {
        // fib(15): 1973 calls of `fib` an invocation.
        [Value::Int(15)]
    } else {
        [Value::Tensor(Tensor::zeros([32, 16], relaxvm::DataType::F32, Default::default()).unwrap())]
    };
    let profile = std::env::args().nth(3).is_some();
    vm.set_profiling_enabled(profile);
    for _ in 0..reps {
        if profile {
            black_box(vm.profile("main", black_box(&x)).unwrap());
        } else {
            black_box(vm.invoke("main", black_box(&x)).unwrap());
        }
    }
}
