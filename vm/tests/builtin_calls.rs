//! Calls a builtin makes through the VM: `CallCtx::call_named` (each a step, as compiled code's
//! calls are) and `CallCtx::call_observed` (no step, as the paged KV cache runs its kernels, so
//! that nothing stops it between two layers); both are events of the profiler and of the
//! instrument hook, attributed to the instruction of the builtin that made them.

use relaxvm::registry::register_global;
use relaxvm::{
    Arg, CallCtx, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Value, VirtualMachine,
};
use std::sync::{Arc, Mutex, Once};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let reg = |f| register_global(f, true).unwrap();
        // A stand-in kernel, and a builtin that calls the kernel it is given twice.
        reg(PackedFunc::typed("bc.kernel", |a: i64| a * 2));
        reg(PackedFunc::typed("bc.add", |a: i64, b: i64| a + b));
        reg(PackedFunc::new("bc.builtin", |ctx: &mut CallCtx<'_>, a: &[Value]| {
            let once = ctx.call_named("bc.kernel", &a[0], &a[1..2])?;
            ctx.call_named("bc.kernel", &a[0], &[once])
        }));
        reg(PackedFunc::new("bc.observed", |ctx: &mut CallCtx<'_>, a: &[Value]| {
            let once = ctx.call_observed("bc.kernel", &a[0], &a[1..2])?;
            ctx.call_observed("bc.kernel", &a[0], &[once])
        }));
    });
}

/// main(x) = bc.builtin(bc.kernel, bc.add(x, 1)): the builtin's call is instruction 1.
fn vm() -> VirtualMachine {
    vm_calling("bc.builtin")
}

/// main(x) = BUILTIN(bc.kernel, bc.add(x, 1)).
fn vm_calling(builtin: &str) -> VirtualMachine {
    use Arg::*;
    setup();
    let call = |func, args, dst| Instruction::Call { func, args, dst };
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("main", 0, 3, 1, 3),
            FuncInfo::packed(builtin),
            FuncInfo::packed("bc.kernel"),
            FuncInfo::packed("bc.add"),
        ],
        instrs: vec![
            call(3, vec![Reg(0), Imm(1)], Some(1)),
            call(1, vec![Func(2), Reg(1)], Some(2)),
            Instruction::Ret { result: 2 },
        ],
        ..Default::default()
    })
    .unwrap();
    let mut vm = VirtualMachine::new(Arc::new(exe)).unwrap();
    vm.set_profiling_enabled(true);
    vm
}

#[test]
fn the_profiler_lists_the_kernels_a_builtin_calls_at_its_instruction() {
    let mut m = vm();
    let report = m.profile("main", &[Value::Int(3)]).unwrap();
    let names: Vec<&str> = report.rows.iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains(&"bc.builtin") && names.contains(&"bc.kernel"), "{names:?}");
    let kernel = report.rows.iter().find(|r| r.name == "bc.kernel").unwrap();
    assert_eq!(kernel.count, 2);
    let events: Vec<(&str, usize, usize, &str)> =
        report.events.iter().map(|e| (e.name.as_str(), e.depth, e.pc, e.caller.as_str())).collect();
    // Returned in order: the add, the kernel twice inside the builtin (depth 1), the builtin.
    assert_eq!(
        events,
        [
            ("bc.add", 0, 0, "main"),
            ("bc.kernel", 1, 1, "main"),
            ("bc.kernel", 1, 1, "main"),
            ("bc.builtin", 0, 1, "main")
        ]
    );
}

#[test]
fn the_instrument_hook_sees_each_kernel_call_and_a_plain_run_gives_the_same_result() {
    let mut m = vm();
    assert_eq!(m.invoke("main", &[Value::Int(3)]).unwrap().as_int().unwrap(), 16);
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    m.set_instrument(Some(Box::new(move |c| {
        l2.lock().unwrap().push(format!("{}:{}:{}@{}", c.name, c.before, c.caller, c.pc));
        Ok(relaxvm::InstrumentAction::Continue)
    })));
    assert_eq!(m.invoke("main", &[Value::Int(3)]).unwrap().as_int().unwrap(), 16);
    let log = log.lock().unwrap().clone();
    let kernel: Vec<&String> = log.iter().filter(|e| e.starts_with("bc.kernel")).collect();
    assert_eq!(
        kernel,
        ["bc.kernel:true:main@1", "bc.kernel:false:main@1", "bc.kernel:true:main@1", "bc.kernel:false:main@1"]
    );
}

#[test]
fn each_kernel_call_is_a_step_of_the_budget() {
    // Steps are counted at bytecode calls and backward jumps: main's entry is at most one, so
    // without its two kernel calls a budget of one step would do.
    let mut m = vm();
    m.limits_mut().step_budget = Some(1);
    let e = m.invoke("main", &[Value::Int(3)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StepBudget(1)), "{e}");
    m.limits_mut().step_budget = Some(3);
    assert_eq!(m.invoke("main", &[Value::Int(3)]).unwrap().as_int().unwrap(), 16);
}

#[test]
fn observed_calls_are_no_steps_but_the_hook_sees_them() {
    // A budget of one step is enough for main's entry: the builtin's two kernel calls are not
    // steps, so neither a budget nor an interrupt can stop it between them.
    let mut m = vm_calling("bc.observed");
    m.limits_mut().step_budget = Some(1);
    assert_eq!(m.invoke("main", &[Value::Int(3)]).unwrap().as_int().unwrap(), 16);
    let report = m.profile("main", &[Value::Int(3)]).unwrap();
    let kernel = report.rows.iter().find(|r| r.name == "bc.kernel").expect("the kernel is a row");
    assert_eq!(kernel.count, 2);
}
