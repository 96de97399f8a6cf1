//! Golden tests: build this, expect exactly this `as_text()`; and builder misuse errors.

use crate::common::{build, f32_tensor, func};
use relaxvm::{Arg::*, DataType, FuncKind, Location, Shape, Value};
use relaxvm_builder::{BuildError, ExecBuilder};

#[test]
fn design_doc_builder_example() {
    let mut ib = ExecBuilder::new();
    let c = ib.convert_constant(f32_tensor(&[2], vec![1.0, 2.0])).unwrap();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_call("test.vm.move", &[Const(c)], Some(1))?;
        ib.emit_call("vm.add", &[Reg(0), Imm(10)], Some(2))?;
        ib.emit_call("vm.mul", &[Reg(2), Reg(1)], Some(3))?;
        ib.emit_ret(3)
    })
    .unwrap();
    let out = ib.get().unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(
        out.executable.as_text(),
        r#".const c[0] = tensor float32 (2,) [1.0, 2.0]

@main inputs=1 regs=4:
  call  test.vm.move  in: c[0]  dst: %1
  call  vm.add  in: %0, i10  dst: %2
  call  vm.mul  in: %2, %1  dst: %3
  ret  %3
.packed test.vm.move
.packed vm.add
.packed vm.mul
"#
    );
}

#[test]
fn design_doc_text_format_example() {
    let mut ib = ExecBuilder::new();
    func(&mut ib, "func0", 2, |ib| {
        ib.emit_call("vm.op.add", &[Reg(0), Reg(1)], Some(2))?;
        ib.emit_call("vm.builtin.move", &[Reg(2)], Some(3))?;
        ib.emit_call("vm.builtin.print", &[Reg(3)], None)?;
        ib.emit_ret(3)
    })
    .unwrap();
    let exe = build(&mut ib);
    assert_eq!(
        exe.as_text(),
        "@func0 inputs=2 regs=4:
  call  vm.op.add  in: %0, %1  dst: %2
  call  vm.builtin.move  in: %2  dst: %3
  call  vm.builtin.print  in: %3  dst: void
  ret  %3
.packed vm.op.add
.packed vm.builtin.move
.packed vm.builtin.print
"
    );
    assert_eq!(
        exe.stats(),
        "Relax VM executable statistics:
  Constant pool (# 0): []
  Globals (#1): [func0]
  Packed functions (#3): [vm.op.add, vm.builtin.move, vm.builtin.print]
  Instructions (#4)
"
    );
}

#[test]
fn shape_heap_example() {
    let mut ib = ExecBuilder::new();
    let x = ib
        .convert_constant(Value::Tensor(relaxvm::Tensor::zeros([32, 16], DataType::F32, Default::default()).unwrap()))
        .unwrap();
    func(&mut ib, "main", 0, |ib| {
        ib.emit_call("vm.builtin.alloc_shape_heap", &[VmState, Imm(2)], Some(0))?;
        ib.emit_call("vm.builtin.shape_of", &[Const(x)], Some(1))?;
        ib.emit_call("vm.builtin.store_shape", &[Reg(1), Reg(0), Imm(0), Imm(1)], None)?;
        ib.emit_call("vm.builtin.load_shape", &[Reg(0), Imm(0), Imm(1)], Some(2))?;
        ib.emit_ret(2)
    })
    .unwrap();
    let text = build(&mut ib).as_text();
    let body = text.split_once("\n\n").unwrap().1;
    assert_eq!(
        body,
        "@main inputs=0 regs=3:
  call  vm.builtin.alloc_shape_heap  in: %vm, i2  dst: %0
  call  vm.builtin.shape_of  in: c[0]  dst: %1
  call  vm.builtin.store_shape  in: %1, %0, i0, i1  dst: void
  call  vm.builtin.load_shape  in: %0, i0, i1  dst: %2
  ret  %2
.packed vm.builtin.alloc_shape_heap
.packed vm.builtin.shape_of
.packed vm.builtin.store_shape
.packed vm.builtin.load_shape
"
    );
    assert!(text.starts_with(".const c[0] = tensor float32 (32, 16) hex:0000"), "{}", &text[..60]);
}

#[test]
fn table_order_is_first_reference_and_layout_follows_it() {
    let mut ib = ExecBuilder::new();
    // `helper` is called before it is defined; `decl.packed` declared up front keeps slot 0.
    assert_eq!(ib.declare_function("decl.packed", FuncKind::Packed).unwrap(), 0);
    func(&mut ib, "main", 1, |ib| {
        ib.emit_call("helper", &[Reg(0)], Some(1))?;
        ib.emit_call("decl.packed", &[Reg(1), Func(0)], Some(2))?;
        ib.emit_ret(2)
    })
    .unwrap();
    assert_eq!(ib.function_kind("helper"), Some(FuncKind::Packed), "undecided until defined");
    func(&mut ib, "helper", 1, |ib| ib.emit_ret(0)).unwrap();
    assert_eq!(ib.function_kind("helper"), Some(FuncKind::Bytecode));
    assert_eq!(ib.function_names(), vec!["decl.packed", "main", "helper"]);
    let exe = build(&mut ib);
    assert_eq!(
        exe.as_text(),
        ".packed decl.packed

@main inputs=1 regs=3:
  call  helper  in: %0  dst: %1
  call  decl.packed  in: %1, f[decl.packed]  dst: %2
  ret  %2

@helper inputs=1 regs=1:
  ret  %0
"
    );
    let helper = exe.func("helper").unwrap();
    assert_eq!((helper.start_instr, helper.end_instr), (3, 4));
}

#[test]
fn layout_is_table_order_even_when_defined_in_another_order() {
    // Declaring b before a fixes the table; defining a first must not change the text.
    let mut one = ExecBuilder::new();
    one.declare_function("b", FuncKind::Bytecode).unwrap();
    func(&mut one, "a", 0, |ib| {
        ib.emit_call("b", &[], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    func(&mut one, "b", 0, |ib| {
        ib.emit_call("k", &[], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    let mut two = ExecBuilder::new();
    two.declare_function("b", FuncKind::Bytecode).unwrap();
    two.declare_function("a", FuncKind::Bytecode).unwrap();
    func(&mut two, "b", 0, |ib| {
        ib.emit_call("k", &[], Some(5))?;
        ib.emit_ret(5)
    })
    .unwrap();
    two.func_ref("k");
    func(&mut two, "a", 0, |ib| {
        ib.emit_call("b", &[], Some(9))?;
        ib.emit_ret(9)
    })
    .unwrap();
    let (t1, t2) = (build(&mut one).as_text(), build(&mut two).as_text());
    assert_eq!(t1, t2);
    assert!(t1.starts_with("@b inputs=0 regs=1:\n"), "{t1}");
}

#[test]
fn constants_are_deduplicated_and_printed() {
    let mut ib = ExecBuilder::new();
    let items = vec![
        Value::Int(-5),
        Value::Float(0.5),
        Value::Bool(false),
        Value::str("a \"quoted\"\nline"),
        Value::Shape(Shape::from([3])),
        Value::DType(DataType::BF16),
        Value::Device(relaxvm::Device::cpu(1)),
        Value::Null,
        f32_tensor(&[], vec![1.5]),
    ];
    let idx: Vec<u32> = items.iter().map(|v| ib.convert_constant(v.clone()).unwrap()).collect();
    let again: Vec<u32> = items.iter().map(|v| ib.convert_constant(v.clone()).unwrap()).collect();
    assert_eq!(idx, again);
    assert_eq!(ib.constants().len(), items.len());
    func(&mut ib, "main", 0, |ib| {
        ib.emit_call("vm.builtin.tuple", &idx.iter().map(|c| Const(*c)).collect::<Vec<_>>(), Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    let text = build(&mut ib).as_text();
    assert_eq!(
        text.split("\n\n").next().unwrap(),
        r#".const c[0] = int -5
.const c[1] = float 0.5
.const c[2] = bool false
.const c[3] = str "a \"quoted\"\nline"
.const c[4] = shape (3,)
.const c[5] = dtype bfloat16
.const c[6] = device cpu:1
.const c[7] = null
.const c[8] = tensor float32 () [1.5]"#
    );
    // Tuples of constants are constants (TVM's Array constants); a VM state is not.
    assert_eq!(ib.convert_constant(Value::tuple(vec![Value::Int(1), Value::Null])).unwrap(), 9);
    let e = ib.convert_constant(Value::VmState).unwrap_err();
    assert!(matches!(e, BuildError::UnsupportedConstant("vm_state")), "{e}");
}

#[test]
fn locations_and_param_names() {
    let mut ib = ExecBuilder::new();
    ib.function("main", 2, Some(vec!["x".into(), "odd name".into()])).unwrap();
    ib.set_location(Some(Location::File { file: "model.py".into(), line: 3, col: 1 }));
    ib.emit_call("vm.op.add", &[Reg(0), Reg(1)], Some(2)).unwrap();
    ib.set_location(Some(Location::CallSite {
        callee: Box::new(Location::Name("inner".into())),
        caller: Box::new(Location::Fused(vec![Location::Name("a".into()), Location::Name("b".into())])),
    }));
    assert!(ib.location().is_some());
    ib.emit_call("vm.op.mul", &[Reg(2), Reg(2)], Some(3)).unwrap();
    ib.set_location(None);
    ib.emit_ret(3).unwrap();
    ib.end_function().unwrap();
    assert_eq!(
        build(&mut ib).as_text(),
        r#"@main inputs=2 regs=4 params=(x, "odd name"):
  call  vm.op.add  in: %0, %1  dst: %2  loc("model.py":3:1)
  call  vm.op.mul  in: %2, %2  dst: %3  loc(callsite("inner" at fused["a", "b"]))
  ret  %3
.packed vm.op.add
.packed vm.op.mul
"#
    );
}

#[test]
fn get_leaves_the_builder_usable() {
    let mut ib = ExecBuilder::new();
    func(&mut ib, "f", 1, |ib| ib.emit_ret(0)).unwrap();
    let first = build(&mut ib);
    func(&mut ib, "g", 1, |ib| {
        ib.emit_call("f", &[Reg(0)], Some(1))?;
        ib.emit_ret(1)
    })
    .unwrap();
    let second = build(&mut ib);
    assert_eq!(first.funcs().len(), 1);
    assert_eq!(second.funcs().len(), 2);
    assert_eq!(build(&mut ib).as_text(), second.as_text());
}

#[test]
fn misuse_is_reported() {
    let mut ib = ExecBuilder::new();
    assert!(matches!(ib.emit_ret(0), Err(BuildError::NoOpenFunction { op: "emit_ret" })));
    assert!(matches!(ib.emit_call("f", &[], None), Err(BuildError::NoOpenFunction { op: "emit_call" })));
    assert!(ib.function_names().is_empty(), "a failed emit_call adds no entry");
    assert!(matches!(ib.emit_goto(1), Err(BuildError::NoOpenFunction { .. })));
    assert!(matches!(ib.emit_if(0, 1), Err(BuildError::NoOpenFunction { .. })));
    assert!(matches!(ib.end_function(), Err(BuildError::NoOpenFunction { op: "end_function" })));

    ib.function("a", 0, None).unwrap();
    assert_eq!(ib.current_function(), Some("a"));
    let e = ib.function("b", 0, None).unwrap_err();
    assert_eq!(e.to_string(), "cannot open function \"b\" while function \"a\" is open: call end_function() first");
    let e = ib.get().unwrap_err();
    assert!(matches!(&e, BuildError::FunctionStillOpen(n) if n == "a"), "{e}");
    ib.emit_call("k", &[], Some(0)).unwrap();
    ib.emit_ret(0).unwrap();
    ib.end_function().unwrap();
    assert_eq!(ib.current_function(), None);

    assert!(matches!(ib.function("a", 0, None), Err(BuildError::DuplicateFunction(n)) if n == "a"));
    let e = ib.declare_function("a", FuncKind::Packed).unwrap_err();
    assert_eq!(e.to_string(), "function \"a\" is already a bytecode function and cannot be made a packed function");
    assert_eq!(ib.declare_function("a", FuncKind::Bytecode).unwrap(), 0);
    ib.declare_function("p", FuncKind::Packed).unwrap();
    assert!(matches!(ib.function("p", 0, None), Err(BuildError::KindConflict { .. })));
    assert!(matches!(ib.declare_function("p", FuncKind::Bytecode), Err(BuildError::KindConflict { .. })));
    assert!(matches!(ib.function("", 0, None), Err(BuildError::EmptyName)));
    assert!(matches!(ib.declare_function("", FuncKind::Packed), Err(BuildError::EmptyName)));

    let e = ib.function("c", 2, Some(vec!["x".into()])).unwrap_err();
    assert_eq!(e.to_string(), "function \"c\" has 2 inputs but 1 parameter name");
    let e = ib.function("c", 2, Some(vec!["x".into(), "x".into()])).unwrap_err();
    assert!(matches!(e, BuildError::DuplicateParam { .. }), "{e}");
    assert!(matches!(ib.function("c", u32::MAX, None), Err(BuildError::TooManyInputs { .. })));
    assert_eq!(ib.current_function(), None, "failed function() calls open nothing");
    assert!(ib.function_kind("c").is_none());
    build(&mut ib);

    // An empty name reached through func_ref is reported at get().
    ib.func_ref("");
    assert!(matches!(ib.get(), Err(BuildError::EmptyName)));
}
