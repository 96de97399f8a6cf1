//! Built programs run on the VM with the builtins: the design document's examples, a loop,
//! recursion, and the same programs after a trip through the text form.

use crate::common::{build, func};
use relaxvm::{Arg::*, DataType, Executable, Tensor, Value, VirtualMachine};
use relaxvm_builder::{assemble, ExecBuilder};
use std::sync::Arc;

fn vm(exe: Executable) -> VirtualMachine {
    relaxvm_builtins::ensure_registered();
    let text = exe.as_text();
    // run the assembled copy: it must behave the same as the built one
    VirtualMachine::new(Arc::new(assemble(&text).unwrap())).unwrap()
}

#[test]
fn shape_heap_example_returns_32_16() {
    let mut ib = ExecBuilder::new();
    let x = ib
        .convert_constant(Value::Tensor(Tensor::zeros([32, 16], DataType::F32, Default::default()).unwrap()))
        .unwrap();
    func(&mut ib, "main", 0, |ib| {
        ib.emit_call("vm.builtin.alloc_shape_heap", &[Imm(2)], Some(0))?;
        ib.emit_call("vm.builtin.shape_of", &[Const(x)], Some(1))?;
        ib.emit_call("vm.builtin.store_shape", &[Reg(1), Reg(0), Imm(0), Imm(1)], None)?;
        ib.emit_call("vm.builtin.load_shape", &[Reg(0), Imm(0), Imm(1)], Some(2))?;
        ib.emit_ret(2)
    })
    .unwrap();
    let out = vm(build(&mut ib)).invoke("main", &[]).unwrap();
    assert_eq!(out.as_shape().unwrap().dims(), &[32, 16]);
}

#[test]
fn two_functions_add_and_mul() {
    let mut ib = ExecBuilder::new();
    for (name, op) in [("func0", "vm.op.add"), ("func1", "vm.op.mul")] {
        func(&mut ib, name, 2, |ib| {
            ib.emit_call(op, &[Reg(0), Reg(1)], Some(2))?;
            ib.emit_ret(2)
        })
        .unwrap();
    }
    let mut m = vm(build(&mut ib));
    let a = Value::Tensor(Tensor::from_vec([3], vec![1.0f64, 2.0, 3.0]).unwrap());
    let b = Value::Tensor(Tensor::from_vec([3], vec![4.0f64, 5.0, 6.0]).unwrap());
    let mul = m.invoke("func1", &[a.clone(), b.clone()]).unwrap();
    let add = m.invoke("func0", &[a, b]).unwrap();
    assert_eq!(mul.as_tensor().unwrap().to_vec::<f64>().unwrap(), vec![4.0, 10.0, 18.0]);
    assert_eq!(add.as_tensor().unwrap().to_vec::<f64>().unwrap(), vec![5.0, 7.0, 9.0]);
}

#[test]
fn loops_and_recursion_with_scalar_builtins() {
    let mut ib = ExecBuilder::new();
    // sum(n) = 0 + 1 + ... + (n-1), written with sparse register numbers
    func(&mut ib, "sum", 1, |ib| {
        ib.emit_call("vm.builtin.int.add", &[Imm(0), Imm(0)], Some(10))?;
        ib.emit_call("vm.builtin.int.add", &[Imm(0), Imm(0)], Some(20))?;
        ib.emit_call("vm.builtin.int.lt", &[Reg(20), Reg(0)], Some(30))?;
        ib.emit_if(30, 4)?;
        ib.emit_call("vm.builtin.int.add", &[Reg(10), Reg(20)], Some(10))?;
        ib.emit_call("vm.builtin.int.add", &[Reg(20), Imm(1)], Some(20))?;
        ib.emit_goto(-4)?;
        ib.emit_ret(10)
    })
    .unwrap();
    // fib(n) = n < 2 ? n : fib(n-1) + fib(n-2)
    func(&mut ib, "fib", 1, |ib| {
        ib.emit_call("vm.builtin.int.lt", &[Reg(0), Imm(2)], Some(1))?;
        ib.emit_if(1, 2)?;
        ib.emit_ret(0)?;
        ib.emit_call("vm.builtin.int.sub", &[Reg(0), Imm(1)], Some(2))?;
        ib.emit_call("fib", &[Reg(2)], Some(3))?;
        ib.emit_call("vm.builtin.int.sub", &[Reg(0), Imm(2)], Some(2))?;
        ib.emit_call("fib", &[Reg(2)], Some(4))?;
        ib.emit_call("vm.builtin.int.add", &[Reg(3), Reg(4)], Some(1))?;
        ib.emit_ret(1)
    })
    .unwrap();
    let exe = build(&mut ib);
    assert_eq!(exe.func("sum").unwrap().register_file_size, 4);
    let mut m = vm(exe);
    assert_eq!(m.invoke("sum", &[Value::Int(10)]).unwrap().as_int().unwrap(), 45);
    assert_eq!(m.invoke("fib", &[Value::Int(15)]).unwrap().as_int().unwrap(), 610);
}
