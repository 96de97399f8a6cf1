//! The whole message of every error of the `relax.VMExecutable` reader (tests/vmexec_errors.rs
//! checks that each is raised; this checks what each says: the field, the value found, what was
//! expected and the byte offset), on programs written here byte by byte. Every one is a format
//! error.

use relaxvm::ErrorKind;
use relaxvm_tvm::vmexec;

#[path = "support/dmlc.rs"]
mod dmlc;
use dmlc::W;

/// The fields of a one-function program to vary; `Default` is `main(x) { ret x }`.
#[derive(Clone)]
struct Program {
    version: &'static str,
    kind: i32,
    name: Vec<u8>,
    num_args: i64,
    registers: i64,
    scope: &'static str,
    constant: Option<Vec<u8>>,
    offsets: Vec<i64>,
    code: Vec<i64>,
}

impl Default for Program {
    fn default() -> Self {
        Program {
            version: "0.14",
            kind: 1,
            name: b"main".to_vec(),
            num_args: 1,
            registers: 2,
            scope: "global",
            constant: None,
            offsets: vec![0],
            code: vec![2, 0],
        }
    }
}

fn encode(p: &Program) -> Vec<u8> {
    let mut w = W::default().u64(vmexec::MAGIC).str(p.version);
    w = w.u64(1).i32(p.kind).u64(p.name.len() as u64).bytes(&p.name);
    w = w.i64(0).i64(1).i64(p.num_args).i64(p.registers).u64(1).str("x");
    w = w.u64(1).i64(0).str(p.scope);
    w = match &p.constant {
        Some(c) => w.u64(1).bytes(c),
        None => w.u64(0),
    };
    w = w.vec_i64(&p.offsets);
    w.vec_i64(&p.code).0
}

/// A tensor constant: type index, magic, reserved, device, ndim, dtype, shape, nbytes, data.
fn tensor(magic: u64, device_type: i32, ndim: i32) -> Vec<u8> {
    let w = W::default().i32(70).u64(magic).u64(0).i32(device_type).i32(0).i32(ndim).bytes(&[2, 32, 1, 0]);
    (0..ndim.max(0)).fold(w, |w, _| w.i64(1)).i64(4).bytes(&[0; 4]).0
}

const TENSOR_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;

/// The message of the format error `bytes` is refused with.
fn refused(bytes: &[u8]) -> String {
    let e = vmexec::read(bytes).expect_err("refused");
    assert!(matches!(e.kind(), ErrorKind::Format(_)), "not a format error: {e:?}");
    e.to_string()
}

fn with(p: Program) -> String {
    refused(&encode(&p))
}

#[test]
fn the_base_programs_load() {
    vmexec::read(&encode(&Program::default())).unwrap();
    let t = Program { constant: Some(tensor(TENSOR_MAGIC, 1, 1)), ..Default::default() };
    vmexec::read(&encode(&t)).unwrap();
}

#[test]
fn header_and_function_table() {
    let mut bad = encode(&Program::default());
    bad[..8].copy_from_slice(&7u64.to_le_bytes());
    assert!(refused(&bad)
        .ends_with("not a TVM relax.VMExecutable: magic number 0x0000000000000007, expected 0xd225de2f4214151e"));
    assert!(with(Program { version: "0.13", ..Default::default() }).ends_with(
        "relax.VMExecutable version \"0.13\" is not supported; this reader supports version 0.14 (Apache TVM 0.27)"
    ));
    // The function entry starts after the magic (8), the version (8 + 4) and the count (8).
    assert!(with(Program { kind: 7, ..Default::default() }).ends_with(
        "relax.VMExecutable at byte 28: function \"main\" has kind 7; expected 0 (packed), 1 (VM function) or 2 (VM TIR function)"
    ));
    assert!(with(Program { kind: 2, registers: 1, ..Default::default() }).ends_with(
        "relax.VMExecutable at byte 28: VM TIR function 0 (\"main\") has 1 registers for 1 inputs; it needs one more, for its result"
    ));
    assert!(with(Program { kind: 2, registers: (1 << 22) + 1, ..Default::default() })
        .ends_with("VM TIR function \"main\" declares 4194305 registers; at most 4194304 are supported"));
    // A VM function's 32-bit fields, each named: its argument and register counts.
    assert!(with(Program { num_args: -1, ..Default::default() })
        .ends_with("relax.VMExecutable at byte 28: function 0 (\"main\") has num_args -1, outside 0..2^32"));
    assert!(with(Program { registers: 1 << 32, ..Default::default() }).ends_with(
        "relax.VMExecutable at byte 28: function 0 (\"main\") has register_file_size 4294967296, outside 0..2^32"
    ));
    assert!(with(Program { name: vec![0x6d, 0xff], ..Default::default() })
        .ends_with("relax.VMExecutable at byte 40: function name is not valid UTF-8"));
    let cut = &encode(&Program::default())[..4];
    assert!(refused(cut)
        .ends_with("relax.VMExecutable at byte 0: magic number needs 8 bytes, but only 4 remain (truncated?)"));
    let huge = W::default().u64(vmexec::MAGIC).str("0.14").u64(1 << 40).0;
    assert!(refused(&huge).ends_with(
        "relax.VMExecutable at byte 20: function table count 1099511627776 needs at least 57174604644352 bytes, but only 0 remain"
    ));
}

#[test]
fn scopes_and_constants() {
    assert!(with(Program { scope: "global.texture", ..Default::default() }).contains(
        "constant 0 lives in memory scope \"global.texture\"; relaxvm runs CPU programs, whose one scope is \"global\""
    ));
    let c = |bytes: Vec<u8>| with(Program { constant: Some(bytes), ..Default::default() });
    assert!(c(W::default().i32(42).0).contains(
        "constant 0 has tvm-ffi type index 42; supported: 1 (int), 3 (float), 5 (dtype), 65 (string), 69 (shape), 70 (tensor)"
    ));
    assert!(c(W::default().i32(69).u64(2).i64(3).i64(-3).0).contains("shape constant has negative dimension -3"));
    assert!(c(tensor(7, 1, 1)).contains("tensor magic number 0x0000000000000007, expected 0xdd5e40f096b4a13f"));
    assert!(c(tensor(TENSOR_MAGIC, 2, 1))
        .contains("tensor constant on device type 2; relaxvm runs CPU (device type 1) programs"));
    assert!(c(tensor(TENSOR_MAGIC, 1, 65)).contains("tensor ndim 65 (expected 0..=64)"));
    // A shape whose element count overflows, and a byte count that does not match the shape.
    let header = || W::default().i32(70).u64(TENSOR_MAGIC).u64(0).i32(1).i32(0);
    let huge = header().i32(2).bytes(&[2, 32, 1, 0]).i64(i64::MAX).i64(2).i64(4).0;
    assert!(c(huge).contains("tensor shape [9223372036854775807, 2] is invalid or too large"));
    let short = header().i32(1).bytes(&[2, 32, 1, 0]).i64(1).i64(5).bytes(&[0; 5]).0;
    assert!(c(short).contains("tensor of shape [1] and dtype float32 declares 5 bytes, expected 4"));
}

#[test]
fn code_words() {
    let code = |words: Vec<i64>| with(Program { code: words, ..Default::default() });
    assert!(code(vec![9, 0])
        .contains("relax.VMExecutable code, instruction 0 (code word 0): unknown opcode 9; expected 1 (call), 2 (ret), 3 (goto) or 4 (if)"));
    // call dst=void, function 0, one argument whose kind (the top byte) is 7.
    assert!(code(vec![1, 1 << 54, 0, 1, 7 << 56]).contains(
        "argument word 0x700000000000000 has kind 7; expected 0 (register), 1 (immediate), 2 (constant) or 3 (function)"
    ));
}

#[test]
fn instruction_offsets() {
    let code = |offsets: Vec<i64>, words: Vec<i64>| with(Program { offsets, code: words, ..Default::default() });
    assert_eq!(
        code(vec![5], vec![2, 0]),
        "malformed executable file: relax.VMExecutable code, instruction 0: offset 5 is outside the 2 code words"
    );
    assert_eq!(
        code(vec![0, 0], vec![2, 0, 2, 0]),
        "malformed executable file: relax.VMExecutable code, instruction 1: offset 0 does not follow instruction 0 at code word 0 (offsets must increase, within the 4 code words)"
    );
}

/// The `__tvm_ffi__library_bin` blob: its size, the import tree, and the modules (kind, and a
/// payload for all but `_lib`).
fn blob(indptr: &[i64], children: &[i64], modules: &[(&str, Option<&[u8]>)]) -> Vec<u8> {
    let mut w = W::default().u64(indptr.len() as u64);
    w = indptr.iter().fold(w, |w, x| w.i64(*x)).u64(children.len() as u64);
    w = children.iter().fold(w, |w, x| w.i64(*x));
    for (kind, payload) in modules {
        w = w.str(kind);
        if let Some(p) = payload {
            w = w.u64(p.len() as u64).bytes(p);
        }
    }
    W::default().u64(w.0.len() as u64).bytes(&w.0).0
}

fn format_error(e: relaxvm::Error) -> String {
    assert!(matches!(e.kind(), ErrorKind::Format(_)), "not a format error: {e:?}");
    e.to_string()
}

#[test]
fn module_tree() {
    use relaxvm_tvm::library_bin::{modules, vm_executable};
    let program = encode(&Program::default());
    let good = blob(&[0, 1, 1], &[1], &[("_lib", None), ("relax.VMExecutable", Some(&program))]);
    assert_eq!(vm_executable(&modules(&good).unwrap()).unwrap(), &program[..]);
    let e = format_error(modules(&good[..20]).unwrap_err());
    let declared = good.len() - 8;
    assert!(
        e.ends_with(&format!("the blob declares {declared} bytes, but the symbol holds only 12 after the size")),
        "{e}"
    );
    let mut longer = good.clone();
    longer.push(0);
    let e = format_error(modules(&longer).unwrap_err());
    assert!(
        e.ends_with(&format!(
            "the blob declares {declared} bytes, but the symbol holds {} after the size",
            declared + 1
        )),
        "{e}"
    );
    let e = format_error(modules(&blob(&[0, 1], &[5], &[("_lib", None)])).unwrap_err());
    assert_eq!(e, "malformed executable file: module tree of __tvm_ffi__library_bin: import child index 5 but there are 1 modules");
    let e = format_error(modules(&blob(&[0, 2], &[0], &[("_lib", None)])).unwrap_err());
    assert_eq!(
        e,
        "malformed executable file: module tree of __tvm_ffi__library_bin: import_tree_indptr is not an increasing index into the children"
    );
    let none = blob(&[], &[], &[("_lib", None), ("static_library", Some(b"x"))]);
    let e = format_error(vm_executable(&modules(&none).unwrap()).unwrap_err());
    assert!(e.ends_with(
        "the library holds no relax.VMExecutable module (found: _lib, static_library); only Relax VM programs (tvm.compile of a Relax module) can run"
    ), "{e}");
    let two = blob(&[], &[], &[("relax.VMExecutable", Some(&program)), ("relax.VMExecutable", Some(&program))]);
    let e = format_error(vm_executable(&modules(&two).unwrap()).unwrap_err());
    assert!(e.ends_with("the library holds 2 relax.VMExecutable modules; expected one"), "{e}");
}
