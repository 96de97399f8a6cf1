//! VM TIR functions without TVM: Rust functions with the safe-call signature stand in for the
//! machine code TVM emits, calling the AnyList functions and `TVMFFIFunctionCall` as it does,
//! correctly and in hostile ways.

use super::frame::{RVMBackendAnyListMoveFromPackedReturn, RVMBackendAnyListResetItem, RVMBackendAnyListSetPackedArg};
use super::{adapter, wrap_functions, Compiled};
use crate::ffi::abi::{type_index, SafeCall, TVMFFIAny};
use crate::ffi::{raised, services};
use relaxvm::{
    ErrorKind, Executable, ExecutableParts, FuncInfo, InstrumentAction, PackedFunc, Registry, Tensor, Value,
    VirtualMachine,
};
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

mod alloc_sites;
mod borrowed_args;
mod native_site;

type Lists = (*mut c_void, *mut c_void, *mut c_void, *mut c_void);

/// The four pointers a VM TIR function receives.
///
/// # Safety
/// `args` holds 4 values.
unsafe fn lists(args: *const TVMFFIAny) -> Lists {
    // SAFETY: the caller's contract.
    let a = unsafe { std::slice::from_raw_parts(args, 4) };
    (a[0].as_ptr(), a[1].as_ptr(), a[2].as_ptr(), a[3].as_ptr())
}

/// Calls packed function `name` as native code does: a handle from the lookup, then
/// `TVMFFIFunctionCall`; the return code.
fn call_by_name(name: &str, args: &[TVMFFIAny], ret: &mut TVMFFIAny) -> i32 {
    let cname = CString::new(name).unwrap();
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and a writable handle slot.
    let rc = unsafe { services::lookup_from_imports(std::ptr::null_mut(), cname.as_ptr(), &mut handle) };
    if rc != 0 {
        return rc;
    }
    // SAFETY: a handle from the lookup, `args.len()` live arguments, a writable result.
    unsafe { services::function_call(handle, args.as_ptr(), args.len() as i32, ret) }
}

/// `f(x) = vm.builtin.copy(x)`, as TVM compiles it: register 0 to the call's argument stack,
/// the call, its result moved into register 1.
unsafe extern "C" fn copy_fn(_: *mut c_void, args: *const TVMFFIAny, n: i32, _: *mut TVMFFIAny) -> i32 {
    assert_eq!(n, 4);
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE; 2];
    // SAFETY: room for one argument.
    let rc = unsafe { RVMBackendAnyListSetPackedArg(r, 0, stack.as_mut_ptr(), 0) };
    if rc != 0 {
        return rc;
    }
    let (head, tail) = stack.split_at_mut(1);
    let rc = call_by_name("vm.builtin.copy", head, &mut tail[0]);
    if rc != 0 {
        return rc;
    }
    // SAFETY: the result is at offset 1.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 1) }
}

/// `f(x) = vm.builtin.alloc_storage(ctx, ...)`: the context pointer stands for the VM state.
unsafe extern "C" fn alloc_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (ctx, r, c, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE; 6];
    stack[0] = TVMFFIAny::ptr(type_index::OPAQUE_PTR, ctx);
    // SAFETY: constant 0 is the size shape, 1 the dtype; room for them at 1 and 3.
    unsafe {
        if RVMBackendAnyListSetPackedArg(c, 0, stack.as_mut_ptr(), 1) != 0
            || RVMBackendAnyListSetPackedArg(c, 1, stack.as_mut_ptr(), 3) != 0
        {
            return -1;
        }
    }
    stack[2] = TVMFFIAny::int(0);
    let (head, tail) = stack.split_at_mut(4);
    let rc = call_by_name("vm.builtin.alloc_storage", head, &mut tail[1]);
    if rc != 0 {
        return rc;
    }
    // SAFETY: the result is at offset 5.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 5) }
}

/// Reads register 99 of a function that has 2.
unsafe extern "C" fn out_of_range_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE; 1];
    // SAFETY: room for one argument.
    unsafe { RVMBackendAnyListSetPackedArg(r, 99, stack.as_mut_ptr(), 0) }
}

/// Stores a forged object pointer into register 1.
unsafe extern "C" fn forged_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::ptr(70, 0x1234usize as *const c_void)];
    // SAFETY: one value at offset 0.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0) }
}

/// Writes into the constant list.
unsafe extern "C" fn const_write_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, _, c, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::int(1)];
    // SAFETY: one value at offset 0.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(c, 0, stack.as_mut_ptr(), 0) }
}

/// Calls `test.vmtir.fail`, whose error must reach the caller unchanged.
unsafe extern "C" fn failing_call_fn(_: *mut c_void, _: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    let mut ret = TVMFFIAny::NONE;
    call_by_name("test.vmtir.fail", &[], &mut ret)
}

/// An executable of one VM TIR function `f` of one input, with two registers and constants
/// (shape (16,), dtype uint8), whose machine code is `code`; the VM that runs it.
fn vm_with(code: SafeCall) -> VirtualMachine {
    vm_with_registers(code, 2)
}

/// [`vm_with`] with `registers` registers.
fn vm_with_registers(code: SafeCall, registers: u32) -> VirtualMachine {
    relaxvm_builtins::ensure_registered();
    let mut funcs = vec![FuncInfo::bytecode("f", 0, 0, 1, 2)];
    let mut instrs = Vec::new();
    let constants = vec![Value::Shape([16].into()), Value::str("uint8")];
    wrap_functions(&mut funcs, &mut instrs, &[Compiled { index: 0, num_args: 1, registers }]).unwrap();
    let exe = Executable::from_parts(ExecutableParts { funcs, constants, instrs, ..Default::default() }).unwrap();
    let mut overrides = Registry::new();
    overrides.register(adapter("__vmtir__f", code, Arc::new(())), false).unwrap();
    VirtualMachine::with_overrides(Arc::new(exe), &overrides).unwrap()
}

fn tensor() -> Value {
    Value::Tensor(Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]).unwrap())
}

#[test]
fn a_compiled_function_calls_builtins_and_the_instrument_sees_them() {
    let mut vm = vm_with(copy_fn);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    vm.set_instrument(Some(Box::new(move |c| {
        log.lock().unwrap().push((c.name.to_string(), c.before, c.caller.to_string()));
        Ok(InstrumentAction::Continue)
    })));
    let x = tensor();
    let out = vm.invoke("f", std::slice::from_ref(&x)).unwrap();
    assert!(out.as_tensor().unwrap().ptr_eq(x.as_tensor().unwrap()), "vm.builtin.copy returns its argument");
    let seen = seen.lock().unwrap().clone();
    let names: Vec<_> = seen.iter().map(|(n, b, _)| (n.as_str(), *b)).collect();
    assert_eq!(
        names,
        [("__vmtir__f", true), ("vm.builtin.copy", true), ("vm.builtin.copy", false), ("__vmtir__f", false)]
    );
    assert_eq!(seen[1].2, "f", "the builtin's caller is the compiled function");
    // Arguments are checked as for bytecode.
    assert!(matches!(vm.invoke("f", &[]).unwrap_err().kind(), ErrorKind::Arity { .. }));
}

#[test]
fn the_context_pointer_is_the_vm_state() {
    let mut vm = vm_with(alloc_fn);
    let out = vm.invoke("f", &[tensor()]).unwrap();
    assert!(matches!(out, Value::Storage(_)), "{out:?}");
}

#[test]
fn hostile_list_accesses_are_errors_naming_the_function() {
    let e = vm_with(out_of_range_fn).invoke("f", &[tensor()]).unwrap_err().to_string();
    assert!(e.contains("TVMBackendAnyListSetPackedArg") && e.contains("99") && e.contains("\"f\""), "{e}");
    let e = vm_with(forged_fn).invoke("f", &[tensor()]).unwrap_err().to_string();
    assert!(e.contains("did not hand to this function") && e.contains("0x1234"), "{e}");
    let e = vm_with(const_write_fn).invoke("f", &[tensor()]).unwrap_err().to_string();
    assert!(e.contains("not the register list"), "{e}");
}

#[test]
fn an_error_of_a_called_function_reaches_the_caller_unchanged() {
    relaxvm::registry::register_global(
        PackedFunc::from_fn("test.vmtir.fail", |_| Err(relaxvm::Error::index("a thing", 7, 3))),
        true,
    )
    .unwrap();
    let e = vm_with(failing_call_fn).invoke("f", &[tensor()]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Index { index: 7, len: 3, .. }), "{e:?}");
}

/// Reads register 99 (a failure), then goes on as TVM's code does, ignoring the return code.
unsafe extern "C" fn goes_on_after_failure_fn(
    _: *mut c_void,
    args: *const TVMFFIAny,
    _: i32,
    _: *mut TVMFFIAny,
) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::int(7), TVMFFIAny::NONE];
    // SAFETY: room for one argument; the failure leaves None in the slot.
    unsafe { RVMBackendAnyListSetPackedArg(r, 99, stack.as_mut_ptr(), 0) };
    assert_eq!(stack[0].type_index, type_index::NONE, "the slot of a failed read holds None");
    // Every later callback refuses.
    // SAFETY: as above.
    assert_eq!(unsafe { RVMBackendAnyListSetPackedArg(r, 0, stack.as_mut_ptr(), 0) }, -1);
    // ... and says why, for native code that reports it.
    let (_, message) = raised::take_raw().expect("the refusal is recorded for native code");
    assert!(message.contains(": VM TIR function \"f\" failed before: "), "{message}");
    let (head, tail) = stack.split_at_mut(1);
    assert_eq!(call_by_name("vm.builtin.copy", head, &mut tail[0]), -1);
    let (_, message) = raised::take_raw().expect("the refused call is recorded for native code");
    assert!(message.contains("a call of \"vm.builtin.copy\": VM TIR function \"f\" failed before: "), "{message}");
    0
}

#[test]
fn after_a_failure_the_first_error_is_the_result() {
    let e = vm_with(goes_on_after_failure_fn).invoke("f", &[tensor()]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Index { index: 99, len: 2, .. }), "{e:?}");
}

#[test]
fn wrappers_and_register_counts_are_bounded() {
    // A wrapper passes its inputs and register count only: n functions cost O(n).
    let n = 30_000;
    let mut funcs: Vec<FuncInfo> = (0..n).map(|i| FuncInfo::bytecode(format!("f{i}"), 0, 0, 0, 1)).collect();
    let compiled: Vec<Compiled> = (0..n).map(|index| Compiled { index, num_args: 0, registers: 1 }).collect();
    let mut instrs = Vec::new();
    wrap_functions(&mut funcs, &mut instrs, &compiled).unwrap();
    let operands: usize = instrs
        .iter()
        .map(|i| match i {
            relaxvm::Instruction::Call { args, .. } => args.len(),
            _ => 0,
        })
        .sum();
    assert_eq!((instrs.len(), operands), (2 * n, n));
    let mut funcs = vec![FuncInfo::bytecode("f", 0, 0, 1, 2)];
    let huge = [Compiled { index: 0, num_args: 1, registers: super::MAX_REGISTERS + 1 }];
    let e = wrap_functions(&mut funcs, &mut Vec::new(), &huge).unwrap_err().to_string();
    assert!(e.contains("\"f\" declares 4194305 registers"), "{e}");
}

#[test]
fn the_anylist_functions_outside_a_compiled_function_are_errors() {
    let mut slot = [TVMFFIAny::NONE];
    raised::clear();
    // SAFETY: a writable one-item stack.
    assert_eq!(unsafe { RVMBackendAnyListSetPackedArg(slot.as_mut_ptr().cast(), 0, slot.as_mut_ptr(), 0) }, -1);
    assert!(raised::take("x").to_string().contains("outside a running VM TIR function"));
    // SAFETY: outside a frame, with no other runtime loaded, nothing is dereferenced.
    assert_eq!(unsafe { RVMBackendAnyListResetItem(slot.as_mut_ptr().cast(), 0) }, -1);
    assert!(raised::take("x").to_string().contains("outside a running VM TIR function"));
}

#[test]
fn an_int_input_under_an_instrument_is_an_input() {
    // compiled/04: the general path once took the first int argument for the register count.
    let mut vm = vm_with(copy_fn);
    vm.set_instrument(Some(Box::new(|_| Ok(InstrumentAction::Continue))));
    let out = vm.invoke("f", &[Value::Int(4_294_967_295)]).unwrap();
    assert_eq!(out.as_int().unwrap(), 4_294_967_295);
}

/// Calls `test.vmtir.which` and leaves its result in register 1.
unsafe extern "C" fn which_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE];
    let rc = call_by_name("test.vmtir.which", &[], &mut stack[0]);
    if rc != 0 {
        return rc;
    }
    // SAFETY: the result is at offset 0.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0) }
}

#[test]
fn a_name_registered_again_takes_effect_at_the_next_call() {
    // A handle resolves again after the registry changed: a re-registered name takes effect.
    let which = |n: i64| PackedFunc::from_fn("test.vmtir.which", move |_| Ok(Value::Int(n)));
    relaxvm::registry::register_global(which(1), true).unwrap();
    let mut vm = vm_with(which_fn);
    assert_eq!(vm.invoke("f", &[tensor()]).unwrap().as_int().unwrap(), 1);
    assert_eq!(vm.invoke("f", &[tensor()]).unwrap().as_int().unwrap(), 1);
    relaxvm::registry::register_global(which(2), true).unwrap();
    assert_eq!(vm.invoke("f", &[tensor()]).unwrap().as_int().unwrap(), 2);
    relaxvm::registry::remove_global("test.vmtir.which");
    let e = vm.invoke("f", &[tensor()]).unwrap_err().to_string();
    assert!(e.contains("test.vmtir.which"), "{e}");
}

/// Copies register `from` with `vm.builtin.copy` into register `to`; the return code.
///
/// # Safety
/// `r` is the running function's register list.
unsafe fn copy_register(r: *mut c_void, from: i32, to: i32) -> i32 {
    let mut stack = [TVMFFIAny::NONE; 2];
    // SAFETY: room for one argument.
    if unsafe { RVMBackendAnyListSetPackedArg(r, from, stack.as_mut_ptr(), 0) } != 0 {
        return -1;
    }
    let (head, tail) = stack.split_at_mut(1);
    if call_by_name("vm.builtin.copy", head, &mut tail[0]) != 0 {
        return -1;
    }
    // SAFETY: the result is at offset 1.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, to, stack.as_mut_ptr(), 1) }
}

/// Puts one object into registers 1 and 2, lets go of it in one, then the other: while one
/// register holds it, it stays usable; once none does, its address is refused.
unsafe extern "C" fn held_twice_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE];
    // SAFETY: `r` is the register list; every stack access is at offset 0 of a one-item stack.
    unsafe {
        assert_eq!(copy_register(r, 0, 1), 0);
        assert_eq!(RVMBackendAnyListSetPackedArg(r, 1, stack.as_mut_ptr(), 0), 0);
        let object = stack[0];
        assert_eq!(RVMBackendAnyListMoveFromPackedReturn(r, 2, stack.as_mut_ptr(), 0), 0);
        assert_eq!(RVMBackendAnyListResetItem(r, 1), 0);
        assert_eq!(copy_register(r, 2, 3), 0, "register 2 still holds the object");
        assert_eq!(RVMBackendAnyListResetItem(r, 2), 0);
        stack[0] = object;
        RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0)
    }
}

#[test]
fn an_object_two_registers_hold_lives_until_both_let_go() {
    let e = vm_with_registers(held_twice_fn, 4).invoke("f", &[tensor()]).unwrap_err().to_string();
    assert!(e.contains("that it has released"), "{e}");
}

/// Calls `test.vmtir.kept` and leaves its result in register 1.
unsafe extern "C" fn kept_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE];
    let rc = call_by_name("test.vmtir.kept", &[], &mut stack[0]);
    if rc != 0 {
        return rc;
    }
    // SAFETY: the result is at offset 0.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0) }
}

#[test]
fn a_replaced_or_removed_function_is_not_kept_by_the_vm() {
    // perf/02: what a handle resolved to lived in the VM after the call, so a replaced
    // function (and whatever it holds, e.g. the VM itself) was never dropped.
    let marker = Arc::new(());
    let held = Arc::clone(&marker);
    let which = PackedFunc::from_fn("test.vmtir.kept", move |_| {
        let _ = &held;
        Ok(Value::Int(1))
    });
    relaxvm::registry::register_global(which, true).unwrap();
    let mut vm = vm_with(kept_fn);
    assert_eq!(vm.invoke("f", &[tensor()]).unwrap().as_int().unwrap(), 1);
    assert_eq!(Arc::strong_count(&marker), 2, "the registry holds the function");
    drop(relaxvm::registry::remove_global("test.vmtir.kept"));
    assert_eq!(Arc::strong_count(&marker), 1, "nothing else does, the VM included");
    drop(vm);
}

/// The address of read-only pages for [`read_only_stack_fn`] (set by its test).
static READ_ONLY_STACK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Gives `TVMBackendAnyListSetPackedArg` an argument stack in read-only pages (a hostile
/// library's constant).
unsafe extern "C" fn read_only_stack_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let stack = READ_ONLY_STACK.load(std::sync::atomic::Ordering::SeqCst) as *mut TVMFFIAny;
    // SAFETY: the stack is readable; its write faults, which the guard turns into an error.
    unsafe { RVMBackendAnyListSetPackedArg(r, 0, stack, 0) }
}

/// The same for `TVMBackendAnyListMoveFromPackedReturn`, whose "result" (zeros: None) is in
/// read-only pages, so the None it leaves behind cannot be written (attack perf/02).
unsafe extern "C" fn read_only_result_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let stack = READ_ONLY_STACK.load(std::sync::atomic::Ordering::SeqCst) as *mut TVMFFIAny;
    // SAFETY: the stack is readable; its write faults, which the guard turns into an error.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack, 0) }
}

#[test]
fn an_argument_stack_in_read_only_pages_is_a_fault_of_the_function() {
    let pages = relaxvm::storage::read_only::ReadOnlyPages::filled(4096, |_| Ok(())).unwrap();
    READ_ONLY_STACK.store(pages.as_ptr().as_ptr() as usize, std::sync::atomic::Ordering::SeqCst);
    for code in [read_only_stack_fn as SafeCall, read_only_result_fn] {
        let mut vm = vm_with(code);
        for _ in 0..3 {
            let e = vm.invoke("f", &[tensor()]).unwrap_err().to_string();
            assert!(e.contains("VM TIR function \"f\" wrote to read-only memory"), "{e}");
        }
    }
    drop(pages);
}

/// Passes register 0 to `test.vmtir.write`, which writes into the tensor it is given.
unsafe extern "C" fn writes_input_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE; 2];
    // SAFETY: room for one argument at offset 0.
    if unsafe { RVMBackendAnyListSetPackedArg(r, 0, stack.as_mut_ptr(), 0) } != 0 {
        return -1;
    }
    let (head, tail) = stack.split_at_mut(1);
    call_by_name("test.vmtir.write", head, &mut tail[0])
}

#[test]
fn a_write_into_a_read_only_input_through_its_copy_is_refused() {
    relaxvm::registry::register_global(
        PackedFunc::from_fn("test.vmtir.write", |a| {
            a[0].as_tensor()?.storage().write(0, &[9])?;
            Ok(Value::Null)
        }),
        true,
    )
    .unwrap();
    // Read-only memory that is not sealed (as a read-only DLPack import is): kernels get a copy,
    // and what they change in it cannot be written back.
    let t = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]).unwrap();
    t.storage().freeze();
    let e = vm_with(writes_input_fn).invoke("f", &[Value::Tensor(t.clone())]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e:?}");
    assert_eq!(
        e.root().to_string(),
        "VM TIR function \"f\" wrote to a tensor of shape (3,) in read-only memory (a constant or a read-only import)"
    );
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    // A writable input gets the write.
    let w = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]).unwrap();
    vm_with(writes_input_fn).invoke("f", &[Value::Tensor(w.clone())]).unwrap();
    assert_eq!(w.storage().bytes()[0], 9);
}

/// Calls `test.vmtir.again` twice through one handle, leaving the second result in register 1.
unsafe extern "C" fn called_twice_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    for _ in 0..2 {
        let mut stack = [TVMFFIAny::NONE];
        let rc = call_by_name("test.vmtir.again", &[], &mut stack[0]);
        if rc != 0 {
            return rc;
        }
        // SAFETY: the result is at offset 0.
        let rc = unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0) };
        if rc != 0 {
            return rc;
        }
    }
    0
}

#[test]
fn a_name_registered_again_during_a_call_takes_effect_at_its_next_call() {
    // The frame's resolved handles are checked against the registry's generation at each call
    // (mutant: `r.generation <= generation`, which keeps using what the handle resolved to
    // before the registry changed): the first call re-registers the name, the second call of
    // the same handle in the same run reaches the new function.
    fn second() -> PackedFunc {
        PackedFunc::from_fn("test.vmtir.again", |_| Ok(Value::Int(2)))
    }
    let first = PackedFunc::from_fn("test.vmtir.again", |_| {
        relaxvm::registry::register_global(second(), true)?;
        Ok(Value::Int(1))
    });
    relaxvm::registry::register_global(first, true).unwrap();
    let mut vm = vm_with(called_twice_fn);
    assert_eq!(vm.invoke("f", &[tensor()]).unwrap().as_int().unwrap(), 2);
    relaxvm::registry::remove_global("test.vmtir.again");
}

/// The object values registers 0 and 1 held in each run of [`kept_handle_fn`].
static KEPT: Mutex<Vec<[TVMFFIAny; 2]>> = Mutex::new(Vec::new());

/// Copies register 0 into register 1 (a new cell), and keeps both registers' values; from the
/// second run on, then stores register 1's value of the first run into register 1.
unsafe extern "C" fn kept_handle_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    // SAFETY: `r` is the register list.
    if unsafe { copy_register(r, 0, 1) } != 0 {
        return -1;
    }
    let mut kept = KEPT.lock().unwrap();
    // SAFETY: the register list has 2 values.
    let now = unsafe { std::slice::from_raw_parts(r.cast::<TVMFFIAny>(), 2) };
    kept.push([now[0], now[1]]);
    let Some(&[_, stale]) = kept.first().filter(|_| kept.len() > 1) else { return 0 };
    drop(kept);
    let mut stack = [stale];
    // SAFETY: one value at offset 0.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0) }
}

#[test]
fn an_object_kept_from_an_earlier_run_is_refused_even_where_its_cell_lives_again() {
    // A VM keeps a run's cells for its next run, so their addresses come back: the stamp an
    // object value carries tells a live cell from the same address handed out by a finished run.
    let mut vm = vm_with(kept_handle_fn);
    vm.invoke("f", &[tensor()]).unwrap();
    let e = vm.invoke("f", &[tensor()]).unwrap_err().to_string();
    assert!(e.contains("did not hand to this function in this run"), "{e}");
    let kept = KEPT.lock().unwrap();
    let (stale, second) = (kept[0][1], kept[1]);
    // The refused value is exactly the first run's: the address of a cell the second run made
    // again (for its input or its copy), with the first run's stamp.
    let live = second.iter().find(|a| a.payload == stale.payload).expect("the second run reuses the cell");
    assert_ne!(live.small_str_len, stale.small_str_len);
    drop(kept);
    // Another VM's run refuses it too.
    let e = vm_with(kept_handle_fn).invoke("f", &[tensor()]).unwrap_err().to_string();
    assert!(e.contains("did not hand to this function in this run"), "{e}");
}

/// Moves into register 1 the input's object value (register 0) with its address moved by
/// `FORGED_BY` bytes (same type and stamp).
unsafe extern "C" fn moved_address_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let mut stack = [TVMFFIAny::NONE];
    // SAFETY: `r` is the register list; one value at offset 0.
    unsafe {
        assert_eq!(RVMBackendAnyListSetPackedArg(r, 0, stack.as_mut_ptr(), 0), 0);
        stack[0].payload = stack[0].payload.wrapping_add(FORGED_BY.load(std::sync::atomic::Ordering::SeqCst));
        RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0)
    }
}

static FORGED_BY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static FORGED_LOCK: Mutex<()> = Mutex::new(());

#[test]
fn an_address_inside_a_live_cell_or_at_its_empty_neighbour_is_refused() {
    // Cells are found by arithmetic on their address (a slab of chunks): only a cell's own
    // address is one, with its run's stamp, while it is live.
    let _one = FORGED_LOCK.lock().unwrap();
    let size = std::mem::size_of::<super::cells::Cell>() as u64;
    for by in [8, size, size * 1000, 0u64.wrapping_sub(size)] {
        FORGED_BY.store(by, std::sync::atomic::Ordering::SeqCst);
        let e = vm_with(moved_address_fn).invoke("f", &[tensor()]).unwrap_err().to_string();
        assert!(e.contains("did not hand to this function"), "moved by {by}: {e}");
    }
    // The unmoved address is the input's cell: accepted.
    FORGED_BY.store(0, std::sync::atomic::Ordering::SeqCst);
    vm_with(moved_address_fn).invoke("f", &[tensor()]).unwrap();
}
