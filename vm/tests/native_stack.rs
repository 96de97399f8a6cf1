//! The native stack: calls back into the VM from packed functions nest on the thread's stack,
//! so every entry measures what is left and ends with an error, not a SIGSEGV; and instrumented
//! bytecode calls use the heap frame stack like uninstrumented ones.

use relaxvm::registry::register_global;
use relaxvm::{
    Arg, CallCtx, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, InstrumentAction, PackedFunc, Value,
    VirtualMachine,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_global(PackedFunc::typed("ns.sub", |a: i64, b: i64| a - b), true).unwrap();
        register_global(PackedFunc::typed("ns.le", |a: i64, b: i64| a <= b), true).unwrap();
        // Calls its first argument (a function) with the rest: a call back into the VM.
        register_global(
            PackedFunc::new("ns.call", |ctx: &mut CallCtx<'_>, a: &[Value]| ctx.call(&a[0], &a[1..])),
            true,
        )
        .unwrap();
    });
}

/// `down(n)`: 0 when n <= 0, else `down(n - 1)` — through `ns.call` when `reenter`, else as a
/// direct bytecode call.
fn down(reenter: bool) -> VirtualMachine {
    use Arg::*;
    setup();
    let recurse = if reenter {
        Instruction::Call { func: 3, args: vec![Func(0), Reg(2)], dst: Some(1) }
    } else {
        Instruction::Call { func: 0, args: vec![Reg(2)], dst: Some(1) }
    };
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("down", 0, 6, 1, 3),
            FuncInfo::packed("ns.le"),
            FuncInfo::packed("ns.sub"),
            FuncInfo::packed("ns.call"),
        ],
        instrs: vec![
            Instruction::Call { func: 1, args: vec![Reg(0), Imm(0)], dst: Some(1) },
            Instruction::If { cond: 1, false_offset: 2 },
            Instruction::Ret { result: 0 },
            Instruction::Call { func: 2, args: vec![Reg(0), Imm(1)], dst: Some(2) },
            recurse,
            Instruction::Ret { result: 1 },
        ],
        ..Default::default()
    })
    .unwrap();
    VirtualMachine::new(Arc::new(exe)).unwrap()
}

#[test]
fn deep_reentry_on_a_small_stack_is_an_error_not_a_crash() {
    let outcome = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let mut vm = down(true);
            vm.limits_mut().max_reentry = usize::MAX;
            vm.invoke("down", &[Value::Int(1_000_000)])
        })
        .unwrap()
        .join()
        .expect("the thread ended by itself");
    let e = outcome.unwrap_err();
    assert!(
        matches!(e.root().kind(), ErrorKind::NativeStack { needed, .. } if *needed == relaxvm::vm::MIN_NATIVE_STACK),
        "{e}"
    );
    let ErrorKind::NativeStack { remaining, needed } = e.root().kind() else { unreachable!() };
    assert_eq!(
        e.root().to_string(),
        format!(
            "only {remaining} bytes of native stack are left, fewer than the {needed} a call into the VM needs: \
             calls back into the VM are nested too deeply for this thread's stack"
        )
    );
}

#[test]
fn instrumented_recursion_uses_frames_not_reentry() {
    let mut vm = down(false);
    vm.limits_mut().max_reentry = 200;
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    vm.set_instrument(Some(Box::new(move |c| {
        if c.name == "down" && !c.before {
            assert!(matches!(c.ret, Some(Value::Int(0))));
            counter.fetch_add(1, Ordering::Relaxed);
        }
        Ok(InstrumentAction::Continue)
    })));
    assert_eq!(vm.invoke("down", &[Value::Int(500)]).unwrap().as_int().unwrap(), 0);
    assert_eq!(seen.load(Ordering::Relaxed), 500, "one after-hook per bytecode call");
    // A skipped bytecode call leaves null in its destination.
    vm.set_instrument(Some(Box::new(|c| {
        Ok(if c.name == "down" && c.before { InstrumentAction::Skip } else { InstrumentAction::Continue })
    })));
    assert!(matches!(vm.invoke("down", &[Value::Int(3)]).unwrap(), Value::Null));
}
