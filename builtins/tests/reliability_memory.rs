//! Resident memory stays flat over many calls: closures made and invoked, packed callbacks from
//! the host, and tensors allocated and dropped, 100,000 times. A leak of even a few bytes per
//! call would show as megabytes.
//!
//! This is its own test binary so that no other test allocates while it measures.
#![cfg(target_os = "linux")]

use relaxvm::{PackedFunc, Value, VirtualMachine};
use std::sync::Arc;

/// Resident memory in bytes (`VmRSS` of `/proc/self/status`, which `/proc/self/statm`
/// reports in pages).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// `step(x, cb)`: `make_closure(add, x)` invoked on 1, the host callback `cb` invoked on that,
/// a tensor allocated and added to itself, the result and the tensor in a tuple; returns the
/// tuple's first item, `cb(x + 1)`.
const PROGRAM: &str = "
.const c[0] = str \"uint8\"
.const c[1] = shape (8, 8)
.const c[2] = str \"float32\"
.packed vm.builtin.make_closure
.packed vm.builtin.invoke_closure
.packed vm.builtin.alloc_storage
.packed vm.builtin.alloc_tensor
.packed vm.builtin.make_tuple
.packed vm.builtin.tuple_getitem
.packed vm.op.add
.packed vm.builtin.int.add

@step inputs=2 regs=8:
  call  vm.builtin.make_closure  in: f[add], %0  dst: %2
  call  vm.builtin.invoke_closure  in: %vm, %2, i1  dst: %3
  call  vm.builtin.invoke_closure  in: %vm, %1, %3  dst: %4
  call  vm.builtin.alloc_storage  in: %vm, i256, i0, c[0]  dst: %5
  call  vm.builtin.alloc_tensor  in: %5, i0, c[1], c[2]  dst: %6
  call  vm.op.add  in: %6, %6  dst: %6
  call  vm.builtin.make_tuple  in: %4, %6, %2  dst: %7
  call  vm.builtin.tuple_getitem  in: %7, i0  dst: %7
  ret  %7

@add inputs=2 regs=3:
  call  vm.builtin.int.add  in: %0, %1  dst: %2
  ret  %2
";

#[test]
fn resident_memory_stays_flat_over_100k_calls() {
    relaxvm_builtins::ensure_registered();
    let exe = Arc::new(relaxvm_builder::assemble(PROGRAM).unwrap());
    let mut vm = VirtualMachine::new(exe).unwrap();
    let cb = Value::packed(PackedFunc::typed("host.double", |x: i64| x * 2));
    let add = vm.get_function("add").unwrap();
    let mut round = |i: i64| {
        let r = vm.invoke("step", &[Value::Int(i), cb.clone()]).unwrap();
        assert_eq!(r.as_int().unwrap(), (i + 1) * 2);
        // A bytecode function called as a closure from the host side too.
        let r = vm.invoke_closure(&add, &[Value::Int(i), Value::Int(1)]).unwrap();
        assert_eq!(r.as_int().unwrap(), i + 1);
    };
    for i in 0..5_000 {
        round(i);
    }
    let warm = rss();
    for i in 0..100_000 {
        round(i);
    }
    let after = rss();
    let grown = after.saturating_sub(warm);
    assert!(grown < 2 << 20, "resident memory grew by {grown} bytes over 100,000 calls ({warm} -> {after})");
    eprintln!("resident memory: {warm} -> {after} bytes over 100,000 calls");
}
