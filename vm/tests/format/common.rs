//! Helpers shared by the format tests: a sample executable using every feature, and the
//! pieces to craft files by hand.

use relaxvm::format::{self, load_bytes, reseal, MAGIC};
use relaxvm::registry::register_global;
use relaxvm::{
    Arg, DataType, Device, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, Location, PackedFunc, Shape,
    Tensor, Value, VirtualMachine,
};
use std::path::PathBuf;
use std::sync::{Arc, Once};

pub fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_global(PackedFunc::typed("fmt.add", |a: i64, b: i64| a + b), true).unwrap();
        register_global(PackedFunc::from_fn("fmt.pack", |a| Ok(Value::tuple(a.to_vec()))), true).unwrap();
        register_global(
            PackedFunc::from_fn("fmt.sum_f32", |a| {
                Ok(Value::Float(a[0].as_tensor()?.to_vec::<f32>()?.iter().map(|x| f64::from(*x)).sum()))
            }),
            true,
        )
        .unwrap();
    });
}

pub fn bytecode(name: &str, range: (u32, u32), num_args: u32, regs: u32, params: &[&str]) -> FuncInfo {
    FuncInfo::bytecode(name, range.0, range.1, num_args, regs).with_param_names(params.iter().copied())
}

pub fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

/// Every constant kind.
pub fn all_constants() -> Vec<Value> {
    let matrix = Tensor::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let transposed =
        Tensor::from_parts(matrix.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::F32).unwrap();
    vec![
        Value::Null,
        Value::Int(-7),
        Value::Int(i64::MAX),
        Value::Float(2.5),
        Value::Float(f64::NEG_INFINITY),
        Value::Bool(true),
        Value::Bool(false),
        Value::str("hello, wörld"),
        Value::str(""),
        Value::Shape(Shape::from([2, -1, 3])),
        Value::Shape(Shape::from([])),
        Value::DType(DataType::BF16),
        Value::Device(Device::cpu(1)),
        Value::Tensor(matrix),
        Value::Tensor(transposed),
        Value::Tensor(Tensor::scalar(42i64)),
        Value::Tensor(Tensor::from_vec([0, 4], Vec::<u8>::new()).unwrap()),
        Value::Tensor(Tensor::from_vec([3], vec![true, false, true]).unwrap()),
        Value::tuple(vec![Value::Int(1), Value::str("hello, wörld"), Value::tuple(vec![Value::Null])]),
    ]
}

/// A program that uses every argument kind, a bytecode call, `if` and `goto`, locations of
/// every kind and parameter names. `main(x)` returns `x + 5 + 1` and `sum(t)` sums a tensor.
pub fn sample() -> Executable {
    use Arg::*;
    setup();
    let file = Location::File { file: "model.py".into(), line: 4, col: 2 };
    let name = Location::Name("relu".into());
    let callsite = Location::CallSite { callee: Box::new(name.clone()), caller: Box::new(file.clone()) };
    let fused = Location::Fused(vec![file.clone(), callsite.clone(), Location::Fused(vec![])]);
    let consts = all_constants();
    let n = consts.len() as u32;
    let instrs = vec![
        // main(x): 0..7
        call(1, vec![Reg(0), Imm(5)], Some(1)),
        call(2, vec![Reg(1)], Some(2)),
        Instruction::If { cond: 2, false_offset: 3 },
        call(3, vec![Void, VmState, Const(0), Const(n - 1), Func(2), Imm(-1)], Some(3)),
        Instruction::Goto { offset: 2 },
        Instruction::Ret { result: 0 },
        Instruction::Ret { result: 2 },
        // inc(y): 7..9
        call(1, vec![Reg(0), Imm(1)], Some(1)),
        Instruction::Ret { result: 1 },
        // sum(t): 9..11
        call(4, vec![Reg(0)], Some(1)),
        Instruction::Ret { result: 1 },
    ];
    let mut locations = vec![None; instrs.len()];
    locations[0] = Some(file.clone());
    locations[1] = Some(name);
    locations[3] = Some(callsite);
    locations[6] = Some(fused.clone());
    locations[8] = Some(fused);
    Executable::from_parts(ExecutableParts {
        funcs: vec![
            bytecode("main", (0, 7), 1, 4, &["x"]),
            FuncInfo::packed("fmt.add"),
            bytecode("inc", (7, 9), 1, 2, &["y"]),
            FuncInfo::packed("fmt.pack"),
            FuncInfo::packed("fmt.sum_f32"),
            bytecode("sum", (9, 11), 1, 2, &[]),
        ],
        constants: consts,
        instrs,
        locations,
        entry: None,
        libraries: vec![],
    })
    .unwrap()
}

/// `sample()` with signatures on its three bytecode functions (covering every type node) and
/// `main` as its declared entry.
pub fn sample_v3() -> Executable {
    let mut parts = sample().to_parts();
    let sigs = [
        ("main", "(x: i64) -> any"),
        ("inc", "(y: i64) -> dict<{\"k v\": tuple<str, object, bool, shape<?>, shape<2>>, l: list<tensor<*, ?>>}>"),
        ("sum", "(t: tensor<[n], f32, contiguous>) -> tuple<f64, tensor<[?, 3, n], bf16>>"),
    ];
    for (name, sig) in sigs {
        let f = parts.funcs.iter_mut().find(|f| f.name == name).unwrap();
        *f = f.clone().with_signature(sig.parse().unwrap());
    }
    parts.entry = Some("main".into());
    Executable::from_parts(parts).unwrap()
}

pub fn assert_same(a: &Executable, b: &Executable) {
    assert_eq!(a.funcs(), b.funcs());
    assert_eq!(a.declared_entry(), b.declared_entry());
    assert_eq!(a.instrs(), b.instrs());
    assert_eq!(a.constants().len(), b.constants().len());
    for (i, (x, y)) in a.constants().iter().zip(b.constants()).enumerate() {
        assert!(x.content_eq(y), "constant {i}: {x:?} != {y:?}");
    }
    for i in 0..a.instrs().len() {
        assert_eq!(a.location(i), b.location(i), "location of instruction {i}");
    }
}

pub fn run(exe: Executable) {
    let mut vm = VirtualMachine::new(Arc::new(exe)).unwrap();
    assert_eq!(vm.invoke("main", &[Value::Int(10)]).unwrap().as_int().unwrap(), 16);
    let t = Value::Tensor(Tensor::from_vec([2], vec![1.5f32, 2.0]).unwrap());
    if vm.signature("sum").unwrap().is_none() {
        // A version without signatures (or a file saved without them).
        assert_eq!(vm.invoke("sum", &[t]).unwrap().as_float().unwrap(), 3.5);
        return;
    }
    // `sum`'s signature declares a result of every kind the format encodes (a tuple), not the
    // float it returns: the VM's check of a declared result refuses it, naming the sum it
    // computed, which shows both that it ran and that its signature was read from the file.
    let e = vm.invoke("sum", &[t]).unwrap_err();
    assert!(
        matches!(e.root().kind(), ErrorKind::Type { expected, found }
            if expected == "tuple for result of sum" && found == "float 3.5"),
        "{e:?}"
    );
}

pub fn section<'a>(info: &'a format::FileInfo, name: &str) -> Option<&'a format::SectionInfo> {
    info.sections.iter().find(|s| s.name == Some(name))
}

pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("relaxvm-format-{}-{name}.rvx", std::process::id()))
}

// ---------------------------------------------------------------------------------------
// Hand-crafted files.

pub fn vint(x: u64) -> Vec<u8> {
    let bits = 64 - x.leading_zeros() as usize;
    let n = bits.div_ceil(7).max(1);
    if n > 8 {
        let mut out = vec![0];
        out.extend_from_slice(&x.to_le_bytes());
        return out;
    }
    ((x << n) | (1 << (n - 1))).to_le_bytes()[..n].to_vec()
}

pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A file of `sections` (id, data), with correct alignment, a checksum section and valid
/// checksums.
pub fn craft(version: u64, sections: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.extend(vint(version));
    f.extend(vint(5));
    f.extend_from_slice(b"craft");
    for (id, data) in sections {
        f.push(*id);
        f.extend(vint(data.len() as u64));
        if id & 0x80 != 0 {
            f.extend(vint(64));
            while !f.len().is_multiple_of(64) {
                f.push(0xCB);
            }
        }
        f.extend_from_slice(data);
    }
    f.extend_from_slice(&[0x3F, 0x11]);
    f.extend_from_slice(&[0; 8]);
    // Files with broken framing cannot be resealed; they fail before the checksum matters.
    let _ = reseal(&mut f);
    f
}

pub const STRINGS: u8 = 1;
pub const FUNCTIONS: u8 = 2;
pub const CONSTANTS: u8 = 3;
pub const INSTRUCTIONS: u8 = 4;
pub const PARAMS: u8 = 5;
pub const LOCATIONS: u8 = 6;
pub const TENSOR_DATA: u8 = 0xC7;
pub const SIGNATURES: u8 = 8;
pub const ENTRY: u8 = 9;

pub fn strings(items: &[&str]) -> Vec<u8> {
    let mut out = vint(items.len() as u64);
    for s in items {
        out.extend(vint(s.len() as u64));
    }
    for s in items {
        out.extend_from_slice(s.as_bytes());
    }
    out
}

/// `main` (string 0): one input, `regs` registers, the given (v2) instructions.
pub fn minimal_with(regs: u64, instrs: &[u8], n_instrs: u64, consts: Vec<u8>) -> Vec<(u8, Vec<u8>)> {
    vec![
        (STRINGS, strings(&["main", "f"])),
        (FUNCTIONS, cat(&[&vint(2), &vint(1), &vint(0), &vint(n_instrs), &vint(1), &vint(regs), &vint(1 << 1)])),
        (CONSTANTS, consts),
        (INSTRUCTIONS, cat(&[&vint(n_instrs), instrs])),
    ]
}

/// `main(x) = ret x`.
pub fn minimal() -> Vec<(u8, Vec<u8>)> {
    minimal_with(1, &[0x40], 1, vint(0))
}

pub fn load_err(bytes: &[u8]) -> String {
    match load_bytes(bytes) {
        Ok(_) => panic!("loaded a malformed file"),
        Err(e) => e.to_string(),
    }
}

pub fn expect_err(sections: &[(u8, Vec<u8>)], needle: &str) {
    let e = load_err(&craft(2, sections));
    assert!(e.contains(needle), "expected {needle:?} in: {e}");
}

pub fn with_library(exe: Executable) -> Executable {
    let reference = relaxvm::LibraryRef { path: "/models/kernels.so".into(), content_hash: 0x0123_4567_89AB_CDEF };
    exe.with_libraries(vec![relaxvm::executable::Library { reference, loaded: None }])
}
