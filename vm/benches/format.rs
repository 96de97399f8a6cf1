//! The binary format: bytes per instruction, mapping a 256 MiB constant, and saving and
//! loading a typical small program.

use criterion::{criterion_group, criterion_main, Criterion};
use relaxvm::format::{self, SaveOptions, VERSION_1, VERSION_2};
use relaxvm::{Arg, DataType, Device, Executable, ExecutableParts, FuncInfo, Instruction, Location, Tensor, Value};
use std::hint::black_box;

/// A small program like a compiler emits: a few hundred calls with a mix of argument kinds,
/// shape and tensor constants, and locations.
fn typical() -> Executable {
    let n = 300u32;
    let mut instrs = Vec::new();
    let mut locations = Vec::new();
    for i in 0..n {
        let r = i % 60;
        let args = match i % 4 {
            0 => vec![Arg::Reg(r)],
            1 => vec![Arg::Reg(r), Arg::Reg(r + 1)],
            2 => vec![Arg::VmState, Arg::Const(i % 3), Arg::Imm(i64::from(i))],
            _ => vec![Arg::Reg(r), Arg::Const(0), Arg::Void],
        };
        instrs.push(Instruction::Call { func: 1 + i % 3, args, dst: Some(r + 2) });
        locations.push(Some(Location::File { file: "model.py".into(), line: i / 4 + 1, col: 3 }));
    }
    instrs.push(Instruction::Ret { result: 2 });
    locations.push(None);
    let weights = Tensor::from_vec([64, 64], vec![0.5f32; 64 * 64]).unwrap();
    Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("main", 0, n + 1, 2, 64).with_param_names(["x", "w"]),
            FuncInfo::packed("vm.builtin.alloc_storage"),
            FuncInfo::packed("vm.builtin.alloc_tensor"),
            FuncInfo::packed("fused_matmul_add"),
        ],
        constants: vec![Value::Shape([1, 64].into()), Value::DType(DataType::F32), Value::Tensor(weights)],
        instrs,
        locations,
        entry: None,
        libraries: vec![],
    })
    .unwrap()
}

/// A function of `n` one-register calls with destinations.
fn calls(n: u32) -> Executable {
    let mut instrs: Vec<Instruction> =
        (0..n).map(|i| Instruction::Call { func: 1, args: vec![Arg::Reg(i % 100)], dst: Some(i % 100 + 1) }).collect();
    instrs.push(Instruction::Ret { result: 0 });
    Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, n + 1, 1, 128), FuncInfo::packed("vm.op.neg")],
        instrs,
        ..Default::default()
    })
    .unwrap()
}

fn instruction_bytes(bytes: &[u8]) -> u64 {
    let info = format::inspect(bytes).unwrap();
    let s = info.sections.iter().find(|s| s.name == Some("instructions")).unwrap();
    s.data.end - s.data.start
}

fn bytes_per_instruction(c: &mut Criterion) {
    let n = 10_000;
    let exe = calls(n);
    for version in [VERSION_1, VERSION_2] {
        let bytes = format::save_to_bytes(&exe, &SaveOptions { version, ..Default::default() });
        let per = instruction_bytes(&bytes) as f64 / f64::from(n + 1);
        println!("format v{version}: {per:.2} bytes per 1-register call with destination (TVM: 48)");
    }
    let exe = typical();
    let bytes = exe.save_to_bytes();
    println!(
        "typical program: {} instructions in {} bytes ({:.2} per instruction), file {} bytes",
        exe.instrs().len(),
        instruction_bytes(&bytes),
        instruction_bytes(&bytes) as f64 / exe.instrs().len() as f64,
        bytes.len()
    );
    let mut g = c.benchmark_group("format/instructions");
    let exe = calls(n);
    g.bench_function("encode 10k calls", |b| {
        b.iter(|| format::save_to_bytes(black_box(&exe), &SaveOptions::default()))
    });
    let bytes = exe.save_to_bytes();
    g.bench_function("decode 10k calls", |b| b.iter(|| format::load_bytes(black_box(&bytes)).unwrap()));
    g.finish();
}

fn small_program(c: &mut Criterion) {
    let exe = typical();
    let bytes = exe.save_to_bytes();
    let mut g = c.benchmark_group("format/typical");
    g.bench_function("save_to_bytes", |b| b.iter(|| black_box(&exe).save_to_bytes()));
    g.bench_function("load_bytes", |b| b.iter(|| format::load_bytes(black_box(&bytes)).unwrap()));
    let path = std::env::temp_dir().join(format!("relaxvm-bench-typical-{}.rvx", std::process::id()));
    exe.save(&path, &SaveOptions::default()).unwrap();
    g.bench_function("load_file", |b| b.iter(|| format::load_file(black_box(&path)).unwrap()));
    g.finish();
    std::fs::remove_file(&path).unwrap();
}

fn large_constant(c: &mut Criterion) {
    let path = std::env::temp_dir().join(format!("relaxvm-bench-256mib-{}.rvx", std::process::id()));
    {
        let big = Tensor::zeros([256 << 20], DataType::U8, Device::cpu(0)).unwrap();
        let mut exe = typical().to_parts();
        exe.constants.push(Value::Tensor(big));
        Executable::from_parts(exe).unwrap().save(&path, &SaveOptions::default()).unwrap();
    }
    let mut g = c.benchmark_group("format/256MiB constant");
    g.sample_size(20);
    g.bench_function("load_file", |b| b.iter(|| format::load_file(black_box(&path)).unwrap()));
    g.finish();
    std::fs::remove_file(&path).unwrap();
}

criterion_group!(benches, bytes_per_instruction, small_program, large_constant);
criterion_main!(benches);
