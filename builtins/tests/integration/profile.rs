//! VirtualMachine::profile from Rust: off unless asked for, counts equal executed calls, rows
//! and overhead add up, a failing run restores the instrument hook.

use crate::common::{looping, registry, tensor};
use relaxvm::profile::{CallKind, SortBy};
use relaxvm::{ErrorKind, Value, VirtualMachine};
use std::sync::{Arc, Mutex};

fn vm(profile: bool) -> VirtualMachine {
    relaxvm_builtins::ensure_registered();
    let mut vm = VirtualMachine::with_overrides(looping(), registry()).unwrap();
    vm.set_profiling_enabled(profile);
    vm
}

#[test]
fn profiling_must_be_enabled() {
    let e = vm(false).profile("main", &[Value::Int(1), Value::Int(1)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Value(m) if m.contains("set_profiling_enabled(true)")), "{e}");
}

#[test]
fn counts_times_and_forms() {
    let x = tensor(&[3], vec![1.0f32, 2.0, 3.0]);
    let report = vm(true).profile("main", &[x, Value::Int(4)]).unwrap();
    let row = |n: &str| report.rows.iter().find(|r| r.name == n).unwrap_or_else(|| panic!("no row {n}"));
    assert_eq!((row("twice").count, row("twice").kind), (4, CallKind::Vm));
    assert_eq!((row("vm.op.add").count, row("vm.op.add").kind), (4, CallKind::Builtin));
    assert_eq!(row("vm.builtin.int.sub").count, 4);
    assert_eq!(row("vm.op.add").shapes, vec!["float32(3,), float32(3,)".to_string()]);
    let last = report.rows.last().unwrap();
    assert_eq!((last.name.as_str(), last.kind), ("(vm overhead)", CallKind::Overhead));
    let leaves: u64 = report.rows.iter().filter(|r| r.kind != CallKind::Vm).map(|r| r.total_ns).sum();
    assert_eq!(leaves, report.total_ns, "leaf rows and the overhead row make up the run");
    // twice's inclusive time holds its add's
    assert!(row("twice").total_ns >= row("vm.op.add").total_ns);
    assert_eq!(report.events.len(), 12);
    assert!(report.events.iter().filter(|e| e.name == "vm.op.add").all(|e| e.depth == 1 && e.caller == "twice"));
    let table = report.table(SortBy::Name, None);
    assert!(table.lines().nth(2).unwrap().starts_with("(vm overhead)"), "{table}");
    assert_eq!(report.csv().lines().count(), report.rows.len() + 1);
    assert!(report.json().contains("\"function\":\"main\""), "{}", report.json());
    assert!(report.chrome_trace().contains("\"ph\":\"X\""));
    assert!("bogus".parse::<SortBy>().is_err_and(|e| e.to_string().contains("sort_by")));
}

#[test]
fn a_failing_run_restores_the_instrument_and_the_vm_works() {
    let mut vm = vm(true);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    vm.set_instrument(Some(Box::new(move |c| {
        log.lock().unwrap().push(c.name.to_string());
        Ok(relaxvm::InstrumentAction::Continue)
    })));
    // vm.op.add of a str fails inside twice.
    let e = vm.profile("main", &[Value::str("x"), Value::Int(1)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Type { .. }), "{e}");
    assert!(seen.lock().unwrap().is_empty(), "the user's hook was set aside during the run");
    let out = vm.invoke("main", &[Value::Int(2), Value::Int(1)]).unwrap();
    assert_eq!(out.to_string(), "4");
    assert!(seen.lock().unwrap().contains(&"vm.op.add".to_string()), "and is back after it");
}
