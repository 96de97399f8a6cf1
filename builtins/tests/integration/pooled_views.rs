//! Pooled allocation (TVM's default `memory_cfg`): the storages and tensor headers a call site
//! made at the last call come back at the next only when nothing else holds them — never a
//! result the caller kept, a value in use by an outer frame or a re-entrant call, or a tensor
//! another thread holds.

use crate::common::{dtype, shape, tensor};
use relaxvm::{
    Allocator, Arg, DataType, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Registry, Tensor, Value,
    VirtualMachine,
};
use std::sync::{mpsc, Arc};
use Arg::*;

fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

/// `main(x, y)`: `(g(x), invoke_closure(g, y))`, where `g(x)` allocates storage and a tensor
/// view of it at its two sites, fills the view from `x` and returns it: the second `g` runs
/// re-entrantly while the first one's result is alive in `main`'s registers.
fn program() -> VirtualMachine {
    let mut reg = Registry::new();
    relaxvm_builtins::register_all(&mut reg).unwrap();
    // t.fill(x, out): out[..] = x[..], as a compiled kernel writes its destination.
    let fill = PackedFunc::from_fn("t.fill", |a| {
        let (x, out) = (a[0].as_tensor()?, a[1].as_tensor()?);
        out.storage().write(out.byte_offset(), &x.storage().bytes()[x.byte_offset()..x.byte_offset() + x.nbytes()])?;
        Ok(Value::Null)
    });
    reg.register(fill, true).unwrap();
    let funcs = vec![
        FuncInfo::bytecode("main", 0, 4, 2, 5),
        FuncInfo::bytecode("g", 4, 8, 1, 3),
        FuncInfo::packed("vm.builtin.alloc_storage"),
        FuncInfo::packed("vm.builtin.alloc_tensor"),
        FuncInfo::packed("t.fill"),
        FuncInfo::packed("vm.builtin.invoke_closure"),
        FuncInfo::packed("vm.builtin.make_tuple"),
        FuncInfo::bytecode("clear", 8, 10, 0, 1),
        FuncInfo::packed("vm.builtin.memory_manager.clear"),
    ];
    let instrs = vec![
        call(1, vec![Reg(0)], Some(2)),
        call(5, vec![VmState, Func(1), Reg(1)], Some(3)),
        call(6, vec![Reg(2), Reg(3)], Some(4)),
        Instruction::Ret { result: 4 },
        call(2, vec![VmState, Const(0), Imm(0), Const(1)], Some(1)),
        call(3, vec![Reg(1), Imm(0), Const(2), Const(3)], Some(2)),
        call(4, vec![Reg(0), Reg(2)], None),
        Instruction::Ret { result: 2 },
        call(8, vec![], Some(0)),
        Instruction::Ret { result: 0 },
    ];
    let constants = vec![shape(&[16]), dtype(DataType::U8), shape(&[4]), dtype(DataType::F32)];
    let parts = ExecutableParts { funcs, instrs, constants, ..Default::default() };
    VirtualMachine::with_overrides(Arc::new(Executable::from_parts(parts).unwrap()), &reg).unwrap()
}

fn run(vm: &mut VirtualMachine, x: f32, y: f32) -> (Tensor, Tensor) {
    let out = vm.invoke("main", &[tensor(&[4], vec![x; 4]), tensor(&[4], vec![y; 4])]).unwrap();
    let items = out.as_tuple().unwrap();
    (items[0].as_tensor().unwrap().clone(), items[1].as_tensor().unwrap().clone())
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn a_reentrant_call_never_gets_what_the_outer_frame_holds() {
    let mut vm = program();
    for k in 0..4 {
        let (a, b) = run(&mut vm, k as f32, 10.0 + k as f32);
        assert!(!a.ptr_eq(&b) && !a.shares_storage(&b));
        assert_eq!((values(&a), values(&b)), (vec![k as f32; 4], vec![10.0 + k as f32; 4]));
    }
}

#[test]
fn headers_and_storage_come_back_once_the_caller_lets_go() {
    let mut vm = program();
    let (a, b) = run(&mut vm, 1.0, 2.0);
    let (header, storage) = (b.object_id(), b.storage().as_ptr());
    drop((a, b));
    // Blocks of the same size, kept meanwhile, take whatever memory was freed: the same
    // addresses below are the same objects, kept by the sites, not new ones at a freed address.
    let _taken: Vec<Tensor> =
        (0..8).map(|_| Tensor::zeros(vec![16], DataType::U8, Default::default()).unwrap()).collect();
    // Each site keeps what it made last (the re-entrant call's), which the first call now gets.
    let (a, b) = run(&mut vm, 3.0, 4.0);
    assert_eq!((a.object_id(), a.storage().as_ptr()), (header, storage));
    assert_eq!((values(&a), values(&b)), (vec![3.0; 4], vec![4.0; 4]));
}

#[test]
fn a_result_the_caller_keeps_is_never_changed() {
    let mut vm = program();
    let kept = run(&mut vm, 1.0, 2.0);
    let kept_tuple = vm.invoke("main", &[tensor(&[4], vec![5.0f32; 4]), tensor(&[4], vec![6.0f32; 4])]).unwrap();
    for k in 0..8 {
        let (a, b) = run(&mut vm, k as f32, -(k as f32));
        for t in [&kept.0, &kept.1] {
            assert!(!a.ptr_eq(t) && !b.ptr_eq(t) && !a.shares_storage(t) && !b.shares_storage(t));
        }
        assert_eq!((values(&a), values(&b)), (vec![k as f32; 4], vec![-(k as f32); 4]));
    }
    assert_eq!((values(&kept.0), values(&kept.1)), (vec![1.0; 4], vec![2.0; 4]));
    let items = kept_tuple.as_tuple().unwrap();
    assert_eq!(values(items[0].as_tensor().unwrap()), vec![5.0; 4]);
    assert_eq!((kept.0.shape().dims(), kept.0.byte_offset()), (&[4i64][..], 0));
}

#[test]
fn a_tensor_another_thread_holds_is_never_handed_out_again() {
    let mut vm = program();
    let (a, b) = run(&mut vm, 7.0, 8.0);
    let (go, wait) = mpsc::channel::<()>();
    let (ready, started) = mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        ready.send(()).unwrap();
        wait.recv().unwrap();
        (values(&a), values(&b))
    });
    started.recv().unwrap();
    for k in 0..16 {
        let (x, y) = run(&mut vm, k as f32, k as f32 + 0.5);
        assert_eq!((values(&x), values(&y)), (vec![k as f32; 4], vec![k as f32 + 0.5; 4]));
    }
    go.send(()).unwrap();
    assert_eq!(reader.join().unwrap(), (vec![7.0; 4], vec![8.0; 4]));
}

#[test]
fn the_naive_allocator_keeps_nothing() {
    let mut vm = program();
    vm.set_allocator(Allocator::Naive);
    assert_eq!(vm.allocator(), Allocator::Naive);
    let (a, b) = run(&mut vm, 1.0, 2.0);
    let header = b.object_id();
    let storage = b.storage().as_ptr();
    drop((a, b));
    // What was freed is taken meanwhile: a site that kept nothing must allocate elsewhere.
    let _taken: Vec<Tensor> =
        (0..8).map(|_| Tensor::zeros(vec![16], DataType::U8, Default::default()).unwrap()).collect();
    let _headers: Vec<Tensor> =
        (0..8).map(|_| Tensor::zeros(vec![4], DataType::F32, Default::default()).unwrap()).collect();
    let (a, b) = run(&mut vm, 3.0, 4.0);
    assert_ne!(b.storage().as_ptr(), storage);
    assert_ne!(b.object_id(), header);
    assert_eq!((values(&a), values(&b)), (vec![3.0; 4], vec![4.0; 4]));
}

#[test]
fn memory_manager_clear_drops_what_the_sites_keep() {
    let mut vm = program();
    let (a, b) = run(&mut vm, 1.0, 2.0);
    let storage = b.storage().as_ptr();
    drop((a, b));
    vm.invoke("clear", &[]).unwrap();
    let _taken: Vec<Tensor> =
        (0..8).map(|_| Tensor::zeros(vec![16], DataType::U8, Default::default()).unwrap()).collect();
    let (a, b) = run(&mut vm, 3.0, 4.0);
    assert!(a.storage().as_ptr() != storage && b.storage().as_ptr() != storage);
    assert_eq!((values(&a), values(&b)), (vec![3.0; 4], vec![4.0; 4]));
}

/// `looped(x, n)`: n runs of one storage site and one tensor site viewing it (a loop in one
/// call), each filling the view from `x` and recording the address of the storage it got
/// (with `t.record`), the registers let go of before the next run, as Relax's `kill` does.
fn looped(record: PackedFunc) -> VirtualMachine {
    let mut reg = Registry::new();
    relaxvm_builtins::register_all(&mut reg).unwrap();
    reg.register(record, true).unwrap();
    let funcs = vec![
        FuncInfo::bytecode("looped", 0, 11, 2, 6),
        FuncInfo::packed("vm.builtin.alloc_storage"),
        FuncInfo::packed("vm.builtin.alloc_tensor"),
        FuncInfo::packed("t.record"),
        FuncInfo::packed("vm.builtin.null_value"),
        FuncInfo::packed("vm.builtin.int.add"),
        FuncInfo::packed("vm.builtin.int.lt"),
    ];
    let instrs = vec![
        // r2 = 0 (the runs so far)
        call(5, vec![Imm(0), Imm(0)], Some(2)),
        // loop: r3 = storage; r4 = a view of it; record(x, r4); let go of both
        call(1, vec![VmState, Const(0), Imm(0), Const(1)], Some(3)),
        call(2, vec![Reg(3), Imm(0), Const(2), Const(3)], Some(4)),
        call(3, vec![Reg(0), Reg(4)], None),
        call(4, vec![], Some(3)),
        call(4, vec![], Some(4)),
        // r2 += 1; r5 = r2 < n; again while r5
        call(5, vec![Reg(2), Imm(1)], Some(2)),
        call(6, vec![Reg(2), Reg(1)], Some(5)),
        Instruction::If { cond: 5, false_offset: 2 },
        Instruction::Goto { offset: -8 },
        Instruction::Ret { result: 2 },
    ];
    let constants = vec![shape(&[16]), dtype(DataType::U8), shape(&[4]), dtype(DataType::F32)];
    let parts = ExecutableParts { funcs, instrs, constants, ..Default::default() };
    VirtualMachine::with_overrides(Arc::new(Executable::from_parts(parts).unwrap()), &reg).unwrap()
}

/// Review finding F4: a tensor site's kept header, which still views the storage of its last
/// run, does not keep that storage from its own site: a loop's runs of the storage site reuse
/// one block, where each run allocated anew while the header pinned the last one.
#[test]
fn a_storage_site_run_in_a_loop_allocates_once() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<(usize, usize, f32)>::new()));
    let record = {
        let seen = Arc::clone(&seen);
        PackedFunc::from_fn("t.record", move |a| {
            let (x, out) = (a[0].as_tensor()?, a[1].as_tensor()?);
            // The view starts zeroed, as new storage does, then gets x.
            let fresh = out.to_vec::<f32>()?.iter().all(|v| *v == 0.0);
            out.storage().write(out.byte_offset(), &x.storage().bytes()[..x.nbytes()])?;
            let first = out.to_vec::<f32>()?[0];
            seen.lock().unwrap().push((
                out.storage().as_ptr() as usize,
                out.object_id(),
                if fresh { first } else { -1.0 },
            ));
            Ok(Value::Null)
        })
    };
    let mut vm = looped(record);
    for call in 0..2 {
        seen.lock().unwrap().clear();
        let runs = vm.invoke("looped", &[tensor(&[4], vec![2.5f32; 4]), Value::Int(6)]).unwrap();
        assert_eq!(runs.as_int().unwrap(), 6);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 6);
        // One storage (allocated at the first run of the first call) and one header for every
        // run, each zeroed before the program wrote it.
        let storages: std::collections::BTreeSet<usize> = seen.iter().map(|s| s.0).collect();
        let headers: std::collections::BTreeSet<usize> = seen.iter().map(|s| s.1).collect();
        assert_eq!((storages.len(), headers.len()), (1, 1), "call {call}: {seen:?}");
        assert!(seen.iter().all(|s| s.2 == 2.5), "call {call}: every run's view started zeroed: {seen:?}");
    }
}
