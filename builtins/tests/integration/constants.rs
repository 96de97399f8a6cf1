//! Constants are immutable: every builtin that writes through an argument refuses a constant
//! destination, so one VM (or thread) can never change what another reads.

use crate::common::{registry, tensor};
use relaxvm::{Arg, DataType, Executable, ExecutableParts, FuncInfo, Instruction, Value, VirtualMachine};
use std::sync::Arc;
use Arg::*;

/// `main(x)` runs `callee(args...)`, with the constants given, and returns register 1.
fn program(callee: &str, args: Vec<Arg>, constants: Vec<Value>) -> Arc<Executable> {
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 2, 1, 2), FuncInfo::packed(callee)],
        instrs: vec![Instruction::Call { func: 1, args, dst: Some(1) }, Instruction::Ret { result: 1 }],
        constants,
        ..Default::default()
    })
    .unwrap();
    Arc::new(exe)
}

fn run(exe: &Arc<Executable>, x: Value) -> relaxvm::Result<Value> {
    VirtualMachine::with_overrides(exe.clone(), registry()).unwrap().invoke("main", &[x])
}

fn heap_values(exe: &Executable) -> Vec<i64> {
    exe.constants()[0].as_tensor().unwrap().to_vec::<i64>().unwrap()
}

#[test]
fn store_shape_into_a_constant_heap_is_an_error_and_the_constant_is_unchanged() {
    relaxvm_builtins::ensure_registered();
    let exe = program(
        "vm.builtin.store_shape",
        vec![Const(1), Const(0), Imm(0), Imm(1)],
        vec![tensor(&[2], vec![0i64, 0]), Value::Shape([7, 9].into())],
    );
    let e = run(&exe, Value::Null).unwrap_err().to_string();
    assert!(e.contains("read-only") && e.contains("vm.builtin.store_shape"), "{e}");
    assert_eq!(heap_values(&exe), [0, 0]);
}

#[test]
fn two_threads_sharing_an_executable_never_see_each_others_writes() {
    // The attack: both threads store their own shape into the shared constant heap, then read
    // it back. With writable constants a thread reads the other's shape now and then.
    relaxvm_builtins::ensure_registered();
    let exe = program("vm.builtin.store_shape", vec![Reg(0), Const(0), Imm(0)], vec![tensor(&[1], vec![0i64])]);
    std::thread::scope(|s| {
        for n in [3i64, 5] {
            let exe = exe.clone();
            s.spawn(move || {
                for _ in 0..2000 {
                    assert!(format!("{:?}", run(&exe, Value::Shape([n].into())).expect_err("an error"))
                        .starts_with(r#"At {"#));
                }
            });
        }
    });
    assert_eq!(heap_values(&exe), [0]);
}

#[test]
fn a_sort_into_a_constant_output_is_an_error() {
    relaxvm_builtins::ensure_registered();
    let exe =
        program("tvm.contrib.sort.sort", vec![Reg(0), Const(0), Imm(0), Imm(1)], vec![tensor(&[3], vec![0.0f32; 3])]);
    let e = run(&exe, tensor(&[3], vec![3.0f32, 1.0, 2.0])).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    assert_eq!(exe.constants()[0].as_tensor().unwrap().to_vec::<f32>().unwrap(), [0.0; 3]);
}

#[test]
fn a_tensor_made_over_a_constant_storage_is_read_only_too() {
    // alloc_tensor views a storage constant; the view shares the constant's (frozen) block, so
    // store_shape through it fails as well.
    relaxvm_builtins::ensure_registered();
    let storage = relaxvm::Storage::alloc(16, relaxvm::Device::cpu(0)).unwrap();
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("main", 0, 3, 1, 3),
            FuncInfo::packed("vm.builtin.alloc_tensor"),
            FuncInfo::packed("vm.builtin.store_shape"),
        ],
        instrs: vec![
            Instruction::Call { func: 1, args: vec![Const(0), Imm(0), Const(1), Const(2)], dst: Some(1) },
            Instruction::Call { func: 2, args: vec![Reg(0), Reg(1), Imm(0)], dst: Some(2) },
            Instruction::Ret { result: 2 },
        ],
        constants: vec![Value::Storage(storage.clone()), Value::Shape([2].into()), Value::DType(DataType::I64)],
        ..Default::default()
    })
    .unwrap();
    let e = run(&Arc::new(exe), Value::Shape([4].into())).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    assert!(storage.bytes().iter().all(|b| *b == 0));
}
