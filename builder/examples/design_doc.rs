//! The Relax VM design document's examples, built with `ExecBuilder` and run:
//!
//! ```sh
//! cargo run -p relaxvm-builder --example design_doc
//! ```
//!
//! 1. the ExecBuilder example, with `test.vm.move`, `vm.add` and `vm.mul` registered in Rust;
//! 2. the text-format example (`func0`), on the builtins `vm.op.add`, `vm.builtin.move`,
//!    `vm.builtin.print`;
//! 3. the shape-heap example, which returns the shape (32, 16);
//! 4. the two-function example, `func0` adding and `func1` multiplying two tensors.

use relaxvm::registry::register_global;
use relaxvm::{Arg, Executable, PackedFunc, Result, Tensor, Value, VirtualMachine};
use relaxvm_builder::ExecBuilder;
use std::error::Error;
use std::sync::Arc;

type AnyResult<T> = std::result::Result<T, Box<dyn Error>>;

fn f32s(t: &Tensor) -> Result<Vec<f32>> {
    t.to_vec::<f32>()
}

/// `test.vm.move`, `vm.add` and `vm.mul` as typed Rust closures.
fn register_test_functions() -> Result<()> {
    register_global(PackedFunc::typed("test.vm.move", |src: Value| src), true)?;
    register_global(
        PackedFunc::typed("vm.add", |a: Tensor, b: i64| -> Result<Tensor> {
            Tensor::from_vec(a.shape().clone(), f32s(&a)?.iter().map(|x| x + b as f32).collect())
        }),
        true,
    )?;
    register_global(
        PackedFunc::typed("vm.mul", |a: Tensor, b: Tensor| -> Result<Tensor> {
            let product = f32s(&a)?.iter().zip(f32s(&b)?).map(|(x, y)| x * y).collect();
            Tensor::from_vec(a.shape().clone(), product)
        }),
        true,
    )
}

fn show(title: &str, exe: &Executable, warnings: &[String]) {
    println!("==== {title}\n{}{}", exe.stats(), exe.as_text());
    for w in warnings {
        println!("warning: {w}");
    }
}

fn builder_example() -> AnyResult<()> {
    let mut ib = ExecBuilder::new();
    let c0 = ib.convert_constant(Value::Tensor(Tensor::from_vec([4], vec![1.0f32, 2.0, 3.0, 4.0])?))?;
    ib.function("main", 1, None)?;
    ib.emit_call("test.vm.move", &[Arg::Const(c0)], Some(1))?;
    ib.emit_call("vm.add", &[Arg::Reg(0), Arg::Imm(10)], Some(2))?;
    ib.emit_call("vm.mul", &[Arg::Reg(2), Arg::Reg(1)], Some(3))?;
    ib.emit_ret(3)?;
    ib.end_function()?;
    let out = ib.get()?;
    show("the ExecBuilder example", &out.executable, &out.warnings);
    let mut vm = VirtualMachine::new(Arc::new(out.executable))?;
    let x = Value::Tensor(Tensor::from_vec([4], vec![0.5f32, 1.0, 1.5, 2.0])?);
    let y = vm.invoke("main", &[x])?;
    println!("main([0.5, 1, 1.5, 2]) = {y}\n");
    assert_eq!(f32s(y.as_tensor()?)?, vec![10.5, 22.0, 34.5, 48.0]);
    Ok(())
}

fn text_format_example() -> AnyResult<()> {
    let mut ib = ExecBuilder::new();
    ib.function("func0", 2, None)?;
    ib.emit_call("vm.op.add", &[Arg::Reg(0), Arg::Reg(1)], Some(2))?;
    ib.emit_call("vm.builtin.move", &[Arg::Reg(2)], Some(3))?;
    ib.emit_call("vm.builtin.print", &[Arg::Reg(3)], None)?;
    ib.emit_ret(3)?;
    ib.end_function()?;
    let out = ib.get()?;
    show("the text-format example", &out.executable, &out.warnings);
    let mut vm = VirtualMachine::new(Arc::new(out.executable))?;
    print!("func0(2, 3) prints: ");
    let y = vm.invoke("func0", &[Value::Int(2), Value::Int(3)])?;
    println!("and returns {y}\n");
    Ok(())
}

fn shape_heap_example() -> AnyResult<()> {
    let x = Tensor::zeros([32, 16], relaxvm::DataType::F32, Default::default())?;
    let mut ib = ExecBuilder::new();
    let cx = ib.convert_constant(Value::Tensor(x))?;
    ib.function("main", 0, None)?;
    // a shape heap of size 2 in r(0)
    ib.emit_call("vm.builtin.alloc_shape_heap", &[Arg::Imm(2)], Some(0))?;
    // the shape of x in r(1)
    ib.emit_call("vm.builtin.shape_of", &[Arg::Const(cx)], Some(1))?;
    // shape_heap[0] = 32, shape_heap[1] = 16
    ib.emit_call("vm.builtin.store_shape", &[Arg::Reg(1), Arg::Reg(0), Arg::Imm(0), Arg::Imm(1)], None)?;
    // a shape from shape_heap[0] and shape_heap[1]
    ib.emit_call("vm.builtin.load_shape", &[Arg::Reg(0), Arg::Imm(0), Arg::Imm(1)], Some(2))?;
    ib.emit_ret(2)?;
    ib.end_function()?;
    let out = ib.get()?;
    let text = out.executable.as_text();
    // the constant is a 2 KiB tensor: show its first line only
    let short: String =
        text.lines()
            .map(|l| {
                if l.len() > 100 {
                    format!("{}...\n", l.chars().take(100).collect::<String>())
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
    println!("==== the shape-heap example\n{}{short}", out.executable.stats());
    let mut vm = VirtualMachine::new(Arc::new(out.executable))?;
    let shape = vm.invoke("main", &[])?;
    println!("main() = {shape}\n");
    assert_eq!(shape.as_shape()?.dims(), &[32, 16]);
    Ok(())
}

fn two_function_example() -> AnyResult<()> {
    let mut ib = ExecBuilder::new();
    ib.function("func0", 2, None)?;
    ib.emit_call("vm.op.add", &[Arg::Reg(0), Arg::Reg(1)], Some(2))?;
    ib.emit_ret(2)?;
    ib.end_function()?;
    ib.function("func1", 2, None)?;
    ib.emit_call("vm.op.mul", &[Arg::Reg(0), Arg::Reg(1)], Some(2))?;
    ib.emit_ret(2)?;
    ib.end_function()?;
    let out = ib.get()?;
    show("the two-function example", &out.executable, &out.warnings);
    let mut vm = VirtualMachine::new(Arc::new(out.executable))?;
    let a = Tensor::from_vec([4], vec![0.25f64, 0.5, 0.75, 1.0])?;
    let b = Tensor::from_vec([4], vec![4.0f64, 3.0, 2.0, 1.0])?;
    let args = [Value::Tensor(a), Value::Tensor(b)];
    let mul = vm.invoke("func1", &args)?;
    let add = vm.invoke("func0", &args)?;
    println!("func1(a, b) = {mul}\nfunc0(a, b) = {add}");
    assert_eq!(mul.as_tensor()?.to_vec::<f64>()?, vec![1.0, 1.5, 1.5, 1.0]);
    assert_eq!(add.as_tensor()?.to_vec::<f64>()?, vec![4.25, 3.5, 2.75, 2.0]);
    Ok(())
}

fn main() -> AnyResult<()> {
    relaxvm_builtins::ensure_registered();
    register_test_functions()?;
    builder_example()?;
    text_format_example()?;
    shape_heap_example()?;
    two_function_example()?;
    Ok(())
}
