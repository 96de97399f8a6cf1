//! Refusals of the builder API and the linker that no other test causes, each with its whole
//! message (the function, parameter or constant at fault, and what was expected).

use crate::common::func;
use relaxvm::{Executable, ExecutableParts, FuncInfo, Instruction, Value};
use relaxvm_builder::{link, BuildError, ExecBuilder, LinkErrorKind, LinkOptions};

/// A tuple nested `depth` deep around an int.
fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::Int(1), |v, _| Value::tuple(vec![v]))
}

#[test]
fn builder_misuse_names_the_call_and_the_function() {
    let mut ib = ExecBuilder::new();
    let e = ib.emit_ret(0).unwrap_err();
    assert!(matches!(e, BuildError::NoOpenFunction { op: "emit_ret" }), "{e:?}");
    assert_eq!(e.to_string(), "emit_ret needs an open function: call function() first");

    func(&mut ib, "f", 1, |ib| ib.emit_ret(0)).unwrap();
    let e = ib.function("f", 1, None).unwrap_err();
    assert!(matches!(&e, BuildError::DuplicateFunction(n) if n == "f"), "{e:?}");
    assert_eq!(e.to_string(), "function \"f\" is already defined");

    let e = ib.function("g", 2, Some(vec!["x".into(), "x".into()])).unwrap_err();
    assert!(matches!(&e, BuildError::DuplicateParam { func, param } if func == "g" && param == "x"), "{e:?}");
    assert_eq!(e.to_string(), "function \"g\" names two parameters \"x\"");

    let e = ib.function("h", u32::MAX, None).unwrap_err();
    assert!(matches!(&e, BuildError::TooManyInputs { num_inputs: u32::MAX, .. }), "{e:?}");
    assert_eq!(e.to_string(), "function \"h\" has 4294967295 inputs, more than the limit of 1048576 registers");

    // get() while a function is open: the builder is left as it was.
    ib.function("k", 1, None).unwrap();
    let e = ib.get().unwrap_err();
    assert!(matches!(&e, BuildError::FunctionStillOpen(n) if n == "k"), "{e:?}");
    assert_eq!(e.to_string(), "function \"k\" is still open: call end_function() before get()");
}

#[test]
fn constants_nested_too_deep_are_refused_by_the_builder_and_the_linker() {
    let mut ib = ExecBuilder::new();
    assert!(ib.convert_constant(nested(32)).is_ok());
    let e = ib.convert_constant(nested(33)).unwrap_err();
    assert!(matches!(e, BuildError::UnsupportedConstant("tuple")), "{e:?}");
    assert_eq!(
        e.to_string(),
        "a tuple cannot be a constant: constants are null, ints, floats, bools, strings, shapes, dtypes, devices, \
         tensors and tuples of these nested at most 32 deep"
    );

    // An executable built from parts may hold such a constant; linking cannot merge it.
    let deep = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 0, 1)],
        constants: vec![Value::Int(0), nested(40)],
        instrs: vec![Instruction::Ret { result: 0 }],
        entry: None,
        ..Default::default()
    })
    .unwrap();
    let e = link(&[("deep.rvx", &deep)], &LinkOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), LinkErrorKind::Constant { index: 1, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "module 0 (\"deep.rvx\"), constant c[1]: a tuple cannot be a constant: constants are null, ints, floats, bools, \
         strings, shapes, dtypes, devices, tensors and tuples of these nested at most 32 deep"
    );
}

#[test]
fn dropping_unreachable_functions_needs_a_root() {
    let mut ib = ExecBuilder::new();
    func(&mut ib, "helper", 1, |ib| ib.emit_ret(0)).unwrap();
    let exe = ib.get().unwrap().executable;
    let options = LinkOptions { drop_unreachable: true, ..Default::default() };
    let e = link(&[("lib.rvx", &exe)], &options).unwrap_err();
    assert!(matches!(e.kind(), LinkErrorKind::NoEntry), "{e:?}");
    assert_eq!(
        e.to_string(),
        "dropping unreachable functions needs an entry function: set one, define main, or name functions to keep"
    );
}
