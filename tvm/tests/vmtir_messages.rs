//! The errors machine code of a VM TIR function (exec_mode="compiled") gets when it misuses the
//! AnyList functions or the call interface, and the errors of the wrapper that runs it: Rust
//! functions with the safe-call signature stand in for the machine code of a damaged library,
//! as tvm/src/vmtir/tests.rs does, and each error names the function, the argument and what was
//! wrong.

use relaxvm::{Executable, ExecutableParts, FuncInfo, Registry, Tensor, Value, VirtualMachine};
use relaxvm_tvm::ffi::abi::{type_index, SafeCall, TVMFFIAny};
use relaxvm_tvm::ffi::services;
use relaxvm_tvm::vmtir::frame::{
    RVMBackendAnyListMoveFromPackedReturn, RVMBackendAnyListResetItem, RVMBackendAnyListSetPackedArg,
};
use relaxvm_tvm::vmtir::{adapter, wrap_functions, Compiled};
use std::ffi::c_void;
use std::sync::Arc;

/// The four pointers a VM TIR function receives: context, registers, constants, functions.
///
/// # Safety
/// `args` holds 4 values.
unsafe fn lists(args: *const TVMFFIAny) -> [*mut c_void; 4] {
    // SAFETY: the caller's contract.
    let a = unsafe { std::slice::from_raw_parts(args, 4) };
    [a[0].as_ptr(), a[1].as_ptr(), a[2].as_ptr(), a[3].as_ptr()]
}

/// Copies from a list that is none of the running function's.
unsafe extern "C" fn foreign_list(_: *mut c_void, _: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    let mut stack = [TVMFFIAny::NONE; 1];
    let bogus = [TVMFFIAny::NONE; 4];
    // SAFETY: a writable one-item stack; relaxvm checks the list before reading it.
    unsafe { RVMBackendAnyListSetPackedArg(bogus.as_ptr().cast_mut().cast(), 0, stack.as_mut_ptr(), 0) }
}

/// Resets an item of the constant list, which is read-only.
unsafe extern "C" fn reset_a_constant(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let [_, _, consts, _] = unsafe { lists(args) };
    // SAFETY: relaxvm checks the list before writing.
    unsafe { RVMBackendAnyListResetItem(consts, 0) }
}

/// Moves a DLTensor pointer relaxvm never handed out into a register.
unsafe extern "C" fn store_a_raw_pointer(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let [_, regs, _, _] = unsafe { lists(args) };
    let mut result = [TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, 0x1234 as *const c_void)];
    // SAFETY: a readable and writable result slot.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(regs, 1, result.as_mut_ptr(), 0) }
}

/// Calls `vm.builtin.alloc_storage` with an opaque pointer that is not the VM context.
unsafe extern "C" fn forged_context(_: *mut c_void, _: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and a writable handle slot.
    let rc = unsafe {
        services::lookup_from_imports(std::ptr::null_mut(), c"vm.builtin.alloc_storage".as_ptr(), &mut handle)
    };
    if rc != 0 {
        return rc;
    }
    let args = [TVMFFIAny::ptr(type_index::OPAQUE_PTR, 0x5678 as *const c_void), TVMFFIAny::int(16)];
    let mut ret = TVMFFIAny::NONE;
    // SAFETY: a handle from the lookup, 2 live arguments, a writable result.
    unsafe { services::function_call(handle, args.as_ptr(), 2, &mut ret) }
}

/// A VM running one VM TIR function `f` of one input and `registers` registers whose machine
/// code is `code`.
fn vm_with(code: SafeCall) -> VirtualMachine {
    relaxvm_builtins::ensure_registered();
    let mut funcs = vec![FuncInfo::bytecode("f", 0, 0, 1, 2)];
    let mut instrs = Vec::new();
    let constants = vec![Value::Shape([16].into())];
    wrap_functions(&mut funcs, &mut instrs, &[Compiled { index: 0, num_args: 1, registers: 2 }]).unwrap();
    let exe = Executable::from_parts(ExecutableParts { funcs, constants, instrs, ..Default::default() }).unwrap();
    let mut overrides = Registry::new();
    overrides.register(adapter("__vmtir__f", code, Arc::new(())), false).unwrap();
    VirtualMachine::with_overrides(Arc::new(exe), &overrides).unwrap()
}

fn error_of(code: SafeCall) -> String {
    let x = Value::Tensor(Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]).unwrap());
    vm_with(code).invoke("f", &[x]).expect_err("refused").to_string()
}

#[test]
fn misused_lists_are_errors_naming_the_function() {
    let e = error_of(foreign_list);
    assert!(
        e.contains("TVMBackendAnyListSetPackedArg: 0x") && e.contains("is not a list of the running function \"f\""),
        "{e}"
    );
    let e = error_of(reset_a_constant);
    assert!(
        e.contains("TVMBackendAnyListResetItem: 0x")
            && e.contains(
                "is not the register list of the running function \"f\" (the constant and function lists are read-only)"
            ),
        "{e}"
    );
    let e = error_of(store_a_raw_pointer);
    assert!(
        e.contains(&format!(
            "TVMBackendAnyListMoveFromPackedReturn: a value of tvm-ffi type index {} cannot be kept in a register (a pointer relaxvm did not hand out)",
            type_index::DL_TENSOR_PTR
        )),
        "{e}"
    );
    let e = error_of(forged_context);
    assert!(e.contains("an opaque pointer 0x5678 that is not the VM context"), "{e}");
}

/// Copies register 0 to a NULL argument stack.
unsafe extern "C" fn null_stack(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values; relaxvm checks the stack before writing.
    unsafe { RVMBackendAnyListSetPackedArg(lists(args)[1], 0, std::ptr::null_mut(), 0) }
}

/// Copies register 0 to offset -1 of an argument stack.
unsafe extern "C" fn negative_offset(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    let mut stack = [TVMFFIAny::NONE; 1];
    // SAFETY: the adapter passes 4 values; relaxvm checks the offset before writing.
    unsafe { RVMBackendAnyListSetPackedArg(lists(args)[1], 0, stack.as_mut_ptr(), -1) }
}

/// Moves a result from a NULL argument stack.
unsafe extern "C" fn null_result(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values; relaxvm checks the stack before reading.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(lists(args)[1], 1, std::ptr::null_mut(), 0) }
}

#[test]
fn null_and_negative_arguments_are_refused_before_anything_is_read() {
    let e = error_of(null_stack);
    assert!(e.contains("TVMBackendAnyListSetPackedArg: a null argument stack"), "{e}");
    let e = error_of(negative_offset);
    assert!(e.contains("TVMBackendAnyListSetPackedArg: negative offset"), "{e}");
    let e = error_of(null_result);
    assert!(e.contains("TVMBackendAnyListMoveFromPackedReturn: a null result"), "{e}");
}

unsafe extern "C" fn never_called(_: *mut c_void, _: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    unreachable!("the wrapper refuses the call first")
}

#[test]
fn the_wrapper_refuses_calls_it_cannot_run() {
    let f = adapter("__vmtir__g", never_called, Arc::new(()));
    let mut ctx = relaxvm::CallCtx::detached();
    let e = f.call(&mut ctx, &[Value::Null]).unwrap_err().to_string();
    assert!(
        e.contains(
            "__vmtir__g: expected the function's inputs followed by its register count (the call relaxvm's importer writes)"
        ),
        "{e}"
    );
    let e = f.call(&mut ctx, &[Value::Int(1), Value::Int(3)]).unwrap_err().to_string();
    assert!(e.contains("VM TIR function \"__vmtir__g\" runs only inside a VirtualMachine"), "{e}");
}

#[test]
fn a_function_named_like_the_machine_code_of_another_is_refused() {
    let mut funcs = vec![FuncInfo::bytecode("f", 0, 0, 1, 2), FuncInfo::packed("__vmtir__f")];
    let e =
        wrap_functions(&mut funcs, &mut Vec::new(), &[Compiled { index: 0, num_args: 1, registers: 2 }]).unwrap_err();
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Format(_)), "{e:?}");
    assert!(
        e.to_string().ends_with(
            "the function table holds both VM TIR function \"f\" and a function named \"__vmtir__f\", the name of its machine code"
        ),
        "{e}"
    );
}

#[test]
fn a_call_of_the_machine_code_with_too_few_registers_is_refused() {
    use relaxvm::{Arg, Instruction};
    // main(x) calls the machine code directly with a register count of 1: no room for a result.
    let funcs = vec![FuncInfo::bytecode("main", 0, 2, 1, 2), FuncInfo::packed("__vmtir__h")];
    let instrs = vec![
        Instruction::Call { func: 1, args: vec![Arg::Reg(0), Arg::Imm(1)], dst: Some(1) },
        Instruction::Ret { result: 1 },
    ];
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    let mut overrides = Registry::new();
    overrides.register(adapter("__vmtir__h", never_called, Arc::new(())), false).unwrap();
    let mut vm = VirtualMachine::with_overrides(Arc::new(exe), &overrides).unwrap();
    let e = vm.invoke("main", &[Value::Int(7)]).unwrap_err().to_string();
    assert!(
        e.contains("VM TIR function \"h\": 1 registers cannot hold its 1 inputs and its result (at most 4194304)"),
        "{e}"
    );
}
