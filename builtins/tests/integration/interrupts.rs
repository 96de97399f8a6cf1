//! Long builtins stop when the VM is interrupted: one huge matmul is not one uninterruptible
//! step.

use crate::common::{registry, tensor};
use relaxvm::{Arg, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, VirtualMachine};
use std::sync::atomic::{AtomicUsize, Ordering};
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
    // The interrupt is pressed from inside the multiply: by the poll hook, which the VM calls
    // only where a long operation polls (this two-instruction program never reaches the
    // interpreter's own poll). The order is the events', not the machine's speed: the first
    // poll of the multiply presses, and that poll sees the press.
    let n = 3000usize;
    let big = tensor(&[n as i64, n as i64], vec![1.0f32; n * n]);
    let handle = vm.interrupt_handle();
    let polls = Arc::new(AtomicUsize::new(0));
    let seen = polls.clone();
    vm.set_poll_hook(Some(Arc::new(move || {
        seen.fetch_add(1, Ordering::SeqCst);
        handle.interrupt();
        Ok(())
    })));
    let e = vm.invoke("main", &[big.clone(), big]).unwrap_err();
    assert_eq!(polls.load(Ordering::SeqCst), 1, "stopped at the multiply's first poll");
    vm.set_poll_hook(None);
    assert!(matches!(e.root().kind(), ErrorKind::Interrupted), "{e}");
    let small = tensor(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    let r = vm.invoke("main", &[small.clone(), small]).unwrap();
    assert_eq!(r.as_tensor().unwrap().to_vec::<f32>().unwrap(), [7.0, 10.0, 15.0, 22.0]);
}
