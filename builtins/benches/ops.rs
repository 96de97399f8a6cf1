//! The builtins' hot paths: elementwise ops on 1M float32 elements (the numpy comparison),
//! reductions, matmul, and the scalar builtins in a counting loop run by the VM.
//!
//! Large ops run on the process's thread pool (`RELAXVM_NUM_THREADS`, default: every core);
//! the "1 thread" variants run the same call inside a pool task, where launches run inline.

use criterion::{criterion_group, criterion_main, Criterion};
use relaxvm::{
    Arg, CallCtx, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Registry, Tensor, Value,
    VirtualMachine,
};
use std::hint::black_box;
use std::sync::Arc;

fn builtin(name: &str) -> PackedFunc {
    let mut reg = Registry::new();
    relaxvm_builtins::register_all(&mut reg).unwrap();
    reg.get(name).unwrap().clone()
}

fn f32s(dims: &[i64], seed: f32) -> Value {
    let n: i64 = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i as f32 * 0.001 + seed).sin()).collect();
    Value::Tensor(Tensor::from_vec(dims.to_vec(), data).unwrap())
}

/// `f()` on the calling thread alone: inside a pool task, the builtin's launches run inline.
fn one_thread<R: Send>(f: impl Fn() -> R + Sync) -> R {
    let out = std::sync::Mutex::new(None);
    let _ = relaxvm::pool::global().run(1, &|_| {
        *out.lock().unwrap() = Some(f());
        Ok::<(), ()>(())
    });
    out.into_inner().unwrap().unwrap()
}

fn elementwise(c: &mut Criterion) {
    let mut g = c.benchmark_group("elementwise");
    let add = builtin("vm.op.add");
    let (a, b) = (f32s(&[1_000_000], 0.0), f32s(&[1_000_000], 1.0));
    let ctx = &mut CallCtx::detached();
    g.bench_function("add 1M f32 + 1M f32", |bn| {
        bn.iter(|| add.call(ctx, black_box(&[a.clone(), b.clone()])).unwrap())
    });
    g.bench_function("add 1M f32 + 1M f32, 1 thread", |bn| {
        bn.iter(|| one_thread(|| add.call(&mut CallCtx::detached(), black_box(&[a.clone(), b.clone()])).unwrap()))
    });
    g.bench_function("add 1M f32 + scalar", |bn| {
        bn.iter(|| add.call(ctx, black_box(&[a.clone(), Value::Float(1.0)])).unwrap())
    });
    let (m, row) = (f32s(&[1000, 1000], 0.0), f32s(&[1000], 1.0));
    g.bench_function("add 1000x1000 + 1000 (broadcast)", |bn| {
        bn.iter(|| add.call(ctx, black_box(&[m.clone(), row.clone()])).unwrap())
    });
    let exp = builtin("vm.op.exp");
    g.bench_function("exp 1M f32", |bn| bn.iter(|| exp.call(ctx, black_box(std::slice::from_ref(&a))).unwrap()));
    g.finish();
}

fn reduce_and_matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("reduce_matmul");
    let ctx = &mut CallCtx::detached();
    let sum = builtin("vm.op.sum");
    let a = f32s(&[1_000_000], 0.0);
    g.bench_function("sum 1M f32", |bn| bn.iter(|| sum.call(ctx, black_box(std::slice::from_ref(&a))).unwrap()));
    let m = f32s(&[1000, 1000], 0.0);
    g.bench_function("sum 1M f32, 1 thread", |bn| {
        bn.iter(|| one_thread(|| sum.call(&mut CallCtx::detached(), black_box(std::slice::from_ref(&a))).unwrap()))
    });
    g.bench_function("sum 1000x1000 axis 0", |bn| {
        bn.iter(|| sum.call(ctx, black_box(&[m.clone(), Value::Int(0)])).unwrap())
    });
    let matmul = builtin("vm.op.matmul");
    let x = f32s(&[256, 256], 0.0);
    g.bench_function("matmul 256x256 f32", |bn| {
        bn.iter(|| matmul.call(ctx, black_box(&[x.clone(), x.clone()])).unwrap())
    });
    let big = f32s(&[1024, 1024], 0.5);
    g.sample_size(20);
    g.bench_function("matmul 1024x1024 f32", |bn| {
        bn.iter(|| matmul.call(ctx, black_box(&[big.clone(), big.clone()])).unwrap())
    });
    g.bench_function("matmul 1024x1024 f32, 1 thread", |bn| {
        bn.iter(|| {
            one_thread(|| matmul.call(&mut CallCtx::detached(), black_box(&[big.clone(), big.clone()])).unwrap())
        })
    });
    g.finish();
}

fn scalar_loop(c: &mut Criterion) {
    use Arg::*;
    let mut reg = Registry::new();
    relaxvm_builtins::register_all(&mut reg).unwrap();
    let call = |func, args, dst| Instruction::Call { func, args, dst };
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("count", 0, 7, 1, 3),
            FuncInfo::packed("vm.builtin.int.lt"),
            FuncInfo::packed("vm.builtin.int.add"),
        ],
        instrs: vec![
            call(2, vec![Imm(0), Imm(0)], Some(1)),
            call(1, vec![Reg(1), Reg(0)], Some(2)),
            Instruction::If { cond: 2, false_offset: 3 },
            call(2, vec![Reg(1), Imm(1)], Some(1)),
            Instruction::Goto { offset: -3 },
            Instruction::Ret { result: 1 },
            Instruction::Ret { result: 1 },
        ],
        ..Default::default()
    })
    .unwrap();
    let mut vm = VirtualMachine::with_overrides(Arc::new(exe), &reg).unwrap();
    let mut g = c.benchmark_group("scalar");
    g.bench_function("count to 100k (int.lt, int.add)", |bn| {
        bn.iter(|| vm.invoke("count", black_box(&[Value::Int(100_000)])).unwrap())
    });
    let add = builtin("vm.builtin.int.add");
    let direct = add.as_binary().unwrap();
    g.bench_function("int.add direct", |bn| {
        bn.iter(|| direct(black_box(&Value::Int(2)), black_box(&Value::Int(3))).unwrap())
    });
    g.finish();
}

criterion_group!(benches, elementwise, reduce_and_matmul, scalar_loop);
criterion_main!(benches);
