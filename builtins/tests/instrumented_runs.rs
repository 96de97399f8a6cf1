//! Profiled and traced runs execute what plain runs execute: every program of the test corpus
//! (the `interp` fuzz corpus and a few hundred generated programs, through the generator of
//! `support/gen_program.rs`, and the shape-heap program TVM emits) runs plain, under
//! `VirtualMachine::profile` and under `VirtualMachine::trace`, and the three runs must give
//! the same results (or errors) and call the same builtins in the same order — with the same
//! specialised version at each call site (the specialised shape-heap and allocation builtins
//! are wrapped to log which version ran).

#[path = "support/gen_program.rs"]
#[allow(dead_code)]
mod gen_program;

use arbitrary::Unstructured;
use relaxvm::registry::Registry;
use relaxvm::trace::TraceOptions;
use relaxvm::{Arg, Executable, ExecutableParts, FuncInfo, Instruction, Limits, PackedFunc, Value, VirtualMachine};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The builtins with specializers: their calls are logged with the version that ran.
const SPECIALISED: &[&str] = &[
    "vm.builtin.alloc_storage",
    "vm.builtin.alloc_tensor",
    "vm.builtin.alloc_shape_heap",
    "vm.builtin.match_shape",
    "vm.builtin.make_shape",
];

/// Which builtins ran, in order, with `[specialised]` or `[general]`.
type Log = Arc<Mutex<Vec<String>>>;

/// `f` (a registered builtin), logging each call to `log` with the version that ran: the
/// general function, or what its specializer made for a call site.
fn logged(f: PackedFunc, log: &Log) -> PackedFunc {
    let name = f.name().to_string();
    let (general, special_log, log) = (f.clone(), Arc::clone(log), Arc::clone(log));
    let general_name = name.clone();
    PackedFunc::new(&name, move |ctx, args| {
        log.lock().unwrap().push(format!("{general_name}[general]"));
        general.call(ctx, args)
    })
    .with_cost(f.cost())
    .with_specializer(move |fixed| {
        let special = f.specialize(fixed)?;
        let (log, name) = (Arc::clone(&special_log), name.clone());
        let reads = special.reads_first();
        let wrapped = PackedFunc::new(&name.clone(), move |ctx, args| {
            log.lock().unwrap().push(format!("{name}[specialised]"));
            special.call(ctx, args)
        });
        Some(match reads {
            Some(n) => wrapped.reading_first(n),
            None => wrapped,
        })
    })
}

/// A VM of `exe` whose specialised builtins log to a fresh log, with the generator's limits.
fn vm(exe: &Arc<Executable>) -> Option<(VirtualMachine, Log)> {
    let log = Log::default();
    let mut overrides = Registry::default();
    for name in SPECIALISED {
        let f = relaxvm::registry::global().get(name).expect("registered").clone();
        overrides.register(logged(f, &log), true).unwrap();
    }
    let mut vm = VirtualMachine::with_overrides(Arc::clone(exe), &overrides).ok()?;
    *vm.limits_mut() = Limits {
        step_budget: Some(gen_program::STEP_BUDGET),
        max_call_depth: gen_program::MAX_CALL_DEPTH,
        ..Limits::default()
    };
    vm.set_profiling_enabled(true);
    Some((vm, log))
}

/// A result as the comparison sees it: its text (a tensor's values, a tuple's items), or the
/// error's message.
fn outcome(r: relaxvm::Result<Value>) -> String {
    match r {
        Ok(v) => format!("ok {} = {v}", v.describe()),
        Err(e) => format!("error {e}"),
    }
}

/// How the three ways of running compare on one program: `None` when the VM cannot be made
/// (a builtin the program names is not registered), else how many calls ran.
fn compare(parts: ExecutableParts, calls: &[(String, Vec<Value>)], what: &str) -> Option<usize> {
    let exe = Arc::new(Executable::from_parts(parts).ok()?);
    let (mut plain, plain_log) = vm(&exe)?;
    let (mut profiled, profiled_log) = vm(&exe)?;
    let (mut traced, traced_log) = vm(&exe)?;
    for (name, args) in calls {
        let p = outcome(plain.invoke(name, args));
        let f = outcome(profiled.profile(name, args).map(|_| Value::Null));
        let t = outcome(traced.trace(name, args, TraceOptions::default()).map(|t| t.result).map_err(|e| e.error));
        // The profile's report has no result: its error, or that it ran, is compared.
        let p_ran = if p.starts_with("ok") { "ok".to_string() } else { p.clone() };
        let f_ran = if f.starts_with("ok") { "ok".to_string() } else { f.clone() };
        assert_eq!(p_ran, f_ran, "{what}: {name} plain and profiled");
        assert_eq!(p, t, "{what}: {name} plain and traced");
        let logs = [&plain_log, &profiled_log, &traced_log].map(|l| std::mem::take(&mut *l.lock().unwrap()));
        assert_eq!(logs[0], logs[1], "{what}: {name}: the builtins a plain and a profiled run call");
        assert_eq!(logs[0], logs[2], "{what}: {name}: the builtins a plain and a traced run call");
    }
    Some(calls.len())
}

#[test]
fn the_fuzz_corpus_and_generated_programs_run_the_same_plain_profiled_and_traced() {
    relaxvm_builtins::ensure_registered();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/interp");
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    inputs.sort();
    inputs.extend(
        (0..300u64).map(|seed| (format!("seed {seed}"), gen_program::noise(seed, 64 + (seed as usize % 7) * 128))),
    );
    let (mut programs, mut calls) = (0, 0);
    for (what, data) in &inputs {
        let Ok(program) = gen_program::generate(&mut Unstructured::new(data)) else { continue };
        if let Some(n) = compare(program.parts, &program.calls, what) {
            programs += 1;
            calls += n;
        }
    }
    // The comparison ran on most of them (a few do not pass the verifier).
    assert!(programs * 10 >= inputs.len() * 9, "{programs} of {} programs compared", inputs.len());
    assert!(calls >= programs, "{calls} calls");
}

#[test]
fn the_shape_heap_program_tvm_emits_runs_its_specialised_sites_in_every_run() {
    // f(x): heap = alloc_shape_heap(2); match_shape(x, heap, 1 dims, store n in slot 0);
    // slot 1 = n * 2 (make_shape from the heap); return make_shape(heap, [slot 0, slot 1]);
    // called twice (the sites' caches serve the second call).
    relaxvm_builtins::ensure_registered();
    use Arg::*;
    let funcs = vec![
        FuncInfo::bytecode("f", 0, 4, 1, 4),
        FuncInfo::packed("vm.builtin.alloc_shape_heap"),
        FuncInfo::packed("vm.builtin.match_shape"),
        FuncInfo::packed("vm.builtin.make_shape"),
    ];
    let instrs = vec![
        Instruction::Call { func: 1, args: vec![VmState, Imm(2)], dst: Some(1) },
        // match_shape(x, heap, ndim 1, "store to heap" (1) into slot 0, err_ctx)
        Instruction::Call { func: 2, args: vec![Reg(0), Reg(1), Imm(1), Imm(1), Imm(0), Void], dst: None },
        // make_shape(heap, 2 dims: slot 0 (code 1), immediate 16 (code 0))
        Instruction::Call { func: 3, args: vec![Reg(1), Imm(2), Imm(1), Imm(0), Imm(0), Imm(16)], dst: Some(2) },
        Instruction::Ret { result: 2 },
    ];
    let x = Value::Tensor(relaxvm::Tensor::from_vec([3i64], vec![1.0f32, 2.0, 3.0]).unwrap());
    let calls = vec![("f".to_string(), vec![x.clone()]), ("f".to_string(), vec![x])];
    let parts = ExecutableParts { funcs, instrs, ..Default::default() };
    let exe = Arc::new(Executable::from_parts(parts.clone()).expect("verifies"));
    // The plain run's results and its log, which the comparison holds the others to.
    let (mut plain, log) = vm(&exe).unwrap();
    assert_eq!(outcome(plain.invoke("f", &calls[0].1)), "ok shape (3, 16) = (3, 16)");
    let ran = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(
        ran,
        ["alloc_shape_heap", "match_shape", "make_shape"].map(|b| format!("vm.builtin.{b}[specialised]")),
        "every site of this program is specialised"
    );
    assert_eq!(compare(parts, &calls, "the shape-heap program"), Some(2));
}
