//! Reliability: limits end in errors, never in crashes. Unbounded recursion (bytecode and
//! through native re-entry), endless loops (interrupt, step budget), impossible allocations,
//! panicking packed functions, and VMs shared between threads.
//!
//! Resident memory over many calls is measured alone in `reliability_memory.rs`.

use relaxvm::{registry, Error, ErrorKind, Executable, Limits, PackedFunc, Registry, Shape, Value, VirtualMachine};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Assembles `text` (the builtins are registered first).
fn exe(text: &str) -> Arc<Executable> {
    relaxvm_builtins::ensure_registered();
    Arc::new(relaxvm_builder::assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}")))
}

fn load(text: &str) -> VirtualMachine {
    VirtualMachine::new(exe(text)).unwrap()
}

/// Runs `f` on a new thread with a `stack`-byte native stack and returns its result: a native
/// stack overflow there aborts the whole test binary, so passing proves there was none.
fn on_stack<T: Send + 'static>(stack: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(stack).spawn(f).unwrap().join().unwrap()
}

fn root_kind(r: &relaxvm::Result<Value>) -> &ErrorKind {
    r.as_ref().map(|v| panic!("expected an error, got {v}")).unwrap_err().root().kind()
}

/// `f` calls itself forever, `count` adds one per call: recursion in bytecode.
const RECURSE: &str = "
.packed vm.builtin.int.add
@f inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %1
  call  f  in: %1  dst: %1
  ret  %1

@ok inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %1
  ret  %1
";

/// Runs `func(0)` of `text` on a thread with a `stack`-byte native stack and expects a
/// `StackOverflow`; returns the limit it reports, the VM's own limit (read by `limit`), and
/// `ok(1)` run afterwards (the VM unwound every frame and keeps working).
fn overflow_on_stack(
    stack: usize,
    text: &'static str,
    func: &'static str,
    limit: fn(&Limits) -> usize,
) -> (usize, usize, i64) {
    on_stack(stack, move || {
        let mut vm = load(text);
        let configured = limit(vm.limits());
        let r = vm.invoke(func, &[Value::Int(0)]);
        let err = match root_kind(&r) {
            ErrorKind::StackOverflow(n) => *n,
            other => panic!("expected a stack overflow, got {other}"),
        };
        (err, configured, vm.invoke("ok", &[Value::Int(1)]).unwrap().as_int().unwrap())
    })
}

#[test]
fn bytecode_recursion_stops_at_the_depth_limit_without_native_recursion() {
    let (err, depth, after) = overflow_on_stack(256 * 1024, RECURSE, "f", |c| c.max_call_depth);
    assert_eq!(depth, Limits::default().max_call_depth);
    assert_eq!(err, depth);
    assert_eq!(after, 2);
}

#[test]
fn a_lower_depth_limit_applies() {
    let mut vm = load(RECURSE);
    vm.limits_mut().max_call_depth = 50;
    let e = vm.invoke("f", &[Value::Int(0)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StackOverflow(50)), "{e}");
    assert!(e.to_string().contains("in function \"f\""), "{e}");
}

#[test]
fn the_register_stack_is_bounded() {
    // Each frame of `big` holds a million registers (16 MiB): without a bound, recursion would
    // exhaust memory long before the depth limit.
    let mut vm = load(
        "
.packed vm.builtin.int.add
@big inputs=1 regs=1048576:
  call  big  in: %0  dst: %1
  ret  %1

@ok inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %1
  ret  %1
",
    );
    assert_eq!(vm.limits().max_stack_registers, Limits::default().max_stack_registers);
    vm.limits_mut().max_stack_registers = 1 << 22;
    let r = vm.invoke("big", &[Value::Int(0)]);
    assert!(matches!(root_kind(&r), ErrorKind::Alloc { .. }), "{:?}", r.err());
    assert!(r.unwrap_err().to_string().contains("limited to 4194304 registers"));
    assert_eq!(vm.invoke("ok", &[Value::Int(1)]).unwrap().as_int().unwrap(), 2);
}

/// `g` calls itself through `vm.builtin.invoke_closure`: each level re-enters the VM natively.
const REENTER: &str = "
.packed vm.builtin.invoke_closure
.packed vm.builtin.int.add
@g inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %1
  call  vm.builtin.invoke_closure  in: %vm, f[g], %1  dst: %1
  ret  %1

@ok inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %1
  ret  %1
";

#[test]
fn native_reentry_stops_at_max_reentry_on_a_small_stack() {
    let (err, limit, after) = overflow_on_stack(2 * 1024 * 1024, REENTER, "g", |c| c.max_reentry);
    assert_eq!(limit, Limits::default().max_reentry);
    assert_eq!(err, limit);
    assert_eq!(after, 2);
}

#[test]
fn reentry_below_the_limit_returns() {
    // `count(n)` re-enters itself n times, then returns n.
    let mut vm = load(
        "
.packed vm.builtin.invoke_closure
.packed vm.builtin.int.sub
.packed vm.builtin.int.add
@count inputs=1 regs=3:
  if  %0  5
  call  vm.builtin.int.sub  in: %0, i1  dst: %1
  call  vm.builtin.invoke_closure  in: %vm, f[count], %1  dst: %2
  call  vm.builtin.int.add  in: %2, i1  dst: %2
  ret  %2
  ret  %0
",
    );
    let limit = vm.limits().max_reentry as i64;
    let n = limit - 2;
    assert_eq!(vm.invoke("count", &[Value::Int(n)]).unwrap().as_int().unwrap(), n);
    assert_eq!(
        format!("{:?}", vm.invoke("count", &[Value::Int(limit + 1)]).expect_err("an error")),
        r#"At { func: "count", pc: 2, instr: "call  vm.builtin.invoke_closure  in: %vm, f[count], %1  dst: %2", location: None, source: StackOverflow(200) }"#
    );
    assert_eq!(vm.invoke("count", &[Value::Int(3)]).unwrap().as_int().unwrap(), 3);
}

/// Endless loops: by `goto`, by an `if` jumping back, by a `goto` to itself, and by calls
/// (`ping` calls `pong` calls `ping`...; with a large depth limit the step budget stops it).
const LOOPS: &str = "
.packed vm.builtin.int.add
@spin inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %0
  goto  -1

@spin_if inputs=1 regs=2:
  call  vm.builtin.int.add  in: i0, i0  dst: %1
  if  %1  0
  ret  %1

@spin_self inputs=0 regs=1:
  goto  0

@ping inputs=1 regs=1:
  call  pong  in: %0  dst: %0
  ret  %0

@pong inputs=1 regs=1:
  call  ping  in: %0  dst: %0
  ret  %0

@ok inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %1
  ret  %1
";

/// The arguments of the endless function `name`.
fn loop_args(name: &str) -> Vec<Value> {
    if name == "spin_self" {
        vec![]
    } else {
        vec![Value::Int(0)]
    }
}

#[test]
fn interrupt_stops_endless_loops_and_the_vm_works_after() {
    for name in ["spin", "spin_if", "spin_self"] {
        let mut vm = load(LOOPS);
        // A guard, not a clock: a loop that never polls ends in this budget (tens of seconds)
        // instead of hanging the test, and the assertion below names it.
        vm.limits_mut().step_budget = Some(1 << 32);
        let handle = vm.interrupt_handle();
        let finished = Arc::new(AtomicBool::new(false));
        // Ordered by events, not by sleeping: the stopper interrupts again and again until the
        // run has returned, so some interrupt lands while the loop runs, however late either
        // thread is scheduled (an interrupt before `invoke` starts is discarded as stale).
        let stopper = std::thread::spawn({
            let finished = Arc::clone(&finished);
            move || {
                let mut sent = 0u64;
                while !finished.load(Ordering::Acquire) {
                    handle.interrupt();
                    sent += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                sent
            }
        });
        let r = vm.invoke(name, &loop_args(name));
        finished.store(true, Ordering::Release);
        assert!(stopper.join().unwrap() > 0);
        assert!(matches!(root_kind(&r), ErrorKind::Interrupted), "{name}: {:?}", r.err());
        assert_eq!(vm.invoke("ok", &[Value::Int(1)]).unwrap().as_int().unwrap(), 2, "{name}");
        // A stale interrupt does not stop the next run: that run ends in its step budget.
        vm.interrupt_handle().interrupt();
        vm.limits_mut().step_budget = Some(1_000);
        let r = vm.invoke(name, &loop_args(name));
        assert!(matches!(root_kind(&r), ErrorKind::StepBudget(1_000)), "{name}: {:?}", r.err());
    }
}

#[test]
fn the_step_budget_stops_endless_loops_and_resets_per_invocation() {
    for name in ["spin", "spin_if", "spin_self", "ping"] {
        let mut vm = load(LOOPS);
        vm.limits_mut().step_budget = Some(1_000);
        vm.limits_mut().max_call_depth = 1 << 20;
        for _ in 0..3 {
            let r = vm.invoke(name, &loop_args(name));
            assert!(matches!(root_kind(&r), ErrorKind::StepBudget(1_000)), "{name}: {:?}", r.err());
            assert_eq!(vm.invoke("ok", &[Value::Int(1)]).unwrap().as_int().unwrap(), 2);
        }
    }
}

#[test]
fn the_step_budget_counts_steps_inside_reentrant_calls() {
    let mut vm = load(REENTER);
    vm.limits_mut().step_budget = Some(50);
    let r = vm.invoke("g", &[Value::Int(0)]);
    assert!(matches!(root_kind(&r), ErrorKind::StepBudget(50)), "{:?}", r.err());
    // `tree(n)` re-enters itself twice per level: 2^n calls, none of them a bytecode `call`
    // instruction or a backward jump, and never deeper than n.
    let mut vm = load(
        "
.packed vm.builtin.invoke_closure
.packed vm.builtin.int.sub
@tree inputs=1 regs=2:
  if  %0  4
  call  vm.builtin.int.sub  in: %0, i1  dst: %1
  call  vm.builtin.invoke_closure  in: %vm, f[tree], %1  dst: void
  call  vm.builtin.invoke_closure  in: %vm, f[tree], %1  dst: void
  ret  %0
",
    );
    vm.limits_mut().step_budget = Some(10_000);
    assert_eq!(vm.invoke("tree", &[Value::Int(5)]).unwrap().as_int().unwrap(), 5);
    let r = vm.invoke("tree", &[Value::Int(60)]);
    assert!(matches!(root_kind(&r), ErrorKind::StepBudget(10_000)), "{:?}", r.err());
}

/// `alloc(size, shape, dtype)`: storage of `size` bytes, then a tensor of `shape` viewing it.
const ALLOC: &str = "
.const c[0] = str \"uint8\"
.packed vm.builtin.alloc_storage
.packed vm.builtin.alloc_tensor
@storage inputs=1 regs=2:
  call  vm.builtin.alloc_storage  in: %vm, %0, i0, c[0]  dst: %1
  ret  %1

@tensor inputs=3 regs=4:
  call  vm.builtin.alloc_storage  in: %vm, %0, i0, c[0]  dst: %3
  call  vm.builtin.alloc_tensor  in: %3, i0, %1, %2  dst: %3
  ret  %3
";

#[test]
fn impossible_allocations_are_errors() {
    const PIB: i64 = 1 << 50;
    let mut vm = load(ALLOC);
    let shape = |d: &[i64]| Value::Shape(Shape::from(d));
    for size in [Value::Int(PIB), shape(&[PIB]), shape(&[1 << 30, 1 << 30]), shape(&[i64::MAX, i64::MAX])] {
        let r = vm.invoke("storage", std::slice::from_ref(&size));
        assert!(matches!(root_kind(&r), ErrorKind::Alloc { .. }), "{size}: {:?}", r.err());
    }
    for size in [Value::Int(-1), shape(&[-8]), Value::Int(i64::MIN), shape(&[4, -1])] {
        let r = vm.invoke("storage", std::slice::from_ref(&size));
        assert!(matches!(root_kind(&r), ErrorKind::Value(_)), "{size}: {:?}", r.err());
    }
    // Tensors larger than (or negative within) a small storage.
    for dims in [&[PIB][..], &[1 << 25, 1 << 25], &[-1], &[2, -3], &[i64::MAX, 2], &[0, i64::MAX, 2]] {
        for dtype in ["float32", "uint8", "float64"] {
            let r = vm.invoke("tensor", &[Value::Int(64), shape(dims), Value::str(dtype)]);
            let e = r.expect_err("too large for the storage");
            assert!(!matches!(e.root().kind(), ErrorKind::Panic(_)), "{dims:?} {dtype}: {e}");
        }
    }
    // The VM still allocates what fits.
    let t = vm.invoke("tensor", &[Value::Int(64), shape(&[4, 4]), Value::str("float32")]).unwrap();
    assert_eq!(t.as_tensor().unwrap().shape().dims(), &[4, 4]);
}

/// `nest(n)`: a tuple nested n deep, `(((...),),)`; `chain(n)`: a closure capturing a closure
/// capturing ... n deep; `fan(n)`: `t = (t, t, t, t)` n times, 4^n items in n shared levels.
const NESTING: &str = "
.packed vm.builtin.make_tuple
.packed vm.builtin.make_closure
.packed vm.builtin.int.add
.packed vm.builtin.int.lt
@nest inputs=1 regs=4:
  call  vm.builtin.make_tuple  dst: %1
  call  vm.builtin.int.add  in: i0, i0  dst: %2
  call  vm.builtin.int.lt  in: %2, %0  dst: %3
  if  %3  4
  call  vm.builtin.make_tuple  in: %1  dst: %1
  call  vm.builtin.int.add  in: %2, i1  dst: %2
  goto  -4
  ret  %1

@chain inputs=1 regs=4:
  call  vm.builtin.make_closure  in: f[nest]  dst: %1
  call  vm.builtin.int.add  in: i0, i0  dst: %2
  call  vm.builtin.int.lt  in: %2, %0  dst: %3
  if  %3  4
  call  vm.builtin.make_closure  in: f[nest], %1  dst: %1
  call  vm.builtin.int.add  in: %2, i1  dst: %2
  goto  -4
  ret  %2

@fan inputs=1 regs=4:
  call  vm.builtin.make_tuple  dst: %1
  call  vm.builtin.int.add  in: i0, i0  dst: %2
  call  vm.builtin.int.lt  in: %2, %0  dst: %3
  if  %3  4
  call  vm.builtin.make_tuple  in: %1, %1, %1, %1  dst: %1
  call  vm.builtin.int.add  in: %2, i1  dst: %2
  goto  -4
  ret  %1
";

#[test]
fn deeply_nested_tuples_and_closures_drop_print_and_compare_without_native_recursion() {
    let n = 100_000;
    on_stack(256 * 1024, move || {
        let mut vm = load(NESTING);
        // Built and dropped inside the VM (the closure chain never leaves it)...
        assert_eq!(vm.invoke("chain", &[Value::Int(n)]).unwrap().as_int().unwrap(), n);
        // ...and handed out, compared, printed and dropped outside.
        let a = vm.invoke("nest", &[Value::Int(n)]).unwrap();
        let b = vm.invoke("nest", &[Value::Int(n)]).unwrap();
        let c = vm.invoke("nest", &[Value::Int(n - 1)]).unwrap();
        assert!(a.content_eq(&b));
        assert!(!a.content_eq(&c));
        let text = a.to_string();
        assert!(text.starts_with("((((") && text.contains("(...)") && text.len() < 1000, "{text}");
        drop((a, b, c));
        // 4^40 items in 40 shared levels: printing stops after a bounded number of items.
        let wide = vm.invoke("fan", &[Value::Int(40)]).unwrap();
        let text = wide.to_string();
        assert!(text.contains("...") && text.len() < 20_000, "{} characters", text.len());
    });
}

/// A packed function that panics, called from bytecode directly and from a re-entrant call.
#[test]
fn a_panic_in_a_registered_function_is_an_error_and_the_vm_keeps_working() {
    let mut overrides = Registry::new();
    overrides.register(PackedFunc::from_fn("test.boom", |_| panic!("boom at the top")), false).unwrap();
    overrides.register(PackedFunc::from_fn("test.boom_payload", |_| std::panic::panic_any(42u32)), false).unwrap();
    // The interpreter calls these two kinds directly, without the closure that `call` wraps.
    overrides.register(PackedFunc::binary("test.boom_binary", |_, _| panic!("binary boom")), false).unwrap();
    overrides.register(PackedFunc::select("test.boom_select", |_, _| panic!("select boom")), false).unwrap();
    let code = exe("
.packed test.boom
.packed test.boom_payload
.packed test.boom_binary
.packed test.boom_select
.packed vm.builtin.invoke_closure
.packed vm.builtin.int.add
@direct inputs=1 regs=2:
  call  test.boom  in: %0  dst: %1
  ret  %1

@payload inputs=0 regs=1:
  call  test.boom_payload  dst: %0
  ret  %0

@nested inputs=1 regs=2:
  call  vm.builtin.invoke_closure  in: %vm, f[direct], %0  dst: %1
  ret  %1

@binary inputs=1 regs=2:
  call  test.boom_binary  in: %0, i1  dst: %1
  ret  %1

@select inputs=1 regs=2:
  call  test.boom_select  in: %0  dst: %1
  ret  %1

@ok inputs=1 regs=2:
  call  vm.builtin.int.add  in: %0, i1  dst: %1
  ret  %1
");
    let mut vm = VirtualMachine::with_overrides(code, &overrides).unwrap();
    for _ in 0..3 {
        let e = vm.invoke("direct", &[Value::Int(1)]).unwrap_err();
        assert!(
            matches!(e.root().kind(), ErrorKind::Panic(m) if m.contains("test.boom") && m.contains("boom at the top")),
            "{e}"
        );
        assert!(e.to_string().contains("in function \"direct\""), "{e}");
        let e = vm.invoke("payload", &[]).unwrap_err();
        assert!(matches!(e.root().kind(), ErrorKind::Panic(m) if m.contains("test.boom_payload")), "{e}");
        let e = vm.invoke("nested", &[Value::Int(1)]).unwrap_err();
        assert!(matches!(e.root().kind(), ErrorKind::Panic(_)), "{e}");
        for (func, name, msg) in
            [("binary", "test.boom_binary", "binary boom"), ("select", "test.boom_select", "select boom")]
        {
            let e = vm.invoke(func, &[Value::Int(1)]).unwrap_err();
            assert!(matches!(e.root().kind(), ErrorKind::Panic(m) if m.contains(name) && m.contains(msg)), "{e}");
            assert!(e.to_string().contains(&format!("in function \"{func}\"")), "{e}");
        }
        assert_eq!(vm.invoke("ok", &[Value::Int(41)]).unwrap().as_int().unwrap(), 42);
    }
}

#[test]
fn a_panic_in_the_instrument_hook_is_an_error_and_the_hook_stays() {
    let mut vm = load(RECURSE);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    vm.set_instrument(Some(Box::new(move |_| {
        if seen.fetch_add(1, Ordering::Relaxed) == 0 {
            panic!("hook boom");
        }
        Ok(relaxvm::InstrumentAction::Continue)
    })));
    let e = vm.invoke("ok", &[Value::Int(1)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Panic(m) if m.contains("hook boom")), "{e}");
    assert_eq!(vm.invoke("ok", &[Value::Int(1)]).unwrap().as_int().unwrap(), 2);
    assert_eq!(calls.load(Ordering::Relaxed), 3, "the hook ran again, before and after the call");
}

#[test]
fn a_panic_in_a_globally_registered_function_is_an_error() {
    registry::register_global(
        PackedFunc::typed("reliability.global_boom", |x: i64| -> i64 {
            if x > 0 {
                panic!("positive")
            }
            x
        }),
        true,
    )
    .unwrap();
    let mut vm = load(
        "
.packed reliability.global_boom
@f inputs=1 regs=2:
  call  reliability.global_boom  in: %0  dst: %1
  ret  %1
",
    );
    let e: Error = vm.invoke("f", &[Value::Int(1)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Panic(m) if m.contains("positive")), "{e}");
    assert_eq!(vm.invoke("f", &[Value::Int(-5)]).unwrap().as_int().unwrap(), -5);
}

/// `fib(n)` by double recursion, and `sum(n)` = 0 + 1 + ... + (n-1) by a loop.
const WORK: &str = "
.packed vm.builtin.int.lt
.packed vm.builtin.int.sub
.packed vm.builtin.int.add
@fib inputs=1 regs=5:
  call  vm.builtin.int.lt  in: %0, i2  dst: %1
  if  %1  2
  ret  %0
  call  vm.builtin.int.sub  in: %0, i1  dst: %2
  call  fib  in: %2  dst: %3
  call  vm.builtin.int.sub  in: %0, i2  dst: %2
  call  fib  in: %2  dst: %4
  call  vm.builtin.int.add  in: %3, %4  dst: %1
  ret  %1

@sum inputs=1 regs=4:
  call  vm.builtin.int.add  in: i0, i0  dst: %1
  call  vm.builtin.int.add  in: i0, i0  dst: %2
  call  vm.builtin.int.lt  in: %2, %0  dst: %3
  if  %3  4
  call  vm.builtin.int.add  in: %1, %2  dst: %1
  call  vm.builtin.int.add  in: %2, i1  dst: %2
  goto  -4
  ret  %1
";

fn fib(n: i64) -> i64 {
    if n < 2 {
        n
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

#[test]
fn one_executable_shared_by_eight_threads_each_with_a_vm() {
    let code = exe(WORK);
    let threads: Vec<_> = (0..8i64)
        .map(|t| {
            let code = Arc::clone(&code);
            std::thread::spawn(move || {
                let mut vm = VirtualMachine::new(code).unwrap();
                for i in 0..200 {
                    let n = (t + i) % 16;
                    assert_eq!(vm.invoke("fib", &[Value::Int(n)]).unwrap().as_int().unwrap(), fib(n));
                    let m = t * 100 + i;
                    assert_eq!(vm.invoke("sum", &[Value::Int(m)]).unwrap().as_int().unwrap(), m * (m - 1) / 2);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn one_vm_behind_a_mutex_serves_eight_threads() {
    let vm = Arc::new(Mutex::new(VirtualMachine::new(exe(WORK)).unwrap()));
    let threads: Vec<_> = (0..8i64)
        .map(|t| {
            let vm = Arc::clone(&vm);
            std::thread::spawn(move || {
                for i in 0..200 {
                    let n = (t * 3 + i) % 18;
                    let got = vm.lock().unwrap().invoke("fib", &[Value::Int(n)]).unwrap().as_int().unwrap();
                    assert_eq!(got, fib(n));
                    let m = t * 50 + i;
                    let got = vm.lock().unwrap().invoke("sum", &[Value::Int(m)]).unwrap().as_int().unwrap();
                    assert_eq!(got, m * (m - 1) / 2);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(vm.lock().unwrap().invoke("fib", &[Value::Int(20)]).unwrap().as_int().unwrap(), 6765);
}
