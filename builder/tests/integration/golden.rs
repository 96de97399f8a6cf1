//! Golden tests of the design: programs built with `ExecBuilder` print exactly the committed
//! text (`tests/golden/*.rvt`), that text assembles to the same bytes, and the check's errors
//! read exactly as committed (`tests/golden/check_errors.txt`). `RELAXVM_BLESS=1 cargo test`
//! rewrites the files after an intended change; review the diff.

use super::common::func;
use relaxvm::{Arg, DataType, Device, Location, Shape, Tensor, Value};
use relaxvm_builder::{assemble, BuildError, ExecBuilder};
use std::path::PathBuf;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
}

/// Compares `actual` with the golden file `name`, or rewrites it under `RELAXVM_BLESS=1`.
fn assert_golden(name: &str, actual: &str) {
    let path = golden(name);
    if std::env::var_os("RELAXVM_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(actual == expected, "{name} differs from the golden file:\n--- expected\n{expected}\n--- actual\n{actual}");
}

/// Every instruction, every argument kind, a loop, a branch, locations and a second function.
fn every_instruction() -> ExecBuilder {
    let mut ib = ExecBuilder::new();
    let c = ib.convert_constant(Value::Int(10)).unwrap();
    let helper = ib.func_ref("helper");
    func(&mut ib, "main", 2, |ib| {
        ib.set_location(Some(Location::File { file: "model.py".into(), line: 3, col: 1 }));
        ib.emit_call("vm.op.add", &[Arg::Reg(0), Arg::Const(c)], Some(5))?;
        ib.set_location(None);
        ib.emit_call("vm.builtin.null_value", &[], Some(6))?;
        ib.emit_call("vm.builtin.invoke_closure", &[Arg::VmState, Arg::Func(helper), Arg::Reg(5)], Some(7))?;
        ib.emit_call("vm.builtin.tuple_getitem", &[Arg::Void, Arg::Imm(-3)], None)?;
        ib.emit_if(1, 3)?;
        ib.emit_call("helper", &[Arg::Reg(7)], Some(8))?;
        ib.emit_goto(2)?;
        ib.emit_call("helper", &[Arg::Reg(5)], Some(8))?;
        ib.emit_ret(8)
    })
    .unwrap();
    func(&mut ib, "helper", 1, |ib| ib.emit_ret(0)).unwrap();
    ib
}

/// A loop counting down, with a named entry and parameter names.
fn countdown() -> ExecBuilder {
    let mut ib = ExecBuilder::new();
    ib.set_entry("count").unwrap();
    ib.function("count", 1, Some(vec!["n".into()])).unwrap();
    ib.emit_call("vm.builtin.copy", &[Arg::Reg(0)], Some(1)).unwrap();
    ib.emit_if(1, 3).unwrap();
    ib.emit_call("vm.op.sub", &[Arg::Reg(1), Arg::Imm(1)], Some(1)).unwrap();
    ib.emit_goto(-2).unwrap();
    ib.emit_ret(1).unwrap();
    ib.end_function().unwrap();
    ib
}

/// One constant of each kind, and a signature.
fn constants_and_signature() -> ExecBuilder {
    let mut ib = ExecBuilder::new();
    let tensor = Tensor::from_vec(vec![3i64], vec![1.5f32, -2.0, 0.25]).unwrap();
    let values = [
        Value::Null,
        Value::Int(-7),
        Value::Float(0.1),
        Value::Bool(true),
        Value::Str("tab\there \"quoted\" ü".into()),
        Value::Shape(Shape::from(vec![2, 3])),
        Value::DType(DataType::F16),
        Value::Device(Device::cpu(0)),
        Value::Tensor(tensor),
    ];
    let args: Vec<Arg> = values.into_iter().map(|v| Arg::Const(ib.convert_constant(v).unwrap())).collect();
    ib.function_with_signature("main", "(x: tensor<[n, 3], f32>, k: i64) -> any".parse().unwrap()).unwrap();
    ib.emit_call("vm.builtin.make_tuple", &args, Some(2)).unwrap();
    ib.emit_ret(2).unwrap();
    ib.end_function().unwrap();
    ib
}

#[test]
fn built_programs_print_the_golden_text_which_assembles_to_the_same_bytes() {
    type Build = fn() -> ExecBuilder;
    let cases: [(&str, Build); 3] = [
        ("every_instruction.rvt", every_instruction),
        ("countdown.rvt", countdown),
        ("constants_and_signature.rvt", constants_and_signature),
    ];
    for (name, build) in cases {
        let exe = build().get().unwrap_or_else(|e| panic!("{name}: {e}")).executable;
        let text = exe.as_text();
        assert_golden(name, &text);
        let back = assemble(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back.save_to_bytes(), exe.save_to_bytes(), "{name}: the text assembles to other bytes");
    }
}

/// Programs the check refuses, each with the error it reports: its message, kind, function and
/// instruction.
#[test]
fn check_errors_read_as_committed() {
    type Body = fn(&mut ExecBuilder) -> Result<(), BuildError>;
    let cases: Vec<(&str, u32, Body)> = vec![
        ("undefined register", 1, |ib| {
            ib.emit_call("vm.builtin.move", &[Arg::Reg(3)], Some(1))?;
            ib.emit_ret(1)
        }),
        ("written on one branch only", 1, |ib| {
            ib.emit_if(0, 2)?;
            ib.emit_call("vm.builtin.move", &[Arg::Reg(0)], Some(1))?;
            ib.emit_ret(1)
        }),
        ("written only inside a loop", 1, |ib| {
            ib.emit_if(0, 3)?;
            ib.emit_call("vm.builtin.null_value", &[], Some(2))?;
            ib.emit_goto(-2)?;
            ib.emit_ret(2)
        }),
        ("runs off the end", 1, |ib| ib.emit_call("vm.builtin.move", &[Arg::Reg(0)], Some(1))),
        ("jump outside", 1, |ib| {
            ib.emit_goto(5)?;
            ib.emit_ret(0)
        }),
        ("jump before the start", 1, |ib| {
            ib.emit_if(0, -1)?;
            ib.emit_ret(0)
        }),
        ("constant outside the pool", 0, |ib| {
            ib.emit_call("vm.builtin.move", &[Arg::Const(4)], Some(0))?;
            ib.emit_ret(0)
        }),
        ("function index outside the table", 0, |ib| {
            ib.emit_call("vm.builtin.move", &[Arg::Func(99)], Some(0))?;
            ib.emit_ret(0)
        }),
        ("wrong arity", 0, |ib| {
            ib.emit_call("main", &[Arg::Imm(1)], Some(0))?;
            ib.emit_ret(0)
        }),
        ("empty function", 0, |_| Ok(())),
    ];
    let mut out = String::new();
    for (name, inputs, body) in cases {
        let mut ib = ExecBuilder::new();
        let err = match func(&mut ib, "main", inputs, body) {
            Err(BuildError::Check(e)) => e,
            Err(other) => panic!("{name}: not a check error: {other}"),
            Ok(()) => panic!("{name}: accepted"),
        };
        out.push_str(&format!(
            "{name}\n  kind: {}  function: {:?}  pc: {:?}  slot: {:?}\n  {err}\n",
            err.kind.name(),
            err.func,
            err.pc,
            err.slot
        ));
    }
    let mut ib = ExecBuilder::new();
    ib.declare_function("ghost", relaxvm::FuncKind::Bytecode).unwrap();
    let Err(BuildError::Check(err)) = ib.get() else { panic!("a declared function without a body was accepted") };
    out.push_str(&format!("never defined\n  kind: {}  function: {:?}\n  {err}\n", err.kind.name(), err.func));
    assert_golden("check_errors.txt", &out);
}
