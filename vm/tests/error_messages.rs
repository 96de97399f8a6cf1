//! The runtime's error kinds as they print (`relaxvm::ErrorKind`'s messages): each caused where
//! a VM or registry can cause it (unbounded recursion, a spent step budget, a name registered
//! twice, an executable the verifier refuses), and the kinds the core only carries (a type
//! mismatch, an arithmetic error, raised by builtins) made directly. The whole message, with its
//! fields, is checked.

use relaxvm::registry::Registry;
use relaxvm::{
    Arg, Error, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Value, VirtualMachine,
};
use std::sync::Arc;

fn vm(funcs: Vec<FuncInfo>, instrs: Vec<Instruction>) -> VirtualMachine {
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    VirtualMachine::new(Arc::new(exe)).unwrap()
}

/// The error's innermost message (under the function/instruction location).
fn root(e: &Error) -> String {
    e.root().to_string()
}

#[test]
fn unbounded_recursion_and_a_spent_step_budget() {
    // f(x) = f(x): recursion without end.
    let funcs = vec![FuncInfo::bytecode("f", 0, 2, 1, 2)];
    let instrs =
        vec![Instruction::Call { func: 0, args: vec![Arg::Reg(0)], dst: Some(1) }, Instruction::Ret { result: 1 }];
    let mut m = vm(funcs.clone(), instrs.clone());
    m.config_mut().max_call_depth = 50;
    let e = m.invoke("f", &[Value::Int(1)]).unwrap_err();
    assert_eq!(root(&e), "call depth limit of 50 frames exceeded (unbounded recursion?)");
    // The same with a budget of steps (each call is one) below the depth limit.
    let mut m = vm(funcs, instrs);
    m.config_mut().step_budget = Some(10);
    let e = m.invoke("f", &[Value::Int(1)]).unwrap_err();
    assert_eq!(root(&e), "step budget of 10 steps (bytecode calls and backward jumps) exhausted");
}

#[test]
fn a_name_registered_twice_without_override() {
    let mut r = Registry::default();
    r.register(PackedFunc::from_fn("t.once", |_| Ok(Value::Null)), false).unwrap();
    let e = r.register(PackedFunc::from_fn("t.once", |_| Ok(Value::Null)), false).unwrap_err();
    assert_eq!(e.to_string(), r#"function "t.once" is already registered (pass override to replace it)"#);
    // With override it replaces it.
    r.register(PackedFunc::from_fn("t.once", |_| Ok(Value::Int(1))), true).unwrap();
}

#[test]
fn an_executable_the_verifier_refuses() {
    // A call to function 5 of a table of one.
    let funcs = vec![FuncInfo::bytecode("f", 0, 2, 0, 1)];
    let instrs = vec![Instruction::Call { func: 5, args: vec![], dst: Some(0) }, Instruction::Ret { result: 0 }];
    let e = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Invalid(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.starts_with("invalid executable: "), "{text}");
    assert_eq!(text, format!("invalid executable: {}", e.as_invalid().unwrap()));
}

#[test]
fn kinds_builtins_raise_print_their_fields() {
    assert_eq!(Error::type_mismatch("int", "str").to_string(), "type mismatch: expected int, found str");
    assert_eq!(Error::arithmetic("integer division by zero").to_string(), "arithmetic error: integer division by zero");
    assert_eq!(Error::index("tuple", 3, 2).to_string(), "index 3 out of range for tuple of length 2");
}
