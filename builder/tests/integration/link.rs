//! Linking and importing: merged tables and pools, remapped indices, declarations resolved to
//! direct calls, duplicate definitions, unresolved names left to a registry, entries, dead
//! functions, signatures — each checked through the binary format and the text form too.

use crate::common::{assert_round_trip, f32_tensor, func};
use relaxvm::registry::register_global;
use relaxvm::{Arg::*, Executable, FuncKind, Instruction, PackedFunc, Signature, Value, VirtualMachine};
use relaxvm_builder::{drop_unreachable, link, BuildError, ExecBuilder, LinkErrorKind, LinkOptions};
use std::sync::{Arc, Once};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_global(PackedFunc::typed("link.add", |a: i64, b: i64| a + b), true).unwrap();
        register_global(PackedFunc::typed("link.mul", |a: i64, b: i64| a * b), true).unwrap();
        register_global(PackedFunc::typed("link.neg", |a: i64| -a), true).unwrap();
        register_global(PackedFunc::from_fn("link.first", |a| Ok(a[0].clone())), true).unwrap();
    });
}

/// `a`: `main(x) = helper(x) + 10`, with `helper` declared packed, a tensor constant, and a
/// `unused` function with a constant of its own. Entry `main`.
fn module_a() -> Executable {
    let mut ib = ExecBuilder::new();
    ib.declare_function("helper", FuncKind::Packed).unwrap();
    let ten = ib.convert_constant(Value::Int(10)).unwrap();
    let t = ib.convert_constant(f32_tensor(&[2], vec![1.0, 2.0])).unwrap();
    let only_unused = ib.convert_constant(Value::str("only used by unused")).unwrap();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_call("helper", &[Reg(0)], Some(1))?;
        ib.emit_call("link.first", &[Reg(1), Const(t)], Some(2))?;
        ib.emit_call("link.add", &[Reg(2), Const(ten)], Some(3))?;
        ib.emit_ret(3)
    })
    .unwrap();
    func(&mut ib, "unused", 0, |ib| {
        ib.emit_call("link.first", &[Const(only_unused)], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    ib.set_entry("main").unwrap();
    ib.get().unwrap().executable
}

/// `b`: `helper(y) = twice(y) * 3`, `twice(y) = y + y`, the same tensor constant as `a`, a
/// string constant, and `table()` which returns `f[link.neg]` (a function argument).
fn module_b() -> Executable {
    let mut ib = ExecBuilder::new();
    let s = ib.convert_constant(Value::str("b")).unwrap();
    let t = ib.convert_constant(f32_tensor(&[2], vec![1.0, 2.0])).unwrap();
    ib.function_with_signature("helper", "(y: i64) -> i64".parse().unwrap()).unwrap();
    ib.emit_call("twice", &[Reg(0)], Some(1)).unwrap();
    ib.emit_call("link.first", &[Reg(1), Const(t), Const(s)], Some(2)).unwrap();
    ib.emit_call("link.mul", &[Reg(2), Imm(3)], Some(3)).unwrap();
    ib.emit_ret(3).unwrap();
    ib.end_function().unwrap();
    func(&mut ib, "twice", 1, |ib| {
        ib.emit_call("link.add", &[Reg(0), Reg(0)], Some(1))?;
        ib.emit_ret(1)
    })
    .unwrap();
    func(&mut ib, "table", 0, |ib| {
        let neg = ib.func_ref("link.neg");
        ib.emit_call("link.first", &[Func(neg)], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    ib.get().unwrap().executable
}

fn run(exe: &Executable, f: &str, args: &[Value]) -> Value {
    setup();
    VirtualMachine::new(Arc::new(exe.clone())).unwrap().invoke(f, args).unwrap()
}

/// The instruction at `pc` of function `name` calls a bytecode function named `callee`.
fn calls_bytecode(exe: &Executable, name: &str, pc: usize, callee: &str) -> bool {
    let f = exe.func(name).unwrap();
    match &exe.instrs()[f.start_instr as usize + pc] {
        Instruction::Call { func, .. } => {
            let target = &exe.funcs()[*func as usize];
            target.name == callee && target.kind == FuncKind::Bytecode
        }
        _ => false,
    }
}

#[test]
fn declared_in_one_defined_in_another_becomes_a_direct_call() {
    let (a, b) = (module_a(), module_b());
    assert_eq!(a.func("helper").unwrap().kind, FuncKind::Packed);
    let linked = link(&[("a.rvx", &a), ("b.rvx", &b)], &LinkOptions::default()).unwrap();
    assert!(calls_bytecode(&linked, "main", 0, "helper"), "{}", linked.as_text());
    assert!(calls_bytecode(&linked, "helper", 0, "twice"));
    // Table: a's names in order, then b's new ones; bodies laid out in table order.
    let names: Vec<&str> = linked.funcs().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["helper", "main", "link.first", "link.add", "unused", "twice", "link.mul", "table", "link.neg"]);
    let starts: Vec<u32> =
        linked.funcs().iter().filter(|f| f.kind == FuncKind::Bytecode).map(|f| f.start_instr).collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    // The tensor both use is stored once; the pools are otherwise concatenated.
    assert_eq!(linked.constants().len(), a.constants().len() + b.constants().len() - 1);
    let text = linked.as_text();
    assert_eq!(text.matches("tensor float32 (2,)").count(), 1, "{text}");
    // It behaves as the parts did: helper(4) = 24, main(4) = 34.
    assert_eq!(run(&b, "helper", &[Value::Int(4)]).as_int().unwrap(), 24);
    assert_eq!(run(&linked, "helper", &[Value::Int(4)]).as_int().unwrap(), 24);
    assert_eq!(run(&linked, "main", &[Value::Int(4)]).as_int().unwrap(), 34);
    let neg = run(&linked, "table", &[]);
    assert_eq!(neg.as_func().unwrap().name(), "link.neg");
    // Signatures, parameter names and the entry come along.
    assert_eq!(linked.signature("helper").unwrap().unwrap().to_string(), "(y: i64) -> i64");
    assert_eq!(linked.entry(), Some("main"));
    assert_round_trip(&linked);
    let loaded = relaxvm::format::load_bytes(&linked.save_to_bytes()).unwrap();
    assert_eq!(run(&loaded, "main", &[Value::Int(4)]).as_int().unwrap(), 34);
    // The order of the modules does not change what runs.
    let other = link(&[("b", &b), ("a", &a)], &LinkOptions::default()).unwrap();
    assert_eq!(run(&other, "main", &[Value::Int(4)]).as_int().unwrap(), 34);
    assert!(calls_bytecode(&other, "main", 0, "helper"));
}

#[test]
fn signatures_check_calls_into_the_linked_executable() {
    let linked = link(&[("a", &module_a()), ("b", &module_b())], &LinkOptions::default()).unwrap();
    setup();
    let mut vm = VirtualMachine::new(Arc::new(linked)).unwrap();
    let e = vm.invoke("helper", &[Value::str("x")]).unwrap_err();
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Type { .. }) && e.to_string().contains("\"y\""), "{e}");
}

#[test]
fn two_definitions_are_an_error_naming_both_modules() {
    let b = module_b();
    let e = link(&[("a.rvx", &module_a()), ("b.rvx", &b), ("b2.rvx", &b)], &LinkOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), LinkErrorKind::DuplicateDefinition { .. }));
    assert_eq!(
        e.to_string(),
        "function \"helper\" is defined twice: in module 1 (\"b.rvx\") and in module 2 (\"b2.rvx\")"
    );
    let e = link(&[("", &b), ("", &b)], &LinkOptions::default()).unwrap_err();
    assert_eq!(e.to_string(), "function \"helper\" is defined twice: in module 0 and in module 1");
}

#[test]
fn unresolved_declarations_stay_packed_for_the_registry() {
    let a = module_a();
    let linked = link(&[("a", &a)], &LinkOptions::default()).unwrap();
    assert_eq!(linked.func("helper").unwrap().kind, FuncKind::Packed);
    setup();
    let e = VirtualMachine::new(Arc::new(linked.clone())).unwrap_err().to_string();
    assert!(e.contains("helper"), "{e}");
    let mut reg = relaxvm::Registry::new();
    reg.register_typed("helper", |x: i64| x - 1).unwrap();
    let mut vm = VirtualMachine::with_overrides(Arc::new(linked), &reg).unwrap();
    assert_eq!(vm.invoke("main", &[Value::Int(4)]).unwrap().as_int().unwrap(), 13);
}

#[test]
fn arity_mismatches_across_modules_are_errors() {
    let mut ib = ExecBuilder::new();
    ib.declare_function("helper", FuncKind::Packed).unwrap();
    func(&mut ib, "caller", 0, |ib| {
        ib.emit_call("helper", &[Imm(1), Imm(2)], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    let caller = ib.get().unwrap().executable;
    let e = link(&[("c.rvx", &caller), ("b.rvx", &module_b())], &LinkOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "module 0 (\"c.rvx\"), function \"caller\", instruction 0: calls \"helper\" with 2 arguments, but module 1 (\"b.rvx\") defines it with 1 input"
    );
}

#[test]
fn entries() {
    let (a, b) = (module_a(), module_b());
    let opts = |entry: Option<&str>| LinkOptions { entry: entry.map(str::to_string), ..Default::default() };
    let linked = link(&[("a", &a), ("b", &b)], &opts(Some("helper"))).unwrap();
    assert_eq!(linked.declared_entry(), Some("helper"));
    assert_eq!(linked.as_text().lines().next(), Some(".entry helper"));
    let e = link(&[("a", &a), ("b", &b)], &opts(Some("link.add"))).unwrap_err();
    assert_eq!(e.to_string(), "the entry function \"link.add\" is not a bytecode function of any module");
    assert_eq!(
        format!("{:?}", link(&[("a", &a), ("b", &b)], &opts(Some("nope"))).expect_err("an error")),
        r#"LinkError(NotDefined { what: "the entry function", name: "nope" })"#
    );
    // Modules that declare different entries need one chosen.
    let b_entry = link(&[("b", &b)], &opts(Some("twice"))).unwrap();
    let e = link(&[("a.rvx", &a), ("b.rvx", &b_entry)], &opts(None)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "module 0 (\"a.rvx\") declares the entry function \"main\" but module 1 (\"b.rvx\") declares \"twice\": choose one (LinkOptions::entry, --entry)"
    );
    assert_eq!(link(&[("a", &a), ("b", &b_entry)], &opts(Some("main"))).unwrap().entry(), Some("main"));
    assert_eq!(link(&[("b", &b), ("a", &a)], &opts(None)).unwrap().entry(), Some("main"));
    assert_eq!(link(&[("b", &b)], &opts(None)).unwrap().entry(), None);
}

#[test]
fn unreachable_functions_and_their_constants_can_be_dropped() {
    let (a, b) = (module_a(), module_b());
    let opts = LinkOptions { drop_unreachable: true, ..Default::default() };
    let linked = link(&[("a", &a), ("b", &b)], &opts).unwrap();
    let names: Vec<&str> = linked.funcs().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["helper", "main", "link.first", "link.add", "twice", "link.mul"]);
    assert!(!linked.constants().iter().any(|c| c.as_str().is_ok_and(|s| s == "only used by unused")));
    assert_eq!(linked.constants().len(), 3, "10, the tensor and \"b\"");
    assert_eq!(run(&linked, "main", &[Value::Int(4)]).as_int().unwrap(), 34);
    assert_round_trip(&linked);
    // Functions to keep, and what they reach (here a function passed as an argument).
    let keep = LinkOptions { drop_unreachable: true, keep: vec!["table".into()], ..Default::default() };
    let linked = link(&[("a", &a), ("b", &b)], &keep).unwrap();
    assert!(linked.func("table").is_some() && linked.func("link.neg").is_some() && linked.func("unused").is_none());
    // Names to keep without dropping anything would do nothing: an error, not silence.
    let ignored = LinkOptions { keep: vec!["table".into()], ..Default::default() };
    let e = link(&[("a", &a), ("b", &b)], &ignored).unwrap_err();
    assert!(matches!(e.kind(), LinkErrorKind::KeepWithoutDrop(names) if names == "table"), "{e}");
    // Nothing to start from, or an unknown name to keep.
    let e = link(&[("b", &b)], &opts).unwrap_err();
    assert!(matches!(e.kind(), LinkErrorKind::NoEntry), "{e}");
    let e = drop_unreachable(&b, &["nope"]).unwrap_err();
    assert_eq!(e.to_string(), "function to keep \"nope\" is not a bytecode function of any module");
    // On its own: everything reachable from `twice` is just twice and link.add.
    let only = drop_unreachable(&b, &["twice"]).unwrap();
    assert_eq!(only.funcs().iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["twice", "link.add"]);
    assert!(only.constants().is_empty());
    assert_eq!(run(&only, "twice", &[Value::Int(5)]).as_int().unwrap(), 10);
}

#[test]
fn link_of_files_through_every_form() {
    // Save, load, link, save, load and print: the same program at every step.
    let (a, b) = (module_a(), module_b());
    let a = relaxvm::format::load_bytes(&a.save_to_bytes()).unwrap();
    let b = relaxvm_builder::assemble(&b.as_text()).unwrap();
    let linked = link(&[("a", &a), ("b", &b)], &LinkOptions::default()).unwrap();
    let direct = link(&[("a", &module_a()), ("b", &module_b())], &LinkOptions::default()).unwrap();
    assert_eq!(linked.as_text(), direct.as_text());
    assert_eq!(linked.save_to_bytes(), direct.save_to_bytes());
    assert!(link(&[], &LinkOptions::default()).unwrap().funcs().is_empty());
}

#[test]
fn import_executable_remaps_like_link() {
    let b = module_b();
    let mut ib = ExecBuilder::new();
    let t = ib.convert_constant(f32_tensor(&[2], vec![1.0, 2.0])).unwrap();
    ib.declare_function("helper", FuncKind::Packed).unwrap();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_call("helper", &[Reg(0)], Some(1))?;
        ib.emit_call("link.first", &[Reg(1), Const(t)], Some(2))?;
        ib.emit_ret(2)
    })
    .unwrap();
    ib.import_executable(&b).unwrap();
    assert_eq!(ib.function_kind("helper"), Some(FuncKind::Bytecode));
    // More code may follow the import, calling what it brought.
    func(&mut ib, "after", 1, |ib| {
        ib.emit_call("twice", &[Reg(0)], Some(1))?;
        ib.emit_ret(1)
    })
    .unwrap();
    let exe = ib.get().unwrap().executable;
    assert!(calls_bytecode(&exe, "main", 0, "helper"));
    assert!(calls_bytecode(&exe, "after", 0, "twice"));
    assert_eq!(exe.constants().len(), 2, "the tensor once, and \"b\"");
    assert_eq!(exe.signature("helper").unwrap().unwrap().to_string(), "(y: i64) -> i64");
    assert_eq!(exe.func("helper").unwrap().param_names, vec!["y"]);
    assert_eq!(run(&exe, "main", &[Value::Int(4)]).as_int().unwrap(), 24);
    assert_eq!(run(&exe, "after", &[Value::Int(4)]).as_int().unwrap(), 8);
    assert_round_trip(&exe);
    // The imported entry is adopted when the builder has none.
    let mut ib = ExecBuilder::new();
    ib.import_executable(&module_a()).unwrap();
    assert_eq!(ib.entry(), Some("main"));
    ib.import_executable(&b).unwrap();
    assert_eq!(run(&ib.get().unwrap().executable, "main", &[Value::Int(4)]).as_int().unwrap(), 34);
}

#[test]
fn failed_imports_leave_the_builder_unchanged() {
    let b = module_b();
    let mut ib = ExecBuilder::new();
    func(&mut ib, "twice", 1, |ib| ib.emit_ret(0)).unwrap();
    let before = ib.function_names().len();
    let e = ib.import_executable(&b).unwrap_err();
    assert!(matches!(e, BuildError::ImportConflict(ref n) if n == "twice"), "{e}");
    assert_eq!(e.to_string(), "function \"twice\" is defined both in the builder and in the imported executable");
    assert_eq!(ib.function_names().len(), before);
    assert!(ib.constants().is_empty());
    ib.function("open", 0, None).unwrap();
    let e = ib.import_executable(&b).unwrap_err();
    assert_eq!(e.to_string(), "cannot import an executable while function \"open\" is open: call end_function() first");
}

#[test]
fn builder_signatures_and_entry() {
    let sig: Signature = "(x: tensor<[n], f32>, k: f64) -> any".parse().unwrap();
    let mut ib = ExecBuilder::new();
    ib.function_with_signature("scale", sig.clone()).unwrap();
    ib.emit_ret(0).unwrap();
    ib.end_function().unwrap();
    // set_signature on a function opened with function(): names must agree.
    ib.function("g", 2, Some(vec!["x".into(), "y".into()])).unwrap();
    let e = ib.set_signature(sig.clone()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "function \"g\": the signature names the parameters (x, k), the function was opened with (x, y)"
    );
    let e = ib.set_signature("(x: i64) -> any".parse().unwrap()).unwrap_err();
    assert_eq!(e.to_string(), "function \"g\": the signature has 1 parameter, the function 2 inputs");
    ib.set_signature("(x: i64, y: i64) -> any".parse().unwrap()).unwrap();
    ib.emit_ret(1).unwrap();
    ib.end_function().unwrap();
    ib.function("h", 1, None).unwrap();
    ib.set_signature("(z: str) -> str".parse().unwrap()).unwrap();
    ib.emit_ret(0).unwrap();
    ib.end_function().unwrap();
    let e = ib.function_with_signature("bad", "(a: i64, a: i64) -> any".parse().unwrap()).unwrap_err();
    assert_eq!(e.to_string(), "function \"bad\": two parameters are named \"a\"");
    assert_eq!(
        format!("{:?}", ib.set_signature(sig).expect_err("an error")),
        r#"NoOpenFunction { op: "set_signature" }"#,
        "no open function"
    );
    ib.set_entry("later").unwrap();
    let e = ib.get().unwrap_err();
    assert_eq!(
        e.to_string(),
        "the entry function \"later\" is not a defined bytecode function: define it with function()"
    );
    func(&mut ib, "later", 0, |ib| {
        ib.emit_call("vm.builtin.null_value", &[], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    let exe = ib.get().unwrap().executable;
    assert_eq!(exe.entry(), Some("later"));
    assert_eq!(exe.func("h").unwrap().param_names, vec!["z"]);
    let text = exe.as_text();
    assert!(
        text.starts_with(".entry later\n\n@scale inputs=2 regs=2 sig=(x: tensor<[n], f32>, k: f64) -> any:\n"),
        "{text}"
    );
    assert_round_trip(&exe);
    let py = exe.as_python();
    assert!(
        py.contains("with ib.function(\"scale\", num_inputs=2, signature=\"(x: tensor<[n], f32>, k: f64) -> any\"):"),
        "{py}"
    );
    assert!(py.contains("ib.set_entry(\"later\")\nex = ib.get()\n"), "{py}");
}

#[test]
fn linked_executables_pass_the_builders_check() {
    let linked = link(&[("a", &module_a()), ("b", &module_b())], &LinkOptions::default()).unwrap();
    assert!(relaxvm_builder::check_executable(&linked).unwrap().is_empty());
}

#[test]
fn native_library_references_survive_linking_and_dropping() {
    use relaxvm::executable::{ExecutableParts, Library};
    use relaxvm::LibraryRef;
    let with = |exe: Executable, path: &str, hash: u64| {
        let reference = LibraryRef { path: path.into(), content_hash: hash };
        Executable::from_parts(ExecutableParts {
            libraries: vec![Library { reference, loaded: None }],
            ..exe.to_parts()
        })
        .unwrap()
    };
    let a = with(module_a(), "kernels.so", 1);
    let b = with(module_b(), "kernels.so", 1);
    let paths = |exe: &Executable| exe.libraries().iter().map(|l| l.reference.path.clone()).collect::<Vec<_>>();
    // The same library referenced by both modules is kept once.
    let linked = link(&[("a", &a), ("b", &b)], &LinkOptions::default()).unwrap();
    assert_eq!(paths(&linked), ["kernels.so"]);
    let b = with(module_b(), "other.so", 2);
    let linked = link(&[("a", &a), ("b", &b)], &LinkOptions::default()).unwrap();
    assert_eq!(paths(&linked), ["kernels.so", "other.so"]);
    let dropped = link(&[("a", &a), ("b", &b)], &LinkOptions { drop_unreachable: true, ..Default::default() }).unwrap();
    assert_eq!(paths(&dropped), ["kernels.so", "other.so"]);
    assert_eq!(paths(&drop_unreachable(&b, &["twice"]).unwrap()), ["other.so"]);
    assert_eq!(paths(&relaxvm::format::load_bytes(&linked.save_to_bytes()).unwrap()), paths(&linked));
}
