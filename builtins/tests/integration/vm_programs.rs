//! Small bytecode programs, built by hand, that run the builtins through the interpreter.

use crate::common::{dtype, registry, shape, tensor};
use relaxvm::{
    Arg, DataType, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Registry, Value,
    VirtualMachine,
};
use std::sync::Arc;
use Arg::*;

fn func(name: &str, range: (u32, u32), num_args: u32, regs: u32) -> FuncInfo {
    FuncInfo::bytecode(name, range.0, range.1, num_args, regs)
}

fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

/// The executable of these parts.
fn exe(funcs: Vec<FuncInfo>, instrs: Vec<Instruction>, constants: Vec<Value>) -> Arc<Executable> {
    Arc::new(Executable::from_parts(ExecutableParts { funcs, instrs, constants, ..Default::default() }).unwrap())
}

/// A VM over the executable, with the builtins from a registry value (not the global one).
fn vm(funcs: Vec<FuncInfo>, instrs: Vec<Instruction>, constants: Vec<Value>) -> VirtualMachine {
    VirtualMachine::with_overrides(exe(funcs, instrs, constants), registry()).unwrap()
}

/// The design document's shape-heap example: store the shape of a (32, 16) tensor in the heap
/// and load it back.
#[test]
fn design_doc_shape_heap_returns_32_16() {
    relaxvm_builtins::ensure_registered();
    let x = tensor(&[32, 16], vec![0.5f64; 32 * 16]);
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            func("main", (0, 5), 0, 3),
            FuncInfo::packed("vm.builtin.alloc_shape_heap"),
            FuncInfo::packed("vm.builtin.shape_of"),
            FuncInfo::packed("vm.builtin.store_shape"),
            FuncInfo::packed("vm.builtin.load_shape"),
        ],
        instrs: vec![
            call(1, vec![Imm(2)], Some(0)),
            call(2, vec![Const(0)], Some(1)),
            call(3, vec![Reg(1), Reg(0), Imm(0), Imm(1)], None),
            call(4, vec![Reg(0), Imm(0), Imm(1)], Some(2)),
            Instruction::Ret { result: 2 },
        ],
        constants: vec![x],
        ..Default::default()
    })
    .unwrap();
    // The process-wide registry, as users get it from `ensure_registered`.
    let mut m = VirtualMachine::new(Arc::new(exe)).unwrap();
    let out = m.invoke("main", &[]).unwrap();
    assert_eq!(out.as_shape().unwrap().dims(), &[32, 16]);
    assert_eq!(out.to_string(), "(32, 16)");
}

/// The design document's first example: move a constant, add an immediate, multiply, print.
#[test]
fn design_doc_move_add_mul_print() {
    let mut m = vm(
        vec![
            func("func0", (0, 5), 1, 4),
            FuncInfo::packed("vm.builtin.move"),
            FuncInfo::packed("vm.op.add"),
            FuncInfo::packed("vm.op.mul"),
            FuncInfo::packed("vm.builtin.print"),
        ],
        vec![
            call(1, vec![Const(0)], Some(1)),
            call(2, vec![Reg(0), Imm(10)], Some(2)),
            call(3, vec![Reg(2), Reg(1)], Some(3)),
            call(4, vec![Reg(3)], None),
            Instruction::Ret { result: 3 },
        ],
        vec![tensor(&[2], vec![2.0f32, 2.0])],
    );
    let (out, printed) = relaxvm_builtins::output::capture(|| m.invoke("func0", &[tensor(&[2], vec![1.0f32, 2.0])]));
    let t = out.unwrap().as_tensor().unwrap().clone();
    assert_eq!((t.dtype(), t.to_vec::<f32>().unwrap()), (DataType::F32, vec![22.0, 24.0]));
    assert_eq!(printed, "[22.0, 24.0]\n");
}

/// `make_closure` captures values that come after the call's own arguments, for bytecode and
/// packed functions alike; `invoke_closure` re-enters the VM.
#[test]
fn closures_made_and_invoked_by_builtins() {
    let mut m = vm(
        vec![
            func("main", (0, 6), 1, 5),
            func("sub2", (6, 8), 2, 3),
            FuncInfo::packed("vm.builtin.make_closure"),
            FuncInfo::packed("vm.builtin.invoke_closure"),
            FuncInfo::packed("vm.builtin.int.sub"),
            FuncInfo::packed("vm.builtin.make_tuple"),
        ],
        vec![
            // r1 = closure(sub2, 10); r2 = r1(x) = sub2(x, 10)
            call(2, vec![Func(1), Imm(10)], Some(1)),
            call(3, vec![VmState, Reg(1), Reg(0)], Some(2)),
            // r3 = closure(int.sub, 100)(x) = x - 100
            call(2, vec![Func(4), Imm(100)], Some(3)),
            call(3, vec![VmState, Reg(3), Reg(0)], Some(3)),
            call(5, vec![Reg(2), Reg(3)], Some(4)),
            Instruction::Ret { result: 4 },
            // sub2(a, b) = a - b
            call(4, vec![Reg(0), Reg(1)], Some(2)),
            Instruction::Ret { result: 2 },
        ],
        vec![],
    );
    let out = m.invoke("main", &[Value::Int(25)]).unwrap();
    assert_eq!(out.to_string(), "(15, -75)");
    // Invoking a closure with too few arguments is an arity error naming the function.
    let e = m.invoke("sub2", &[Value::Int(1)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Arity { .. }), "{e}");
}

/// `alloc_storage` then two `alloc_tensor` views of it; an op on a view gives a new tensor.
#[test]
fn storage_and_tensor_views() {
    let mut m = vm(
        vec![
            func("main", (0, 6), 0, 5),
            FuncInfo::packed("vm.builtin.alloc_storage"),
            FuncInfo::packed("vm.builtin.alloc_tensor"),
            FuncInfo::packed("vm.op.add"),
            FuncInfo::packed("vm.builtin.make_tuple"),
        ],
        vec![
            call(1, vec![VmState, Const(0), Imm(0), Const(1), Const(2)], Some(0)),
            call(2, vec![Reg(0), Imm(0), Const(3), Const(4)], Some(1)),
            call(3, vec![Reg(1), Imm(1)], Some(2)),
            call(2, vec![Reg(0), Imm(32), Const(5), Const(4)], Some(3)),
            call(4, vec![Reg(1), Reg(2), Reg(3)], Some(4)),
            Instruction::Ret { result: 4 },
        ],
        vec![
            shape(&[64]),
            dtype(DataType::U8),
            Value::str("global"),
            shape(&[4, 4]),
            Value::str("float32"),
            shape(&[8]),
        ],
    );
    let out = m.invoke("main", &[]).unwrap();
    let items = out.as_tuple().unwrap();
    let (a, ones, tail) = (items[0].as_tensor().unwrap(), items[1].as_tensor().unwrap(), items[2].as_tensor().unwrap());
    assert_eq!((a.shape().dims(), a.dtype()), (&[4i64, 4][..], DataType::F32));
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![0.0; 16]);
    assert_eq!(ones.to_vec::<f32>().unwrap(), vec![1.0; 16]);
    assert!(a.shares_storage(tail) && !a.shares_storage(ones));
    assert_eq!((tail.byte_offset(), tail.numel()), (32, 8));
}

/// A view past the end of its storage is an error located at its instruction.
#[test]
fn alloc_tensor_out_of_bounds_is_located() {
    let mut m = vm(
        vec![
            func("main", (0, 3), 0, 2),
            FuncInfo::packed("vm.builtin.alloc_storage"),
            FuncInfo::packed("vm.builtin.alloc_tensor"),
        ],
        vec![
            call(1, vec![VmState, Const(0), Imm(-1), Const(1)], Some(0)),
            call(2, vec![Reg(0), Imm(8), Const(0), Const(1)], Some(1)),
            Instruction::Ret { result: 1 },
        ],
        vec![shape(&[16]), Value::str("uint8")],
    );
    let e = m.invoke("main", &[]).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("vm.builtin.alloc_tensor") && s.contains("instruction 1") && s.contains("needs 16 bytes"),
        "{s}"
    );
}

/// Shape matching at function entry, then a shape made from the heap.
#[test]
fn match_shape_and_make_shape() {
    let mut m = vm(
        vec![
            func("main", (0, 5), 1, 3),
            FuncInfo::packed("vm.builtin.alloc_shape_heap"),
            FuncInfo::packed("vm.builtin.check_tensor_info"),
            FuncInfo::packed("vm.builtin.match_shape"),
            FuncInfo::packed("vm.builtin.make_shape"),
        ],
        vec![
            call(1, vec![VmState, Imm(2)], Some(1)),
            call(2, vec![Reg(0), Imm(2), Const(0), Const(1)], None),
            call(3, vec![Reg(0), Reg(1), Imm(2), Imm(1), Imm(0), Imm(1), Imm(1), Const(1)], None),
            call(4, vec![Reg(1), Imm(3), Imm(1), Imm(1), Imm(0), Imm(7), Imm(1), Imm(0)], Some(2)),
            Instruction::Ret { result: 2 },
        ],
        vec![dtype(DataType::F32), Value::str("main.x")],
    );
    let out = m.invoke("main", &[tensor(&[3, 5], vec![0.0f32; 15])]).unwrap();
    assert_eq!(out.as_shape().unwrap().dims(), &[5, 7, 3]);
    let e = m.invoke("main", &[tensor(&[3, 5], vec![0i32; 15])]).unwrap_err().to_string();
    assert!(e.contains("main.x expect Tensor with dtype float32 but get int32") && e.contains("instruction 1"), "{e}");
    let e = m.invoke("main", &[tensor(&[15], vec![0.0f32; 15])]).unwrap_err().to_string();
    assert!(e.contains("main.x expect Tensor with ndim 2 but get"), "{e}");
}

/// A `make_shape` call whose operands are not all fixed (here `ndim` is a register) runs the
/// general function, which keeps the shape it made last in the site cache too (as at the native
/// call sites of a compiled-mode model, each with a cache of its own) and hands it out again only
/// for the same dimensions.
#[test]
fn a_general_make_shape_reuses_its_last_shape_only_for_the_same_dims() {
    let funcs = vec![
        func("main", (0, 4), 2, 4),
        FuncInfo::packed("vm.builtin.alloc_shape_heap"),
        FuncInfo::packed("vm.builtin.match_shape"),
        FuncInfo::packed("vm.builtin.make_shape"),
    ];
    let instrs = vec![
        call(1, vec![VmState, Imm(1)], Some(2)),
        call(2, vec![Reg(0), Reg(2), Imm(1), Imm(1), Imm(0), Const(0)], None),
        call(3, vec![Reg(2), Reg(1), Imm(1), Imm(0), Imm(0), Imm(32)], Some(3)),
        Instruction::Ret { result: 3 },
    ];
    let exe = exe(funcs, instrs, vec![Value::str("x")]);
    let mut m = VirtualMachine::with_overrides(Arc::clone(&exe), registry()).unwrap();
    let mut make = |n: usize, ndim: i64| {
        m.invoke("main", &[tensor(&[n as i64], vec![0.0f32; n]), Value::Int(ndim)])
            .map(|v| v.as_shape().unwrap().clone())
    };
    let first = make(5, 2).unwrap();
    assert_eq!(first.dims(), [5, 32]);
    assert!(make(5, 2).unwrap().ptr_eq(&first), "the same dimensions: the site's last shape");
    let other = make(6, 2).unwrap();
    assert!(other.dims() == [6, 32] && !other.ptr_eq(&first), "a changed heap slot: a new shape");
    assert!(make(6, 2).unwrap().ptr_eq(&other));
    // A wrong `ndim` is still the general function's error, and the cache stays as it was.
    let e = make(6, 3).unwrap_err().to_string();
    assert!(e.contains("vm.builtin.make_shape"), "{e}");
    assert!(make(6, 2).unwrap().ptr_eq(&other));
}

/// A `make_shape` site hands out the shape it made last (from its VM's site cache) when the
/// heap gives the same dimensions, and a new one whenever they change; VMs (here one per
/// thread) running one executable keep their own.
#[test]
fn a_make_shape_site_reuses_its_last_shape_only_for_the_same_dims() {
    let funcs = vec![
        func("main", (0, 4), 1, 3),
        FuncInfo::packed("vm.builtin.alloc_shape_heap"),
        FuncInfo::packed("vm.builtin.match_shape"),
        FuncInfo::packed("vm.builtin.make_shape"),
    ];
    let instrs = vec![
        call(1, vec![VmState, Imm(1)], Some(1)),
        call(2, vec![Reg(0), Reg(1), Imm(1), Imm(1), Imm(0), Const(0)], None),
        call(3, vec![Reg(1), Imm(2), Imm(1), Imm(0), Imm(0), Imm(32)], Some(2)),
        Instruction::Ret { result: 2 },
    ];
    let exe = exe(funcs, instrs, vec![Value::str("x")]);
    let make = |m: &mut VirtualMachine, n: usize| {
        m.invoke("main", &[tensor(&[n as i64], vec![0.0f32; n])]).unwrap().as_shape().unwrap().clone()
    };
    let mut m = VirtualMachine::with_overrides(Arc::clone(&exe), registry()).unwrap();
    let first = make(&mut m, 5);
    assert_eq!(first.dims(), [5, 32]);
    assert!(make(&mut m, 5).ptr_eq(&first), "the same dimensions: the site's last shape");
    let other = make(&mut m, 6);
    assert_eq!(other.dims(), [6, 32], "a changed heap slot: a new shape, never the last one");
    assert!(make(&mut m, 6).ptr_eq(&other));
    assert_eq!(make(&mut m, 5).dims(), [5, 32]);
    std::thread::scope(|s| {
        for n in 1..=4 {
            let exe = &exe;
            s.spawn(move || {
                let mut m = VirtualMachine::with_overrides(Arc::clone(exe), registry()).unwrap();
                for k in 0..500 {
                    let n = n + k % 2;
                    assert_eq!(make(&mut m, n).dims(), [n as i64, 32]);
                }
            });
        }
    });
}

/// A model's allocation sites hand out last call's storage again once nothing holds it, and
/// never while the caller keeps last call's result.
#[test]
fn allocation_sites_reuse_only_what_no_one_holds() {
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
        func("main", (0, 4), 1, 3),
        FuncInfo::packed("vm.builtin.alloc_storage"),
        FuncInfo::packed("vm.builtin.alloc_tensor"),
        FuncInfo::packed("t.fill"),
    ];
    let instrs = vec![
        call(1, vec![VmState, Imm(16), Imm(0), Const(0), Const(1)], Some(1)),
        call(2, vec![Reg(1), Imm(0), Const(2), Const(3)], Some(2)),
        call(3, vec![Reg(0), Reg(2)], None),
        Instruction::Ret { result: 2 },
    ];
    let constants = vec![dtype(DataType::U8), Value::str("global"), shape(&[4]), dtype(DataType::F32)];
    let mut m = VirtualMachine::with_overrides(exe(funcs, instrs, constants), &reg).unwrap();
    let mut run = |v: f32| m.invoke("main", &[tensor(&[4], vec![v; 4])]).unwrap().as_tensor().unwrap().clone();
    let first = run(1.0);
    // The caller keeps the first result: the second call must not write over it.
    let second = run(2.0);
    assert!(!second.storage().ptr_eq(first.storage()));
    assert_eq!(first.to_vec::<f32>().unwrap(), [1.0; 4]);
    assert_eq!(second.to_vec::<f32>().unwrap(), [2.0; 4]);
    // Once the caller lets go, the site's last storage comes back (zeroed, then filled).
    let storage = second.storage().as_ptr();
    drop((first, second));
    // Blocks of the same sizes, kept meanwhile, take whatever memory was freed: equal addresses
    // below mean the same objects, not new ones at a freed address.
    let _taken: Vec<Value> = (0..8).map(|_| tensor(&[4], vec![0.0f32; 4])).collect();
    let third = run(3.0);
    assert_eq!(third.storage().as_ptr(), storage);
    assert_eq!(third.to_vec::<f32>().unwrap(), [3.0; 4]);
}

/// A counting loop on the scalar builtins (the benchmark's shape): sum(0..n).
#[test]
fn counting_loop_on_scalar_builtins() {
    let mut m = vm(
        vec![
            func("count", (0, 8), 1, 4),
            FuncInfo::packed("vm.builtin.int.lt"),
            FuncInfo::packed("vm.builtin.int.add"),
        ],
        vec![
            call(2, vec![Imm(0), Imm(0)], Some(1)),
            call(2, vec![Imm(0), Imm(0)], Some(2)),
            call(1, vec![Reg(1), Reg(0)], Some(3)),
            Instruction::If { cond: 3, false_offset: 4 },
            call(2, vec![Reg(2), Reg(1)], Some(2)),
            call(2, vec![Reg(1), Imm(1)], Some(1)),
            Instruction::Goto { offset: -4 },
            Instruction::Ret { result: 2 },
        ],
        vec![],
    );
    let n = 200_000i64;
    let start = std::time::Instant::now();
    let out = m.invoke("count", &[Value::Int(n)]).unwrap();
    eprintln!("counting loop: {n} iterations in {:?}", start.elapsed());
    assert_eq!(out.as_int().unwrap(), n * (n - 1) / 2);
}

/// Scalar errors surface through the VM with their kind and location.
#[test]
fn scalar_errors_through_the_vm() {
    let mut m = vm(
        vec![func("main", (0, 2), 2, 3), FuncInfo::packed("vm.builtin.int.floordiv")],
        vec![call(1, vec![Reg(0), Reg(1)], Some(2)), Instruction::Ret { result: 2 }],
        vec![],
    );
    assert_eq!(m.invoke("main", &[Value::Int(-7), Value::Int(2)]).unwrap().as_int().unwrap(), -4);
    let e = m.invoke("main", &[Value::Int(1), Value::Int(0)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Arithmetic(_)), "{e}");
    assert!(e.to_string().contains("vm.builtin.int.floordiv: division by zero"), "{e}");
    let e = m.invoke("main", &[Value::Int(1), Value::str("x")]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Type { .. }), "{e}");
}

/// `read_if_cond` turns a tensor condition into the bool an `if` tests.
#[test]
fn read_if_cond_drives_if() {
    let mut m = vm(
        vec![func("pick", (0, 4), 1, 2), FuncInfo::packed("vm.builtin.read_if_cond")],
        vec![
            call(1, vec![Reg(0)], Some(1)),
            Instruction::If { cond: 1, false_offset: 2 },
            Instruction::Ret { result: 1 },
            Instruction::Ret { result: 0 },
        ],
        vec![],
    );
    let out = m.invoke("pick", &[tensor(&[], vec![3i32])]).unwrap();
    assert!(matches!(out, Value::Bool(true)));
    let out = m.invoke("pick", &[tensor(&[1], vec![0u8])]).unwrap();
    assert!(out.as_tensor().is_ok());
    assert_eq!(
        format!("{:?}", m.invoke("pick", &[tensor(&[2], vec![0u8, 1])]).expect_err("an error")),
        r#"At { func: "pick", pc: 0, instr: "call  vm.builtin.read_if_cond  in: %0  dst: %1", location: None, source: Value("vm.builtin.read_if_cond: expected a one-element tensor, found shape (2,)") }"#
    );
}

/// A tensor pipeline: relu(x @ w + b), summed over the last axis.
#[test]
fn tensor_pipeline() {
    let mut m = vm(
        vec![
            func("mlp", (0, 5), 3, 7),
            FuncInfo::packed("vm.op.matmul"),
            FuncInfo::packed("vm.op.add"),
            FuncInfo::packed("vm.op.relu"),
            FuncInfo::packed("vm.op.sum"),
        ],
        vec![
            call(1, vec![Reg(0), Reg(1)], Some(3)),
            call(2, vec![Reg(3), Reg(2)], Some(4)),
            call(3, vec![Reg(4)], Some(5)),
            call(4, vec![Reg(5), Imm(-1)], Some(6)),
            Instruction::Ret { result: 6 },
        ],
        vec![],
    );
    let x = tensor(&[2, 2], vec![1.0f32, -1.0, 2.0, 0.5]);
    let w = tensor(&[2, 3], vec![1.0f32, 0.0, -1.0, 0.0, 1.0, 1.0]);
    let b = tensor(&[3], vec![0.0f32, 0.5, 0.0]);
    let out = m.invoke("mlp", &[x, w, b]).unwrap();
    // x @ w = [[1, -1, -2], [2, 0.5, -1.5]]; + b = [[1, -0.5, -2], [2, 1, -1.5]]; relu; sum.
    assert_eq!(out.as_tensor().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 3.0]);
}

/// `R.call_py_func("vmprog.twice", (x,))` as TVM lowers it (one tuple of the name and the
/// arguments), calling a Rust function an embedder registered by name, with no binding involved.
#[test]
fn call_py_func_calls_a_function_registered_from_rust() {
    // The fuzz of this binary clears the process-wide table while holding this lock.
    let _table = crate::robustness::process_table_lock();
    relaxvm_builtins::py_funcs::register_py_func(
        "vmprog.twice",
        PackedFunc::from_fn("vmprog.twice", |a| Ok(Value::Int(2 * a[0].as_int()?))),
    );
    let mut m = vm(
        vec![
            func("main", (0, 4), 1, 3),
            FuncInfo::packed("vm.builtin.make_tuple"),
            FuncInfo::packed("vm.builtin.call_py_func"),
        ],
        vec![
            call(1, vec![Reg(0)], Some(1)),
            call(1, vec![Const(0), Reg(1)], Some(2)),
            call(2, vec![Reg(2)], Some(1)),
            Instruction::Ret { result: 1 },
        ],
        vec![Value::str("vmprog.twice")],
    );
    assert_eq!(m.invoke("main", &[Value::Int(21)]).unwrap().as_int().unwrap(), 42);
    relaxvm_builtins::py_funcs::clear_py_func_registry();
    let e = m.invoke("main", &[Value::Int(21)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e}");
    assert!(e.to_string().contains("\"vmprog.twice\" not found in the call_py_func registry"), "{e}");
}
