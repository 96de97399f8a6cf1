//! The runtime's error kinds as they print (`relaxvm::ErrorKind`'s messages): each caused where
//! a VM or registry can cause it (unbounded recursion, a spent step budget, a name registered
//! twice, an executable the verifier refuses), and the kinds the core only carries (a type
//! mismatch, an arithmetic error, raised by builtins) made directly. The whole message, with its
//! fields, is checked.

use relaxvm::registry::Registry;
use relaxvm::types::{Signature, Type};
use relaxvm::{
    Arg, DataType, Error, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Tensor, Value,
    VirtualMachine,
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
    m.limits_mut().max_call_depth = 50;
    let e = m.invoke("f", &[Value::Int(1)]).unwrap_err();
    assert_eq!(root(&e), "call depth limit of 50 frames exceeded (unbounded recursion?)");
    // The same with a budget of steps (each call is one) below the depth limit.
    let mut m = vm(funcs, instrs);
    m.limits_mut().step_budget = Some(10);
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

#[test]
fn tables_and_signatures_the_verifier_refuses() {
    let ret = vec![Instruction::Ret { result: 0 }, Instruction::Ret { result: 0 }];
    let funcs = vec![FuncInfo::bytecode("f", 0, 1, 1, 1), FuncInfo::bytecode("f", 1, 2, 1, 1)];
    let e = Executable::from_parts(ExecutableParts { funcs, instrs: ret.clone(), ..Default::default() }).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Invalid(_)), "{e:?}");
    assert_eq!(e.to_string(), "invalid executable: function \"f\" appears twice in the function table");
    let unnamed = Signature { params: vec![(String::new(), Type::Any)], result: Type::Any };
    let funcs = vec![FuncInfo::bytecode("g", 0, 1, 1, 1).with_signature(unnamed)];
    let e =
        Executable::from_parts(ExecutableParts { funcs, instrs: ret[..1].to_vec(), ..Default::default() }).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Invalid(_)), "{e:?}");
    assert_eq!(e.to_string(), "invalid executable: function \"g\": signature: a parameter has an empty name");
}

#[test]
fn a_register_stack_past_its_limit() {
    // f needs 8 registers; the VM allows 4 in all.
    let mut m = vm(vec![FuncInfo::bytecode("f", 0, 1, 1, 8)], vec![Instruction::Ret { result: 0 }]);
    m.limits_mut().max_stack_registers = 4;
    let e = m.invoke("f", &[Value::Int(1)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Alloc { .. }), "{e:?}");
    assert_eq!(root(&e), "cannot allocate 128 bytes: the register stack is limited to 4 registers");
}

#[test]
fn an_entry_called_through_another_vm() {
    let funcs = vec![FuncInfo::bytecode("f", 0, 1, 1, 1)];
    let instrs = vec![Instruction::Ret { result: 0 }];
    let (a, mut b) = (vm(funcs.clone(), instrs.clone()), vm(funcs, instrs));
    let e = a.entry(&a.get_function("f").unwrap()).expect("a plain bytecode function");
    let err = b.call_entry(&e, &[Value::Int(1)]).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Value(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "call_entry: the entry of \"f\" was resolved by another VirtualMachine (an entry is called through the VM \
         that resolved it)"
    );
}

#[test]
fn an_instrument_hook_that_panics_before_a_packed_and_a_bytecode_call() {
    let packed = PackedFunc::from_fn("t.hooked", |_| Ok(Value::Null));
    relaxvm::registry::register_global(packed, true).unwrap();
    // g calls the packed function, h calls the bytecode function f.
    let funcs = vec![
        FuncInfo::bytecode("f", 0, 1, 1, 1),
        FuncInfo::packed("t.hooked"),
        FuncInfo::bytecode("g", 1, 3, 1, 2),
        FuncInfo::bytecode("h", 3, 5, 1, 2),
    ];
    let instrs = vec![
        Instruction::Ret { result: 0 },
        Instruction::Call { func: 1, args: vec![], dst: Some(1) },
        Instruction::Ret { result: 1 },
        Instruction::Call { func: 0, args: vec![Arg::Reg(0)], dst: Some(1) },
        Instruction::Ret { result: 1 },
    ];
    let mut m = vm(funcs, instrs);
    m.set_instrument(Some(Box::new(|_| panic!("the hook broke"))));
    for caller in ["g", "h"] {
        let e = m.invoke(caller, &[Value::Int(1)]).unwrap_err();
        assert!(matches!(e.root().kind(), ErrorKind::Panic(_)), "{e:?}");
        assert_eq!(root(&e), "packed function panicked: instrument hook: the hook broke", "{caller}");
    }
}

#[test]
fn thread_pool_sizes() {
    let Err(e) = relaxvm::pool::init_global(0) else { panic!("an error") };
    assert!(matches!(e.kind(), ErrorKind::Value(_)), "{e:?}");
    assert_eq!(e.to_string(), format!("thread count 0: expected 1 to {}", relaxvm::pool::MAX_THREADS));
    let running = relaxvm::pool::global().threads();
    let other = if running == 1 { 2 } else { 1 };
    let Err(e) = relaxvm::pool::init_global(other) else { panic!("an error") };
    assert_eq!(
        e.to_string(),
        format!(
            "the thread pool already runs {running} threads (it is created once per process, on first use); \
             {other} were asked for"
        )
    );
}

#[test]
fn tensors_whose_parts_disagree() {
    let e = Tensor::from_vec([2, 2], vec![1.0f32, 2.0, 3.0]).unwrap_err();
    assert_eq!(e.to_string(), "3 elements cannot have shape (2, 2)");
    let storage = relaxvm::Storage::from_vec(vec![0.0f32; 4]);
    let e = Tensor::from_parts(storage, 0, [2, 2].into(), Some(vec![1]), DataType::F32).unwrap_err();
    assert_eq!(e.to_string(), "strides [1] do not match shape (2, 2)");
    // Storage shared with other code (a numpy or DLPack buffer) may hold any byte: viewing the
    // tensor as bools checks them.
    let bytes = relaxvm::Storage::from_vec(vec![1u8, 2]);
    let bools = Tensor::from_parts(bytes, 0, [2].into(), None, DataType::Bool).unwrap();
    let e = bools.view::<bool>().unwrap_err();
    assert_eq!(e.to_string(), "bool tensor holds the byte 2; bool bytes must be 0 or 1");
}

#[test]
fn tolerances_and_report_orders_that_mean_nothing() {
    let e = relaxvm::trace::Tolerance::new(-1.0, f64::NAN).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Value(_)), "{e:?}");
    assert_eq!(e.to_string(), "rtol and atol must be non-negative numbers, found rtol=-1, atol=NaN");
    let e = "fastest".parse::<relaxvm::profile::SortBy>().unwrap_err();
    assert_eq!(e.to_string(), "sort_by must be one of \"total\", \"count\", \"mean\", \"name\", found \"fastest\"");
}

/// One float standing for 2^42 (a stride-0 view, 16 TiB of elements).
fn huge_view() -> Tensor {
    let one = Tensor::scalar(1.0f32);
    Tensor::from_parts(one.storage().clone(), 0, [1i64 << 42].into(), Some(vec![0]), DataType::F32).unwrap()
}

#[test]
fn copies_and_text_forms_past_the_memory_are_errors_not_aborts() {
    let e = huge_view().to_vec::<f32>().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Alloc { .. }), "{e:?}");
    assert_eq!(e.to_string(), "cannot allocate 17592186044416 bytes: out of memory copying a tensor");
    // An executable holding the view as a constant: its text and Python forms would spell
    // out every element.
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 0, 1)],
        constants: vec![Value::Tensor(huge_view())],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    })
    .unwrap();
    let e = exe.try_as_text().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Alloc { .. }), "{e:?}");
    assert_eq!(e.to_string(), "cannot allocate 35184372092992 bytes: out of memory for the text form");
    let e = exe.try_as_python().unwrap_err();
    assert_eq!(e.to_string(), "cannot allocate 70368744177664 bytes: out of memory for the Python source");
}
