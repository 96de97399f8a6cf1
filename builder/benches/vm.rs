//! The interpreter benchmark suite (`cargo bench -p relaxvm-builder --bench vm`).
//!
//! Each group's throughput is counted in the unit its row of the README table reports: calls
//! per instruction for dispatch, loop iterations, shape-heap triples, closure invocations,
//! elements for tensor arithmetic. Criterion prints elements per second; the README converts to
//! nanoseconds.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::{Array2, ArrayD};
use relaxvm::{Arg, Executable, Tensor, Value, VirtualMachine};
use relaxvm_builder::ExecBuilder;
use std::hint::black_box;
use std::sync::Arc;

mod programs;

const STRAIGHT: u32 = 100_000;
const TRIPLES: u32 = 1_000;
const CLOSURE_CALLS: u32 = 1_000;

fn vm_of(build: impl FnOnce(&mut ExecBuilder)) -> VirtualMachine {
    relaxvm_builtins::ensure_registered();
    let mut ib = ExecBuilder::new();
    build(&mut ib);
    let exe: Executable = ib.get().expect("benchmark programs are valid").executable;
    VirtualMachine::new(Arc::new(exe)).expect("builtins are registered")
}

fn dispatch(c: &mut Criterion) {
    let mut vm = vm_of(|ib| {
        ib.function("main", 1, None).unwrap();
        for _ in 0..STRAIGHT {
            ib.emit_call("vm.builtin.copy", &[Arg::Reg(0)], Some(1)).unwrap();
        }
        ib.emit_ret(1).unwrap();
        ib.end_function().unwrap();
    });
    let x = [Value::Tensor(Tensor::from_vec([4], vec![1.0f32; 4]).unwrap())];
    let mut g = c.benchmark_group("dispatch");
    g.throughput(Throughput::Elements(u64::from(STRAIGHT)));
    g.bench_function("vm.builtin.copy", |b| b.iter(|| vm.invoke("main", black_box(&x)).unwrap()));
    g.finish();
}

/// `sum(n)`: 0 + 1 + ... + (n - 1), five instructions an iteration.
pub fn build_sum(ib: &mut ExecBuilder) {
    ib.function("sum", 1, None).unwrap();
    programs::emit_sum_body(ib);
    ib.end_function().unwrap();
}

fn counting_loop(c: &mut Criterion) {
    let mut vm = vm_of(build_sum);
    let n = 100_000i64;
    let mut g = c.benchmark_group("loop");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("sum", |b| b.iter(|| vm.invoke("sum", black_box(&[Value::Int(n)])).unwrap()));
    g.finish();
}

fn shape_heap(c: &mut Criterion) {
    use Arg::*;
    let mut vm = vm_of(|ib| {
        let ctx = ib.convert_constant(Value::str("bench")).unwrap();
        ib.function("main", 1, None).unwrap();
        ib.emit_call("vm.builtin.alloc_shape_heap", &[Imm(2)], Some(1)).unwrap();
        for _ in 0..TRIPLES {
            ib.emit_call("vm.builtin.shape_of", &[Reg(0)], Some(2)).unwrap();
            let store = [Reg(2), Reg(1), Imm(2), Imm(1), Imm(0), Imm(1), Imm(1), Const(ctx)];
            ib.emit_call("vm.builtin.match_shape", &store, None).unwrap();
            ib.emit_call("vm.builtin.make_shape", &[Reg(1), Imm(2), Imm(1), Imm(0), Imm(1), Imm(1)], Some(3)).unwrap();
        }
        ib.emit_ret(3).unwrap();
        ib.end_function().unwrap();
    });
    let x = [Value::Tensor(Tensor::zeros([32, 16], relaxvm::DataType::F32, Default::default()).unwrap())];
    let mut g = c.benchmark_group("shape_heap");
    g.throughput(Throughput::Elements(u64::from(TRIPLES)));
    g.bench_function("shape_of+match_shape+make_shape", |b| b.iter(|| vm.invoke("main", black_box(&x)).unwrap()));
    g.finish();
}

/// `fib(n)`, recursive, with the int builtins.
pub fn build_fib(ib: &mut ExecBuilder) {
    use Arg::*;
    ib.function("fib", 1, None).unwrap();
    ib.emit_call("vm.builtin.int.lt", &[Reg(0), Imm(2)], Some(1)).unwrap();
    ib.emit_if(1, 2).unwrap();
    ib.emit_ret(0).unwrap();
    ib.emit_call("vm.builtin.int.sub", &[Reg(0), Imm(1)], Some(2)).unwrap();
    ib.emit_call("fib", &[Reg(2)], Some(3)).unwrap();
    ib.emit_call("vm.builtin.int.sub", &[Reg(0), Imm(2)], Some(4)).unwrap();
    ib.emit_call("fib", &[Reg(4)], Some(5)).unwrap();
    ib.emit_call("vm.builtin.int.add", &[Reg(3), Reg(5)], Some(6)).unwrap();
    ib.emit_ret(6).unwrap();
    ib.end_function().unwrap();
}

fn calls(c: &mut Criterion) {
    let mut vm = vm_of(build_fib);
    let mut g = c.benchmark_group("calls");
    // fib(25) makes 242,785 calls.
    g.throughput(Throughput::Elements(242_785));
    g.bench_function("fib(25)", |b| b.iter(|| vm.invoke("fib", black_box(&[Value::Int(25)])).unwrap()));
    g.finish();
}

fn closures(c: &mut Criterion) {
    use Arg::*;
    let mut vm = vm_of(|ib| {
        ib.function("add", 2, None).unwrap();
        ib.emit_call("vm.builtin.int.add", &[Reg(0), Reg(1)], Some(2)).unwrap();
        ib.emit_ret(2).unwrap();
        ib.end_function().unwrap();
        let add = ib.func_ref("add");
        ib.function("main", 1, None).unwrap();
        ib.emit_call("vm.builtin.make_closure", &[Func(add), Imm(1)], Some(1)).unwrap();
        for _ in 0..CLOSURE_CALLS {
            ib.emit_call("vm.builtin.invoke_closure", &[VmState, Reg(1), Reg(0)], Some(2)).unwrap();
        }
        ib.emit_ret(2).unwrap();
        ib.end_function().unwrap();
    });
    let mut g = c.benchmark_group("closures");
    g.throughput(Throughput::Elements(u64::from(CLOSURE_CALLS)));
    g.bench_function("invoke_closure", |b| b.iter(|| vm.invoke("main", black_box(&[Value::Int(3)])).unwrap()));
    g.finish();
}

fn binary_op_vm(op: &str) -> VirtualMachine {
    let op = op.to_string();
    vm_of(move |ib| {
        ib.function("main", 2, None).unwrap();
        ib.emit_call(&op, &[Arg::Reg(0), Arg::Reg(1)], Some(2)).unwrap();
        ib.emit_ret(2).unwrap();
        ib.end_function().unwrap();
    })
}

fn elementwise(c: &mut Criterion) {
    const N: usize = 1 << 20;
    let a: ArrayD<f32> = ArrayD::from_shape_fn(vec![N], |i| i[0] as f32);
    let b: ArrayD<f32> = ArrayD::from_shape_fn(vec![N], |i| 1.0 + i[0] as f32);
    let args = [Value::Tensor(Tensor::from_array(a.clone())), Value::Tensor(Tensor::from_array(b.clone()))];
    let mut vm = binary_op_vm("vm.op.add");
    let mut g = c.benchmark_group("elementwise_add_1M_f32");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("relaxvm", "vm.op.add"), |bch| {
        bch.iter(|| vm.invoke("main", black_box(&args)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "&a + &b"), |bch| bch.iter(|| black_box(&a) + black_box(&b)));
    g.finish();
}

fn matmul(c: &mut Criterion) {
    const N: usize = 512;
    let a = Array2::<f32>::from_shape_fn((N, N), |(i, j)| ((i * 7 + j) % 13) as f32);
    let args =
        [Value::Tensor(Tensor::from_array(a.clone().into_dyn())), Value::Tensor(Tensor::from_array(a.into_dyn()))];
    let mut vm = binary_op_vm("vm.op.matmul");
    let mut g = c.benchmark_group("matmul_512_f32");
    g.sample_size(20);
    g.bench_function("vm.op.matmul", |b| b.iter(|| vm.invoke("main", black_box(&args)).unwrap()));
    g.finish();
}

criterion_group!(benches, dispatch, counting_loop, shape_heap, calls, closures, elementwise, matmul);
criterion_main!(benches);
