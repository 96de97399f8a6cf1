//! Long builtins stop when the VM is interrupted: one huge matmul is not one uninterruptible
//! step.

use crate::common::{registry, tensor};
use relaxvm::{Arg, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, VirtualMachine};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn a_huge_matmul_stops_at_an_interrupt_and_the_vm_works_after() {
    relaxvm_builtins::ensure_registered();
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 2, 2, 3), FuncInfo::packed("vm.op.matmul")],
        instrs: vec![
            Instruction::Call { func: 1, args: vec![Arg::Reg(0), Arg::Reg(1)], dst: Some(2) },
            Instruction::Ret { result: 2 },
        ],
        ..Default::default()
    })
    .unwrap();
    let mut vm = VirtualMachine::with_overrides(Arc::new(exe), registry()).unwrap();
    // 3000^3 multiply-adds: tens of milliseconds even on a fast many-core machine, while the
    // presser below interrupts within microseconds of the run's start.
    let n = 3000usize;
    let big = tensor(&[n as i64, n as i64], vec![1.0f32; n * n]);
    let handle = vm.interrupt_handle();
    let done = Arc::new(AtomicBool::new(false));
    let presser = {
        let done = done.clone();
        std::thread::spawn(move || {
            // Again and again until the call returns: the flag is reset when a call starts.
            // No pause between presses: a pause longer than the multiply on a fast machine
            // would let it finish first (a sleep-ordered race).
            while !done.load(Ordering::Relaxed) {
                handle.interrupt();
                std::thread::yield_now();
            }
        })
    };
    let e = vm.invoke("main", &[big.clone(), big]).unwrap_err();
    done.store(true, Ordering::Relaxed);
    presser.join().unwrap();
    assert!(matches!(e.root().kind(), ErrorKind::Interrupted), "{e}");
    let small = tensor(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    let r = vm.invoke("main", &[small.clone(), small]).unwrap();
    assert_eq!(r.as_tensor().unwrap().to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
}
