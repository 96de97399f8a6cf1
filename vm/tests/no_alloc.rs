//! The interpreter's steady state allocates nothing: a counting global allocator watches whole
//! invocations of straight-line, looping and recursive programs after a warm-up run.

use relaxvm::{
    registry::register_global, Arg, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Tensor, Value,
    VirtualMachine,
};
use relaxvm_test_alloc::{allocations_during, Counting};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn int_add(a: &Value, b: &Value) -> relaxvm::Result<Value> {
    Ok(Value::Int(a.as_int()? + b.as_int()?))
}

fn int_lt(a: &Value, b: &Value) -> relaxvm::Result<Value> {
    Ok(Value::Bool(a.as_int()? < b.as_int()?))
}

fn bytecode(name: &str, start: u32, end: u32, num_args: u32, regs: u32) -> FuncInfo {
    FuncInfo::bytecode(name, start, end, num_args, regs)
}

fn call(func: u32, args: Vec<Arg>, dst: u32) -> Instruction {
    Instruction::Call { func, args, dst: Some(dst) }
}

#[test]
fn steady_state_runs_allocate_nothing() {
    register_global(PackedFunc::from_fn("na.copy", |a| Ok(a[0].clone())), true).unwrap();
    register_global(PackedFunc::binary("na.add", int_add), true).unwrap();
    register_global(PackedFunc::binary("na.lt", int_lt), true).unwrap();
    use Arg::*;
    let mut instrs: Vec<Instruction> = (0..1000).map(|_| call(3, vec![Reg(0)], 1)).collect();
    instrs.push(Instruction::Ret { result: 1 });
    let copy_end = instrs.len() as u32;
    // sum(n): a loop of lt / if / add / add / goto.
    instrs.extend([
        call(4, vec![Imm(0), Imm(0)], 1),
        call(4, vec![Imm(0), Imm(0)], 2),
        call(5, vec![Reg(2), Reg(0)], 3),
        Instruction::If { cond: 3, false_offset: 4 },
        call(4, vec![Reg(1), Reg(2)], 1),
        call(4, vec![Reg(2), Imm(1)], 2),
        Instruction::Goto { offset: -4 },
        Instruction::Ret { result: 1 },
    ]);
    let sum_end = instrs.len() as u32;
    // down(n): n < 1 ? n : down(n + -1)   (recursion through frames)
    instrs.extend([
        call(5, vec![Reg(0), Imm(1)], 1),
        Instruction::If { cond: 1, false_offset: 2 },
        Instruction::Ret { result: 0 },
        call(4, vec![Reg(0), Imm(-1)], 2),
        call(2, vec![Reg(2)], 1),
        Instruction::Ret { result: 1 },
    ]);
    let end = instrs.len() as u32;
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            bytecode("copies", 0, copy_end, 1, 2),
            bytecode("sum", copy_end, sum_end, 1, 4),
            bytecode("down", sum_end, end, 1, 3),
            FuncInfo::packed("na.copy"),
            FuncInfo::packed("na.add"),
            FuncInfo::packed("na.lt"),
        ],
        instrs,
        ..Default::default()
    })
    .unwrap();
    let mut vm = VirtualMachine::new(Arc::new(exe)).unwrap();
    let t = Value::Tensor(Tensor::from_vec([4], vec![1.0f32; 4]).unwrap());
    let arg = [t];
    let n = [Value::Int(10_000)];
    let depth = [Value::Int(500)];
    vm.invoke("copies", &arg).unwrap();
    vm.invoke("sum", &n).unwrap();
    vm.invoke("down", &depth).unwrap();
    assert_eq!(allocations_during(|| drop(vm.invoke("copies", &arg).unwrap())).0, 0);
    assert_eq!(allocations_during(|| drop(vm.invoke("sum", &n).unwrap())).0, 0);
    assert_eq!(allocations_during(|| drop(vm.invoke("down", &depth).unwrap())).0, 0);
}
