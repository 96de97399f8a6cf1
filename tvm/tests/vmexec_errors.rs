//! Every error path of the `relax.VMExecutable` and module-tree readers, on programs written
//! here byte by byte: each is refused with a message that says what was found and what was
//! expected.

use relaxvm_tvm::{library_bin, vmexec};

#[path = "support/dmlc.rs"]
mod dmlc;
use dmlc::W;

/// The parts of a program to vary; `Default` is a valid one: `main(x) { ret x }`.
struct Program {
    kind: i32,
    scope: &'static str,
    constant: Option<Vec<u8>>,
    offsets: Vec<i64>,
    data: Vec<i64>,
}

impl Default for Program {
    fn default() -> Self {
        Program { kind: 1, scope: "global", constant: None, offsets: vec![0], data: vec![2, 0] }
    }
}

fn encode(p: &Program) -> Vec<u8> {
    let mut w = W::default().u64(vmexec::MAGIC).str("0.14");
    // One function: kind, name, start, end, num_args, registers, param names.
    w = w.u64(1).i32(p.kind).str("main").i64(0).i64(p.offsets.len() as i64).i64(1).i64(2).u64(1).str("x");
    w = w.u64(1).i64(0).str(p.scope);
    w = match &p.constant {
        Some(c) => w.u64(1).bytes(c),
        None => w.u64(0),
    };
    w.vec_i64(&p.offsets).vec_i64(&p.data).0
}

fn error(p: Program) -> String {
    vmexec::read(&encode(&p)).expect_err("the program must be refused").to_string()
}

fn assert_has(e: &str, words: &[&str]) {
    assert!(words.iter().all(|w| e.contains(w)), "{e:?} lacks one of {words:?}");
}

/// A tensor constant: magic, reserved, device, ndim, dtype, shape, nbytes, data.
fn tensor(device_type: i32, lanes: u16) -> Vec<u8> {
    W::default()
        .i32(70)
        .u64(0xDD5E_40F0_96B4_A13F)
        .u64(0)
        .i32(device_type)
        .i32(0)
        .i32(1)
        .bytes(&[2, 32])
        .bytes(&lanes.to_le_bytes())
        .i64(2)
        .i64(8)
        .bytes(&[0; 8])
        .0
}

#[test]
fn the_base_program_loads() {
    let exe = vmexec::read(&encode(&Program::default())).unwrap();
    assert_eq!(exe.bytecode_function_names(), vec!["main"]);
    let with_tensor = Program { constant: Some(tensor(1, 1)), ..Default::default() };
    assert_eq!(vmexec::read(&encode(&with_tensor)).unwrap().constants().len(), 1);
}

#[test]
fn function_table_errors() {
    // A VM TIR function (exec_mode="compiled") loads as a bytecode wrapper of its machine code.
    let compiled =
        vmexec::read(&encode(&Program { kind: 2, offsets: vec![], data: vec![], ..Default::default() })).unwrap();
    assert_eq!(compiled.bytecode_function_names(), vec!["main"]);
    assert!(compiled.as_text().contains("call  __vmtir__main  in: %0, i2  dst: %1"), "{}", compiled.as_text());
    assert_has(&error(Program { kind: 7, ..Default::default() }), &["kind 7", "expected 0 (packed)"]);
}

#[test]
fn scope_and_constant_errors() {
    assert_has(&error(Program { scope: "global.texture", ..Default::default() }), &["\"global.texture\"", "CPU"]);
    let bad_type = W::default().i32(42).0;
    assert_has(&error(Program { constant: Some(bad_type), ..Default::default() }), &["type index 42", "supported"]);
    assert_has(&error(Program { constant: Some(tensor(2, 1)), ..Default::default() }), &["device type 2", "CPU"]);
    assert_has(&error(Program { constant: Some(tensor(1, 4)), ..Default::default() }), &["4 lanes"]);
    let bad_magic = W::default().i32(70).u64(7).0;
    assert_has(&error(Program { constant: Some(bad_magic), ..Default::default() }), &["tensor magic", "expected"]);
}

#[test]
fn code_errors_name_the_instruction() {
    let code = |offsets: Vec<i64>, data: Vec<i64>| error(Program { offsets, data, ..Default::default() });
    assert_has(&code(vec![0], vec![9]), &["instruction 0", "unknown opcode 9"]);
    assert_has(&code(vec![5], vec![2, 0]), &["instruction 0", "offset 5", "2 code words"]);
    assert_has(&code(vec![0], vec![2]), &["ends inside the result register"]);
    assert_has(&code(vec![0], vec![2, (1 << 54) + 5]), &["not an ordinary register"]);
    // call dst=void, func 0, one argument of kind 7.
    assert_has(&code(vec![0], vec![1, 1 << 54, 0, 1, 7 << 56]), &["kind 7", "expected 0 (register)"]);
    assert_has(&code(vec![0], vec![1, 1 << 54, 3, 0]), &["function index 3", "the table has 1"]);
    assert_has(&code(vec![0], vec![1, 1 << 54, 0, 1, (2 << 56) | 4]), &["constant index 4"]);
    assert_has(&code(vec![0], vec![1, 1 << 54, 0, 9]), &["argument count 9"]);
    // Decodes, but falls off the end: the verifier refuses it.
    assert_has(&code(vec![0], vec![3, 1]), &["fails verification"]);
}

#[test]
fn framing_errors() {
    let good = encode(&Program::default());
    let mut bad = good.clone();
    bad.push(0);
    assert_has(&vmexec::read(&bad).unwrap_err().to_string(), &["1 unexpected trailing bytes"]);
    let huge = W::default().u64(vmexec::MAGIC).str("0.14").u64(u64::MAX).0;
    assert_has(&vmexec::read(&huge).unwrap_err().to_string(), &["function table count", "only 0 remain"]);
}

#[test]
fn module_tree_errors() {
    let program = encode(&Program::default());
    let tree = |indptr: &[i64], children: &[i64], modules: &[(&str, Option<&[u8]>)]| {
        let mut w = W::default().vec_i64(indptr).vec_i64(children);
        for (kind, payload) in modules {
            w = w.str(kind);
            if let Some(p) = payload {
                w = w.u64(p.len() as u64).bytes(p);
            }
        }
        W::default().u64(w.0.len() as u64).bytes(&w.0).0
    };
    let ok = tree(&[0, 1, 1], &[1], &[("_lib", None), ("relax.VMExecutable", Some(&program))]);
    let modules = library_bin::modules(&ok).unwrap();
    assert_eq!(library_bin::vm_executable(&modules).unwrap(), &program[..]);
    let mut short = ok.clone();
    short.truncate(20);
    assert_has(&library_bin::modules(&short).unwrap_err().to_string(), &["declares", "holds only"]);
    let bad_child = tree(&[0, 1], &[5], &[("_lib", None)]);
    assert_has(&library_bin::modules(&bad_child).unwrap_err().to_string(), &["child index 5", "1 modules"]);
    let bad_indptr = tree(&[0, 2], &[0], &[("_lib", None)]);
    assert_has(&library_bin::modules(&bad_indptr).unwrap_err().to_string(), &["import_tree_indptr"]);
    let none = tree(&[], &[], &[("_lib", None), ("static_library", Some(b"x"))]);
    let none = library_bin::modules(&none).unwrap();
    assert_has(
        &library_bin::vm_executable(&none).unwrap_err().to_string(),
        &["no relax.VMExecutable", "static_library"],
    );
    let two = [("relax.VMExecutable", Some(&program[..])), ("relax.VMExecutable", Some(&program[..]))];
    let two = tree(&[], &[], &two);
    let two = library_bin::modules(&two).unwrap();
    assert_has(&library_bin::vm_executable(&two).unwrap_err().to_string(), &["2 relax.VMExecutable modules"]);
}
