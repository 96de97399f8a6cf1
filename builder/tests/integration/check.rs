//! The check through the builder: each error kind, warnings, and errors naming function and
//! instruction.

use crate::common::func;
use relaxvm::{Arg::*, FuncKind, Value};
use relaxvm_builder::{BuildError, CheckError, CheckErrorKind, ExecBuilder};

fn check_err(e: BuildError) -> CheckError {
    match e {
        BuildError::Check(c) => c,
        other => panic!("expected a check error, got {other}"),
    }
}

#[test]
fn reading_an_unexpected_register_as_input() {
    // TVM's example: r(3) used as an input while num_inputs is 2.
    let mut ib = ExecBuilder::new();
    let e = func(&mut ib, "main", 2, |ib| {
        ib.emit_call("vm.op.add", &[Reg(0), Reg(3)], Some(4))?;
        ib.emit_ret(4)
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "function \"main\", instruction 0 (call  vm.op.add  in: %0, %3  dst: %4): reads %3, which is neither an input (the function has 2 input(s)) nor written by any instruction"
    );
    // the error is sticky: get() reports it again
    assert_eq!(ib.get().unwrap_err().to_string(), e.to_string());
}

#[test]
fn reading_a_register_written_on_one_path_only() {
    let mut ib = ExecBuilder::new();
    let e = func(&mut ib, "main", 1, |ib| {
        ib.emit_if(0, 3)?;
        ib.emit_call("f", &[], Some(5))?;
        ib.emit_goto(1)?;
        ib.emit_ret(5)
    })
    .unwrap_err();
    let c = check_err(e);
    assert_eq!((c.func.as_str(), c.pc), ("main", Some(3)));
    assert_eq!(c.kind, CheckErrorKind::MaybeUnassigned { reg: 5 });
    assert_eq!(c.instr.as_deref(), Some("ret  %5"));
}

#[test]
fn jumps_outside_and_running_off_the_end() {
    let mut ib = ExecBuilder::new();
    let c = check_err(
        func(&mut ib, "a", 1, |ib| {
            ib.emit_goto(5)?;
            ib.emit_ret(0)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::JumpOutside { offset: 5, target: 5, len: 2 });
    let c = check_err(func(&mut ib, "b", 1, |ib| ib.emit_if(0, -1)).unwrap_err());
    assert_eq!(c.kind, CheckErrorKind::RunsOffEnd);
    let c = check_err(func(&mut ib, "c", 1, |ib| ib.emit_call("f", &[Reg(0)], Some(1))).unwrap_err());
    assert_eq!((c.pc, c.kind), (Some(0), CheckErrorKind::RunsOffEnd));
    let c = check_err(func(&mut ib, "d", 1, |_| Ok(())).unwrap_err());
    assert_eq!((c.pc, c.kind), (None, CheckErrorKind::Empty));
}

#[test]
fn constant_and_function_indices() {
    let mut ib = ExecBuilder::new();
    ib.convert_constant(Value::Int(1)).unwrap();
    let c = check_err(
        func(&mut ib, "a", 0, |ib| {
            ib.emit_call("f", &[Const(1)], Some(0))?;
            ib.emit_ret(0)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::ConstOutOfRange { index: 1, len: 1 });
    let c = check_err(
        func(&mut ib, "b", 0, |ib| {
            ib.emit_call("f", &[Func(99)], Some(0))?;
            ib.emit_ret(0)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::FuncOutOfRange { index: 99, len: 3 });
    assert_eq!(c.instr.as_deref(), Some("call  f  in: f[#99]  dst: %0"));
}

#[test]
fn bytecode_calls_with_the_wrong_arity() {
    // callee defined first: caught when the caller closes
    let mut ib = ExecBuilder::new();
    func(&mut ib, "callee", 2, |ib| ib.emit_ret(1)).unwrap();
    let c = check_err(
        func(&mut ib, "main", 1, |ib| {
            ib.emit_call("callee", &[Reg(0)], Some(1))?;
            ib.emit_ret(1)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::Arity { callee: "callee".into(), expected: 2, got: 1 });

    // callee defined later: caught at get()
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_call("later", &[Reg(0)], Some(1))?;
        ib.emit_ret(1)
    })
    .unwrap();
    func(&mut ib, "later", 0, |ib| {
        ib.emit_call("k", &[], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    let c = check_err(ib.get().unwrap_err());
    assert_eq!((c.func.as_str(), c.pc), ("main", Some(0)));

    // recursion checks against the open function itself
    let mut ib = ExecBuilder::new();
    let c = check_err(
        func(&mut ib, "rec", 1, |ib| {
            ib.emit_call("rec", &[], Some(1))?;
            ib.emit_ret(1)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::Arity { callee: "rec".into(), expected: 1, got: 0 });
}

#[test]
fn declared_bytecode_that_is_never_defined() {
    let mut ib = ExecBuilder::new();
    ib.declare_function("ghost", FuncKind::Bytecode).unwrap();
    let c = check_err(ib.get().unwrap_err());
    assert_eq!(c.to_string(), "function \"ghost\": declared as a bytecode function but never defined with function()");
}

#[test]
fn unused_inputs_are_warnings() {
    // TVM's example: three inputs, only r(0) and r(2) used.
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 3, |ib| {
        ib.emit_call("vm.op.add", &[Reg(0), Reg(2)], Some(3))?;
        ib.emit_ret(3)
    })
    .unwrap();
    assert_eq!(ib.warnings(), ["function \"main\": input %1 is never used"]);
    let out = ib.get().unwrap();
    assert_eq!(out.warnings, vec!["function \"main\": input %1 is never used".to_string()]);
    // get() reports each warning once however many times it runs
    assert_eq!(ib.get().unwrap().warnings.len(), 1);
}

#[test]
fn loops_pass_the_check() {
    // sum(n) = 0 + 1 + ... + (n-1)
    let mut ib = ExecBuilder::new();
    func(&mut ib, "sum", 1, |ib| {
        ib.emit_call("t.add", &[Imm(0), Imm(0)], Some(1))?;
        ib.emit_call("t.add", &[Imm(0), Imm(0)], Some(2))?;
        ib.emit_call("t.lt", &[Reg(2), Reg(0)], Some(3))?;
        ib.emit_if(3, 4)?;
        ib.emit_call("t.add", &[Reg(1), Reg(2)], Some(1))?;
        ib.emit_call("t.add", &[Reg(2), Imm(1)], Some(2))?;
        ib.emit_goto(-4)?;
        ib.emit_ret(1)
    })
    .unwrap();
    assert!(ib.get().unwrap().warnings.is_empty());
}

#[test]
fn unreachable_code_is_fine() {
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_ret(0)?;
        ib.emit_call("f", &[Reg(42)], Some(7))?;
        ib.emit_ret(7)
    })
    .unwrap();
    let exe = ib.get().unwrap().executable;
    assert_eq!(exe.func("main").unwrap().register_file_size, 3);
}
