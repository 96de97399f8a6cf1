//! The binary format: round trips, versions, debug stripping, zero-copy mapping, skipped
//! sections, and hand-crafted malformed files (each must be an error, never a panic).

use relaxvm::format::{
    self, inspect, load_bytes, load_bytes_with, reseal, LoadOptions, SaveOptions, CURRENT_VERSION, MAGIC, VERSION_1,
    VERSION_2, VERSION_3, VERSION_4,
};
use relaxvm::registry::register_global;
use relaxvm::{
    Arg, DataType, Device, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, Location, PackedFunc, Shape,
    Tensor, Value, VirtualMachine,
};
use std::path::PathBuf;
use std::sync::{Arc, Once};

fn setup() {
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

fn bytecode(name: &str, range: (u32, u32), num_args: u32, regs: u32, params: &[&str]) -> FuncInfo {
    FuncInfo::bytecode(name, range.0, range.1, num_args, regs).with_param_names(params.iter().copied())
}

fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

/// Every constant kind.
fn all_constants() -> Vec<Value> {
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
fn sample() -> Executable {
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
fn sample_v3() -> Executable {
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

fn assert_same(a: &Executable, b: &Executable) {
    assert_eq!(a.funcs(), b.funcs());
    assert_eq!(a.declared_entry(), b.declared_entry());
    assert_eq!(a.instrs(), b.instrs());
    assert_eq!(a.constants().len(), b.constants().len());
    for (i, (x, y)) in a.constants().iter().zip(b.constants()).enumerate() {
        assert!(x.same_as(y), "constant {i}: {x:?} != {y:?}");
    }
    for i in 0..a.instrs().len() {
        assert_eq!(a.location(i), b.location(i), "location of instruction {i}");
    }
}

fn run(exe: Executable) {
    let mut vm = VirtualMachine::new(Arc::new(exe)).unwrap();
    assert_eq!(vm.invoke("main", &[Value::Int(10)]).unwrap().as_int().unwrap(), 16);
    let t = Value::Tensor(Tensor::from_vec([2], vec![1.5f32, 2.0]).unwrap());
    assert_eq!(vm.invoke("sum", &[t]).unwrap().as_float().unwrap(), 3.5);
}

fn section<'a>(info: &'a format::FileInfo, name: &str) -> Option<&'a format::SectionInfo> {
    info.sections.iter().find(|s| s.name == Some(name))
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("relaxvm-format-{}-{name}.rvx", std::process::id()))
}

#[test]
fn round_trip_is_byte_identical_in_every_version() {
    let exe = sample();
    for version in [VERSION_1, VERSION_2, VERSION_3, VERSION_4] {
        let opts = SaveOptions { version, ..Default::default() };
        let bytes = format::save_to_bytes(&exe, &opts);
        let back = load_bytes(&bytes).unwrap();
        assert_same(&exe, &back);
        assert_eq!(format::save_to_bytes(&back, &opts), bytes, "version {version}");
        assert_eq!(inspect(&bytes).unwrap().version, version);
        run(back);
    }
    assert_eq!(exe.save_to_bytes(), format::save_to_bytes(&exe, &SaveOptions::default()));
    assert_eq!(inspect(&exe.save_to_bytes()).unwrap().version, CURRENT_VERSION);
}

#[test]
fn signatures_and_entry_round_trip_in_version_3() {
    let exe = sample_v3();
    let bytes = exe.save_to_bytes();
    let info = inspect(&bytes).unwrap();
    assert_eq!(info.version, CURRENT_VERSION);
    assert!(section(&info, "signatures").is_some() && section(&info, "entry").is_some());
    let back = load_bytes(&bytes).unwrap();
    assert_same(&exe, &back);
    assert_eq!(back.save_to_bytes(), bytes);
    assert_eq!(back.entry(), Some("main"));
    assert_eq!(back.signature("sum").unwrap().unwrap().to_string(), exe.signature("sum").unwrap().unwrap().to_string());
    run(back);
    // Signatures are not debug information: stripping keeps them, and the parameter names
    // they give, while unsigned functions lose theirs.
    let stripped = format::save_to_bytes(&exe, &SaveOptions { strip_debug: true, ..Default::default() });
    let back = load_bytes(&stripped).unwrap();
    assert!(back.funcs().iter().filter(|f| f.signature.is_some()).all(|f| !f.param_names.is_empty()));
    assert_eq!(back.func("inc").unwrap().param_names, vec!["y"]);
    assert_eq!(back.declared_entry(), Some("main"));
    assert!(!back.has_locations());
    // Without signatures or an entry, a version-3 file has neither section.
    let plain = inspect(&sample().save_to_bytes()).unwrap();
    assert!(section(&plain, "signatures").is_none() && section(&plain, "entry").is_none());
}

#[test]
fn back_deployment_drops_signatures_and_the_entry() {
    let exe = sample_v3();
    for version in [VERSION_1, VERSION_2] {
        let bytes = format::save_to_bytes(&exe, &SaveOptions { version, ..Default::default() });
        let info = inspect(&bytes).unwrap();
        assert!(section(&info, "signatures").is_none() && section(&info, "entry").is_none());
        let back = load_bytes(&bytes).unwrap();
        assert!(!back.has_signatures() && back.declared_entry().is_none(), "version {version}");
        // Parameter names survive as debug information; the entry defaults to main.
        assert_eq!(back.func("inc").unwrap().param_names, vec!["y"]);
        assert_eq!(back.entry(), Some("main"));
        assert_eq!(back.instrs(), exe.instrs());
        assert_eq!(format::save_to_bytes(&back, &SaveOptions { version, ..Default::default() }), bytes);
        // What survives is exactly `without_abi()`.
        assert_eq!(back.save_to_bytes(), exe.without_abi().save_to_bytes());
        run(back);
    }
}

#[test]
fn sample_uses_every_arg_kind_and_location_kind() {
    let exe = sample();
    let kinds: std::collections::HashSet<_> = exe
        .instrs()
        .iter()
        .flat_map(|i| match i {
            Instruction::Call { args, .. } => args.iter().map(std::mem::discriminant).collect(),
            _ => vec![],
        })
        .collect();
    assert_eq!(kinds.len(), 6);
    let back = load_bytes(&exe.save_to_bytes()).unwrap();
    assert!(matches!(back.location(0), Some(Location::File { .. })));
    assert!(matches!(back.location(1), Some(Location::Name(_))));
    assert!(matches!(back.location(3), Some(Location::CallSite { .. })));
    assert!(matches!(back.location(6), Some(Location::Fused(_))));
    assert_eq!(back.funcs()[0].param_names, vec!["x"]);
    // The tuple constant shares its string with the plain string constant.
    let tuple = back.constants().last().unwrap().as_tuple().unwrap().to_vec();
    assert_eq!(tuple[1].as_str().unwrap(), "hello, wörld");
}

#[test]
fn strided_tensors_are_saved_contiguous() {
    let back = load_bytes(&sample().save_to_bytes()).unwrap();
    let t = back.constants()[14].as_tensor().unwrap();
    assert!(t.is_contiguous());
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    for c in back.constants() {
        if let Value::Tensor(t) = c {
            assert_eq!(t.data_ptr() as usize % 64, 0, "tensor data is 64-byte aligned");
        }
    }
}

#[test]
fn strip_debug_leaves_out_locations_and_parameter_names() {
    let exe = sample();
    let full = exe.save_to_bytes();
    let stripped = format::save_to_bytes(&exe, &SaveOptions { strip_debug: true, ..Default::default() });
    assert!(stripped.len() < full.len());
    let info = inspect(&stripped).unwrap();
    assert!(section(&info, "locations").is_none() && section(&info, "parameter names").is_none());
    let full_info = inspect(&full).unwrap();
    assert!(section(&full_info, "locations").is_some() && section(&full_info, "parameter names").is_some());
    let back = load_bytes(&stripped).unwrap();
    assert!(!back.has_locations());
    assert!(back.funcs().iter().all(|f| f.param_names.is_empty()));
    assert_eq!(back.instrs(), exe.instrs());
    // The debug-only strings are gone from the string table too.
    assert!(!stripped.windows(8).any(|w| w == b"model.py"));
    assert_eq!(back.save_to_bytes(), stripped);
    run(back);
}

#[test]
fn back_deployment_writes_the_previous_version() {
    let exe = sample();
    let v1 = format::save_to_bytes(&exe, &SaveOptions { version: VERSION_1, ..Default::default() });
    let v2 = exe.save_to_bytes();
    let len = |b: &[u8]| {
        let info = inspect(b).unwrap();
        let s = section(&info, "instructions").unwrap();
        s.data.end - s.data.start
    };
    assert!(len(&v2) < len(&v1), "v2 instructions {} bytes, v1 {}", len(&v2), len(&v1));
    // Upgrading: load v1, save current.
    assert_eq!(load_bytes(&v1).unwrap().save_to_bytes(), v2);
    for bad in [0, CURRENT_VERSION + 1] {
        let e = format::try_save_to_bytes(&exe, &SaveOptions { version: bad, ..Default::default() }).unwrap_err();
        assert!(e.to_string().contains("cannot write format version"), "{e}");
    }
}

#[test]
fn unsavable_constants_are_errors() {
    let exe = Executable::from_parts(ExecutableParts {
        constants: vec![Value::packed(PackedFunc::from_fn("f", |_| Ok(Value::Null)))],
        ..Default::default()
    })
    .unwrap();
    let e = format::try_save_to_bytes(&exe, &SaveOptions::default()).unwrap_err().to_string();
    assert!(e.contains("c[0]") && e.contains("function"), "{e}");
}

#[test]
fn one_register_call_takes_at_most_12_bytes() {
    // The peer (TVM) writes 48 bytes for this instruction; a quarter of that is the bar.
    let n = 1000u32;
    let mut instrs: Vec<Instruction> = (0..n).map(|i| call(1, vec![Arg::Reg(i % 100)], Some(i % 100 + 1))).collect();
    instrs.push(Instruction::Ret { result: 0 });
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![bytecode("main", (0, n + 1), 1, 128, &[]), FuncInfo::packed("fmt.neg")],
        instrs,
        ..Default::default()
    })
    .unwrap();
    for (version, bar) in [(VERSION_1, 12.0), (VERSION_2, 4.0)] {
        let bytes = format::save_to_bytes(&exe, &SaveOptions { version, ..Default::default() });
        let info = inspect(&bytes).unwrap();
        let s = section(&info, "instructions").unwrap();
        let per = (s.data.end - s.data.start) as f64 / f64::from(n + 1);
        println!("version {version}: {per:.2} bytes per 1-register call with destination");
        assert!(per <= bar, "version {version}: {per} bytes per instruction");
    }
}

#[test]
fn save_and_load_file() {
    let exe = sample();
    let path = temp_path("save-load");
    exe.save(&path, &SaveOptions::default()).unwrap();
    let back = format::load_file(&path).unwrap();
    assert_same(&exe, &back);
    assert_eq!(std::fs::read(&path).unwrap(), exe.save_to_bytes());
    // Replacing the file while `back` maps it leaves `back` intact.
    let other = Executable::from_parts(ExecutableParts::default()).unwrap();
    other.save(&path, &SaveOptions::default()).unwrap();
    assert_same(&exe, &back);
    assert!(Executable::load_file(&path).unwrap().funcs().is_empty());
    std::fs::remove_file(&path).unwrap();
    let e = format::load_file(&path).unwrap_err().to_string();
    assert!(e.contains(&*path.to_string_lossy()), "{e}");
    run(back);
}

#[cfg(target_os = "linux")]
fn mapping_of(path: &std::path::Path) -> Vec<(usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let name = path.to_string_lossy();
    maps.lines()
        .filter(|l| l.ends_with(&*name))
        .map(|l| {
            let range = l.split_whitespace().next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            (usize::from_str_radix(a, 16).unwrap(), usize::from_str_radix(b, 16).unwrap())
        })
        .collect()
}

#[test]
#[cfg(target_os = "linux")]
fn load_file_maps_tensor_data_in_place() {
    let exe = sample();
    let path = temp_path("mmap");
    exe.save(&path, &SaveOptions::default()).unwrap();
    let loaded = format::load_file_with(&path, &LoadOptions::trusted_mmap()).unwrap();
    let maps = mapping_of(&path);
    assert!(!maps.is_empty(), "the file is mapped");
    let t = loaded.constants()[13].as_tensor().unwrap().clone();
    let p = t.data_ptr() as usize;
    assert!(maps.iter().any(|(a, b)| (*a..*b).contains(&p)), "tensor data at {p:#x} lies in the mapping {maps:x?}");
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // A constant is read-only: writing it is an error, and the data and the file stay as they were.
    assert_eq!(
        format!("{:?}", t.storage().write(t.byte_offset(), &9.0f32.to_le_bytes()).expect_err("an error")),
        r#"Value("cannot write to 4 bytes of read-only storage (a constant of an executable, or read-only memory)")"#
    );
    assert_eq!(t.to_vec::<f32>().unwrap()[0], 1.0);
    assert_eq!(std::fs::read(&path).unwrap(), exe.save_to_bytes());
    // The tensor keeps the mapping alive after the executable is gone.
    drop(loaded);
    assert_eq!(t.to_vec::<f32>().unwrap()[1], 2.0);
    drop(t);
    assert!(mapping_of(&path).is_empty(), "the mapping is released with the last tensor");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn load_bytes_copies_tensor_data() {
    let bytes = sample().save_to_bytes();
    let exe = load_bytes(&bytes).unwrap();
    let t = exe.constants()[13].as_tensor().unwrap();
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    assert!(!range.contains(&(t.data_ptr() as usize)));
    drop(bytes);
    assert_eq!(t.to_vec::<f32>().unwrap()[5], 6.0);
}

// ---------------------------------------------------------------------------------------
// Hand-crafted files.

fn vint(x: u64) -> Vec<u8> {
    let bits = 64 - x.leading_zeros() as usize;
    let n = bits.div_ceil(7).max(1);
    if n > 8 {
        let mut out = vec![0];
        out.extend_from_slice(&x.to_le_bytes());
        return out;
    }
    ((x << n) | (1 << (n - 1))).to_le_bytes()[..n].to_vec()
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A file of `sections` (id, data), with correct alignment, a checksum section and valid
/// checksums.
fn craft(version: u64, sections: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.extend(vint(version));
    f.extend(vint(5));
    f.extend_from_slice(b"craft");
    for (id, data) in sections {
        f.push(*id);
        f.extend(vint(data.len() as u64));
        if id & 0x80 != 0 {
            f.extend(vint(64));
            while f.len() % 64 != 0 {
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

const STRINGS: u8 = 1;
const FUNCTIONS: u8 = 2;
const CONSTANTS: u8 = 3;
const INSTRUCTIONS: u8 = 4;
const PARAMS: u8 = 5;
const LOCATIONS: u8 = 6;
const TENSOR_DATA: u8 = 0xC7;
const SIGNATURES: u8 = 8;
const ENTRY: u8 = 9;

fn strings(items: &[&str]) -> Vec<u8> {
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
fn minimal_with(regs: u64, instrs: &[u8], n_instrs: u64, consts: Vec<u8>) -> Vec<(u8, Vec<u8>)> {
    vec![
        (STRINGS, strings(&["main", "f"])),
        (FUNCTIONS, cat(&[&vint(2), &vint(1), &vint(0), &vint(n_instrs), &vint(1), &vint(regs), &vint(1 << 1)])),
        (CONSTANTS, consts),
        (INSTRUCTIONS, cat(&[&vint(n_instrs), instrs])),
    ]
}

/// `main(x) = ret x`.
fn minimal() -> Vec<(u8, Vec<u8>)> {
    minimal_with(1, &[0x40], 1, vint(0))
}

fn load_err(bytes: &[u8]) -> String {
    match load_bytes(bytes) {
        Ok(_) => panic!("loaded a malformed file"),
        Err(e) => e.to_string(),
    }
}

fn expect_err(sections: &[(u8, Vec<u8>)], needle: &str) {
    let e = load_err(&craft(2, sections));
    assert!(e.contains(needle), "expected {needle:?} in: {e}");
}

#[test]
fn crafted_minimal_file_loads() {
    let exe = load_bytes(&craft(2, &minimal())).unwrap();
    assert_eq!(exe.funcs()[0].name, "main");
    assert_eq!(exe.funcs()[1], FuncInfo::packed("f"));
    assert_eq!(exe.instrs(), &[Instruction::Ret { result: 0 }]);
}

#[test]
fn bad_magic_and_future_versions_are_rejected() {
    let mut bytes = craft(2, &minimal());
    bytes[1] = b'X';
    assert!(load_err(&bytes).contains("bad magic number"));
    assert!(load_err(b"").contains("too short"));
    let future = craft(u64::from(CURRENT_VERSION) + 1, &minimal());
    let e = load_err(&future);
    assert!(
        e.contains(&format!("unsupported format version {}", CURRENT_VERSION + 1)) && e.contains("header at byte 4"),
        "{e}"
    );
    assert!(load_err(&craft(0, &minimal())).contains("unsupported format version 0"));
    assert!(load_err(&craft(u64::MAX, &minimal())).contains("unsupported format version"));
}

#[test]
fn every_truncation_is_an_error() {
    for bytes in [craft(2, &minimal()), sample().save_to_bytes(), sample_v3().save_to_bytes()] {
        for n in 0..bytes.len() {
            let e = load_err(&bytes[..n]);
            assert!(e.contains("byte"), "truncated at {n}: {e}");
        }
    }
}

#[test]
fn every_flipped_bit_is_caught() {
    let bytes = sample_v3().save_to_bytes();
    for i in 0..bytes.len() {
        for bit in [0, 3, 7] {
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            assert!(
                format!("{:?}", load_bytes(&bad).expect_err("an error")).starts_with(r#"Format("#),
                "flipping bit {bit} of byte {i} went unnoticed"
            );
        }
    }
}

#[test]
fn load_file_checks_every_byte_and_trusted_mmap_only_the_metadata() {
    let bytes = sample().save_to_bytes();
    let info = inspect(&bytes).unwrap();
    let data = section(&info, "tensor data").unwrap().data.clone();
    let mut bad = bytes.clone();
    bad[data.start as usize] ^= 1;
    assert!(load_err(&bad).contains("data checksum mismatch"));
    let path = temp_path("data-crc");
    std::fs::write(&path, &bad).unwrap();
    assert!(format::load_file_with(&path, &LoadOptions::trusted_mmap()).is_ok());
    let e = format::load_file(&path).unwrap_err().to_string();
    assert!(e.contains("tensor data section at byte") && e.contains("corrupt"), "{e}");
    std::fs::remove_file(&path).unwrap();
    // Without checksums, corrupt metadata is still decoded safely.
    let unchecked = LoadOptions { verify_checksum: false, verify_data_checksum: false, mmap: false };
    assert!(load_bytes_with(&bad, &unchecked).is_ok());
}

#[test]
fn unknown_sections_are_skipped() {
    let mut sections = minimal();
    sections.insert(1, (0x21, b"from the future".to_vec()));
    sections.push((0xE2, vec![7; 100])); // aligned, bulk, unknown
    sections.push((0x00, vec![]));
    let bytes = craft(2, &sections);
    let info = inspect(&bytes).unwrap();
    assert_eq!(info.sections.iter().filter(|s| s.name.is_none()).count(), 3);
    let exe = load_bytes(&bytes).unwrap();
    assert_eq!(exe.instrs(), &[Instruction::Ret { result: 0 }]);
    // A real file with an extra section spliced in before the checksum section.
    let real = sample().save_to_bytes();
    let at = inspect(&real).unwrap().sections.last().unwrap().header_offset as usize;
    let mut spliced = real[..at].to_vec();
    spliced.extend_from_slice(&[0x30, 0x07, 1, 2, 3]);
    spliced.extend_from_slice(&real[at..]);
    reseal(&mut spliced).unwrap();
    assert_same(&sample(), &load_bytes(&spliced).unwrap());
}

#[test]
fn framing_errors() {
    // Section length past the end of the file.
    let mut bytes = craft(2, &minimal());
    let at = inspect(&bytes).unwrap().sections[0].header_offset as usize;
    let mut huge = bytes[..at + 1].to_vec();
    huge.extend(vint(1 << 62));
    huge.extend_from_slice(&bytes[at + 2..]);
    let e = load_err(&huge);
    assert!(e.contains("section length 4611686018427387904 exceeds") && e.contains("byte"), "{e}");
    // Duplicate sections, missing sections, bytes after the checksum.
    let mut dup = minimal();
    dup.push(dup[0].clone());
    expect_err(&dup, "a second strings section");
    expect_err(&minimal()[..3], "no instructions section");
    bytes.push(0);
    assert!(load_err(&bytes).contains("after the checksum section"));
    // A known section with the wrong flags.
    let mut flagged = minimal();
    flagged[0].0 |= 0x40;
    expect_err(&flagged, "strings section with id byte 0x41");
}

#[test]
fn misaligned_tensor_data_is_rejected() {
    let tensor = cat(&[&[9, 11], &vint(1), &vint(2), &vint(0), &vint(8)]); // f32 [2] at 0, 8 bytes
    let consts = cat(&[&vint(1), &tensor]);
    let ok = |blob_id: u8| {
        let mut s = minimal_with(1, &[0x40], 1, consts.clone());
        s.push((blob_id, vec![0; 8]));
        s
    };
    let exe = load_bytes(&craft(2, &ok(TENSOR_DATA))).unwrap();
    assert_eq!(exe.constants()[0].as_tensor().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    // Not flagged as aligned.
    expect_err(&ok(0x47), "tensor data section with id byte 0x47");
    // Aligned to only 16 bytes.
    let mut f = craft(2, &minimal_with(1, &[0x40], 1, consts.clone()));
    let at = inspect(&f).unwrap().sections.last().unwrap().header_offset as usize;
    let tail = f.split_off(at);
    f.extend_from_slice(&[TENSOR_DATA, 0x11, 0x21]);
    while f.len() % 16 != 0 {
        f.push(0xCB);
    }
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&tail);
    reseal(&mut f).unwrap_err();
    assert!(load_err(&f).contains("must be aligned to 64"));
    // Bad padding.
    let mut bytes = craft(2, &ok(TENSOR_DATA));
    let info = inspect(&bytes).unwrap();
    let data = section(&info, "tensor data").unwrap().data.start as usize;
    bytes[data - 1] = 0;
    reseal(&mut bytes).unwrap_err();
    assert!(load_err(&bytes).contains("padding byte 0x00"));
    // A tensor offset that is not a multiple of 64.
    let tensor = cat(&[&[9, 11], &vint(1), &vint(2), &vint(4), &vint(8)]);
    let mut s = minimal_with(1, &[0x40], 1, cat(&[&vint(1), &tensor]));
    s.push((TENSOR_DATA, vec![0; 16]));
    expect_err(&s, "not a multiple of 64");
}

#[test]
fn out_of_range_indices_with_valid_checksums() {
    // Function index 9 in a call.
    expect_err(&minimal_with(1, &[0x10, 0x13, 0x40], 2, vint(0)), "function index 9 out of range");
    // Constant index 0 in an empty pool: call f(c[0]) with kinds byte 0x04.
    expect_err(&minimal_with(1, &[0x01, 0x03, 0x04, 0x01, 0x40], 2, vint(0)), "constant index 0 out of range");
    // String index out of range in the function table.
    let mut s = minimal();
    s[1].1 = cat(&[&vint(1), &vint(7 << 1 | 1), &vint(0), &vint(1), &vint(1), &vint(1)]);
    expect_err(&s, "string index 7 out of range");
    // Register 5 in a frame of 1: the verifier's error.
    let e = load_bytes(&craft(2, &minimal_with(1, &[0x45], 1, vint(0)))).unwrap_err();
    let v = e.as_invalid().unwrap_or_else(|| panic!("not a verifier error: {e}"));
    assert_eq!(v.kind, relaxvm::verify::VerifyErrorKind::RegisterOutside { reg: 5, size: 1 }, "{e}");
    assert_eq!((v.func.as_str(), v.pc, v.slot), ("main", Some(0), Some(relaxvm::bytecode::Slot::Result)));
    // A jump out of the function.
    let e = load_err(&craft(2, &minimal_with(1, &[0x80 | 8], 1, vint(0))));
    assert!(e.contains("leaves the function"), "{e}");
    // Instruction range past the stream.
    let e = load_err(&craft(
        2,
        &minimal_with(1, &[0x40], 1, vint(0))
            .into_iter()
            .map(|(id, d)| if id == INSTRUCTIONS { (id, vint(0)) } else { (id, d) })
            .collect::<Vec<_>>(),
    ));
    assert!(e.contains("outside the 0 instructions"), "{e}");
    // Parameter names of a function that does not exist, and in the wrong number.
    let mut s = minimal();
    s.push((PARAMS, cat(&[&vint(1), &vint(5), &vint(0)])));
    expect_err(&s, "function index 5 out of range");
    let mut s = minimal();
    s.push((PARAMS, cat(&[&vint(1), &vint(0), &vint(2), &vint(0), &vint(1)])));
    let e = load_err(&craft(2, &s));
    assert!(e.contains("2 parameter names for 1 inputs"), "{e}");
    // Location referring forward, and a location count that disagrees with the instructions.
    let mut s = minimal();
    s.push((LOCATIONS, cat(&[&vint(1), &[2], &vint(0), &vint(0), &vint(1), &vint(1)])));
    expect_err(&s, "must refer to an earlier location");
    let mut s = minimal();
    s.push((LOCATIONS, cat(&[&vint(1), &[1], &vint(0), &vint(3), &vint(1), &vint(1), &vint(1)])));
    expect_err(&s, "locations for 3 instructions");
    // Unknown tags and opcodes.
    let mut s = minimal();
    s[2].1 = cat(&[&vint(1), &[0x55]]);
    expect_err(&s, "unknown constant tag 0x55");
    let mut s = minimal();
    s[2].1 = cat(&[&vint(1), &[7, 99]]);
    expect_err(&s, "unknown dtype tag 99");
    let e = load_err(&craft(1, &minimal_with(1, &[0x09], 1, vint(0))));
    assert!(e.contains("unknown opcode 0x09") && e.contains("instructions section at byte"), "{e}");
}

#[test]
fn huge_counts_and_lengths_are_rejected_before_allocating() {
    let huge = 1u64 << 60;
    let mut s = minimal();
    s[0].1 = cat(&[&vint(huge), &vint(1)]);
    expect_err(&s, &format!("string count {huge} cannot fit"));
    let mut s = minimal();
    s[0].1 = cat(&[&vint(1), &vint(huge), b"main"]);
    expect_err(&s, "runs past the end of the section");
    let mut s = minimal();
    s[1].1 = cat(&[&vint(u64::MAX)]);
    expect_err(&s, "function count");
    expect_err(&minimal_with(1, &[0x40], 1, vint(huge)), "constant count");
    let mut s = minimal();
    s[3].1 = cat(&[&vint(huge), &[0x40]]);
    expect_err(&s, "instruction count");
    // A call with 2^60 + 15 arguments.
    expect_err(&minimal_with(1, &cat(&[&[0x0F], &vint(huge)]), 1, vint(0)), "argument count");
    let call = cat(&[&[0x1F], &vint(huge), &vint(1)]);
    expect_err(&minimal_with(1, &call, 1, vint(0)), "argument count");
    // Shapes and tensors with absurd dimensions.
    expect_err(&minimal_with(1, &[0x40], 1, cat(&[&vint(1), &[6], &vint(huge)])), "dimension count");
    let tensor = cat(&[&[9, 11], &vint(2), &vint(1 << 62), &vint(1 << 62), &vint(0), &vint(huge)]);
    expect_err(&minimal_with(1, &[0x40], 1, cat(&[&vint(1), &tensor])), "bytes of data");
    let tensor = cat(&[&[9, 0], &vint(1), &vint(huge), &vint(0), &vint(huge)]);
    let mut s = minimal_with(1, &[0x40], 1, cat(&[&vint(1), &tensor]));
    s.push((TENSOR_DATA, vec![0; 64]));
    expect_err(&s, "outside the 64 bytes of the tensor data section");
    // Deeply nested tuples.
    let mut deep = vint(1);
    for _ in 0..100 {
        deep.extend_from_slice(&[10]);
        deep.extend(vint(1));
    }
    deep.push(0);
    expect_err(&minimal_with(1, &[0x40], 1, deep), "nest deeper than 32");
    // A producer string longer than the file.
    let mut f = MAGIC.to_vec();
    f.extend(vint(2));
    f.extend(vint(huge));
    assert!(load_err(&f).contains("producer byte count"));
}

#[test]
fn location_bombs_hit_the_memory_budget() {
    // Entry k is callsite(k-1, k-1): 3 bytes each, 2^k nodes.
    let mut locs = vint(41);
    locs.extend_from_slice(&[1]);
    locs.extend(vint(0));
    for k in 0..40 {
        locs.push(2);
        locs.extend(vint(k));
        locs.extend(vint(k));
    }
    locs.extend(vint(1));
    locs.extend(vint(41));
    let mut s = minimal();
    s.push((LOCATIONS, locs));
    let e = load_err(&craft(2, &s));
    assert!(e.contains("too much memory") || e.contains("nests deeper"), "{e}");
    // One long string named a million times by parameter names.
    let long = "p".repeat(1 << 16);
    let mut s = minimal();
    s[0].1 = strings(&["main", "f", &long]);
    let n = 200_000u64;
    s[1].1 = cat(&[&vint(1), &vint(1), &vint(0), &vint(1), &vint(n), &vint(n)]);
    let mut params = cat(&[&vint(1), &vint(0), &vint(n)]);
    params.extend(std::iter::repeat_n(vint(2), n as usize).flatten());
    s.push((PARAMS, params));
    expect_err(&s, "too much memory");
}

/// `minimal()` with `main(x: tensor<[n], f32>) -> any` and `main` as the entry, built from
/// `sig` (the signatures section) and `entry`.
fn with_signature(sig: Vec<u8>, entry: Vec<u8>) -> Vec<(u8, Vec<u8>)> {
    let mut s = minimal();
    s[0].1 = strings(&["main", "f", "x", "n", "a", "b"]);
    s.push((SIGNATURES, sig));
    s.push((ENTRY, entry));
    s
}

/// One signature for function `func` with parameter names `names` (string indices), each
/// typed by `param`, and an `any` result.
fn sig_bytes(func: u64, names: &[u64], param: &[u8]) -> Vec<u8> {
    let mut out = cat(&[&vint(1), &vint(func), &vint(names.len() as u64)]);
    for n in names {
        out.extend(vint(*n));
        out.extend_from_slice(param);
    }
    out.push(0);
    out
}

#[test]
fn crafted_signature_and_entry_sections() {
    // tensor<[n], f32>: tag 4, flags dtype|rank, f32 (11), one dim, symbol string 3 (2*3 + 2).
    let tensor_n = cat(&[&[4, 3, 11], &vint(1), &vint(8)]);
    let good = with_signature(sig_bytes(0, &[2], &tensor_n), vint(0));
    let exe = load_bytes(&craft(3, &good)).unwrap();
    assert_eq!(exe.signature("main").unwrap().unwrap().to_string(), "(x: tensor<[n], f32>) -> any");
    assert_eq!(exe.func("main").unwrap().param_names, vec!["x"]);
    assert_eq!(exe.declared_entry(), Some("main"));

    let e = load_err(&craft(2, &good));
    assert!(e.contains("a signatures section, which needs format version 3, in a version-2 file"), "{e}");
    type Sections = Vec<(u8, Vec<u8>)>;
    let cases: Vec<(Sections, &str)> = vec![
        (with_signature(sig_bytes(5, &[2], &tensor_n), vint(0)), "function index 5 out of range"),
        (with_signature(sig_bytes(0, &[2], &[0x55]), vint(0)), "unknown type tag 0x55"),
        (with_signature(sig_bytes(0, &[9], &[0]), vint(0)), "string index 9 out of range"),
        (with_signature(cat(&[&sig_bytes(0, &[2], &[0]), &[0]]), vint(0)), "unexpected bytes"),
        (with_signature(cat(&[&vint(1 << 20), &[0; 8]]), vint(0)), "cannot fit"),
        (with_signature(sig_bytes(0, &[2], &tensor_n), vint(7)), "entry function index 7 out of range"),
        (with_signature(sig_bytes(0, &[2], &tensor_n), cat(&[&vint(0), &[0]])), "unexpected bytes"),
    ];
    for (sections, needle) in cases {
        let e = load_err(&craft(3, &sections));
        assert!(e.contains(needle), "expected {needle:?} in: {e}");
        assert!(e.contains("malformed executable file") && e.contains("byte"), "{e}");
    }
    // Well-formed sections the verifier rejects.
    let mut renamed = with_signature(sig_bytes(0, &[2], &[0]), vint(0));
    renamed.push((PARAMS, cat(&[&vint(1), &vint(0), &vint(1), &vint(3)])));
    let unsorted = cat(&[&[8], &vint(2), &vint(5), &[0], &vint(4), &[0]]);
    let invalid: Vec<(Sections, &str)> = vec![
        (with_signature(sig_bytes(0, &[2, 4], &[0]), vint(0)), "the signature has 2 parameter(s) for 1 inputs"),
        (with_signature(sig_bytes(1, &[], &[]), vint(0)), "packed function \"f\" has a signature"),
        (with_signature(sig_bytes(0, &[2], &[0]), vint(1)), "the entry function \"f\" is a packed function"),
        (renamed, "parameter names (n) differ from the signature's (x)"),
        (
            with_signature(sig_bytes(0, &[2], &unsorted), vint(0)),
            "dict keys \"b\" and \"a\" are not distinct and sorted",
        ),
    ];
    for (sections, needle) in invalid {
        let e = load_bytes(&craft(3, &sections)).err().unwrap_or_else(|| panic!("{needle}: loaded"));
        assert!(matches!(e.kind(), ErrorKind::Invalid(_)), "{needle}: {e}");
        assert!(e.to_string().contains(needle), "expected {needle:?} in: {e}");
    }
}

#[test]
fn errors_name_the_section_and_offset() {
    let mut s = minimal();
    s[2].1 = cat(&[&vint(2), &[0], &[0x55]]);
    let bytes = craft(2, &s);
    let info = inspect(&bytes).unwrap();
    let at = section(&info, "constants").unwrap().data.start + 2;
    let e = load_err(&bytes);
    assert!(e.contains(&format!("constants section at byte {at}: unknown constant tag")), "{e}");
}

// ---------------------------------------------------------------------------------------
// Golden files and the fuzz corpus.

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The golden files: `sample()` in versions 1 and 2, `sample_v3()` in version 3. `RELAXVM_BLESS=1 cargo test` rewrites them
/// (only when the format deliberately changes; old versions' files should never change) and
/// the fuzz seeds.
#[test]
fn golden_files_load_and_run() {
    let bless = std::env::var_os("RELAXVM_BLESS").is_some_and(|v| v == "1");
    for version in [VERSION_1, VERSION_2, VERSION_3, VERSION_4] {
        let path = golden_dir().join(format!("v{version}.bin"));
        let opts = SaveOptions { version, producer: "relaxvm golden".into(), ..Default::default() };
        // Version 3 adds signatures and the entry, version 4 library references; older versions
        // cannot hold them.
        let expected = match version {
            VERSION_4 => with_library(sample_v3()),
            VERSION_3 => sample_v3(),
            _ => sample(),
        };
        if bless {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&path, format::save_to_bytes(&expected, &opts)).unwrap();
        }
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (generate it with RELAXVM_BLESS=1)", path.display()));
        let info = inspect(&bytes).unwrap();
        assert_eq!(info.version, version);
        let exe = format::load_file(&path).unwrap();
        assert_same(&expected, &exe);
        // The writer still produces exactly this version's bytes.
        assert_eq!(format::save_to_bytes(&exe, &SaveOptions { producer: info.producer, ..opts }), bytes);
        run(exe);
    }
    if bless {
        write_fuzz_seeds();
    }
}

/// Small valid files for the fuzzer to start from (the golden files are copied too).
fn write_fuzz_seeds() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/load");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = sample();
    let stripped = SaveOptions { strip_debug: true, producer: String::new(), ..Default::default() };
    let mut tensor_only =
        minimal_with(1, &[0x40], 1, cat(&[&vint(1), &[9, 11], &vint(1), &vint(2), &vint(0), &vint(8)]));
    tensor_only.push((TENSOR_DATA, vec![0; 8]));
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("golden-v1", std::fs::read(golden_dir().join("v1.bin")).unwrap()),
        ("golden-v2", std::fs::read(golden_dir().join("v2.bin")).unwrap()),
        ("golden-v3", std::fs::read(golden_dir().join("v3.bin")).unwrap()),
        ("sample-stripped-v1", format::save_to_bytes(&exe, &SaveOptions { version: 1, ..stripped.clone() })),
        ("sample-stripped-v2", format::save_to_bytes(&exe, &SaveOptions { version: 2, ..stripped.clone() })),
        ("sample-stripped-v3", format::save_to_bytes(&sample_v3(), &SaveOptions { version: 3, ..stripped.clone() })),
        ("golden-v4", std::fs::read(golden_dir().join("v4.bin")).unwrap()),
        ("sample-stripped-v4", format::save_to_bytes(&with_library(sample_v3()), &stripped)),
        (
            "empty",
            format::save_to_bytes(
                &Executable::from_parts(ExecutableParts::default()).unwrap(),
                &SaveOptions { version: 2, ..stripped.clone() },
            ),
        ),
        ("minimal-v1", craft(1, &minimal())),
        ("minimal-v2", craft(2, &minimal())),
        ("tensor", craft(2, &tensor_only)),
    ];
    for (name, bytes) in seeds {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Replays every input of the fuzz corpus (seeds and past crashes): none may panic.
#[test]
fn fuzz_corpus_replays_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/load");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        for opts in
            [LoadOptions::default(), LoadOptions { verify_checksum: false, verify_data_checksum: false, mmap: false }]
        {
            if let Ok(exe) = load_bytes_with(&data, &opts) {
                let bytes = exe.save_to_bytes();
                let again = load_bytes(&bytes).expect("a saved executable loads");
                assert_eq!(again.save_to_bytes(), bytes);
            }
        }
        n += 1;
    }
    assert!(n > 0, "the corpus is empty");
}

/// One crafted file per verifier check: each loads as far as the verifier, which rejects it.
#[test]
fn every_verifier_error_is_reported() {
    let func = |name: u64, start: u64, len: u64, nargs: u64, regs: u64| {
        cat(&[&vint(name << 1 | 1), &vint(start), &vint(len), &vint(nargs), &vint(regs)])
    };
    let file = |names: &[&str], funcs: &[Vec<u8>], instrs: &[u8], n: u64| {
        let mut table = vint(funcs.len() as u64 + 1);
        for f in funcs {
            table.extend_from_slice(f);
        }
        table.extend(vint(1 << 1)); // packed "f" (string 1)
        craft(
            2,
            &[
                (STRINGS, strings(names)),
                (FUNCTIONS, table),
                (CONSTANTS, vint(0)),
                (INSTRUCTIONS, cat(&[&vint(n), instrs])),
            ],
        )
    };
    let ret0 = [0x40];
    use relaxvm::verify::VerifyErrorKind as K;
    let cases: Vec<(Vec<u8>, &str, Option<usize>, K)> = vec![
        (file(&["", "f"], &[func(0, 0, 1, 1, 1)], &ret0, 1), "", None, K::EmptyName),
        (
            file(&["main", "f"], &[func(0, 0, 1, 1, 1), func(0, 0, 1, 1, 1)], &ret0, 1),
            "",
            None,
            K::DuplicateName("main".into()),
        ),
        (
            file(&["main", "f"], &[func(0, 0, 0, 1, 1)], &ret0, 1),
            "main",
            None,
            K::InstrRange { start: 0, end: 0, len: 1 },
        ),
        (
            file(&["main", "f"], &[func(0, 0, 2, 1, 1)], &ret0, 1),
            "main",
            None,
            K::InstrRange { start: 0, end: 2, len: 1 },
        ),
        (
            file(&["main", "f"], &[func(0, 0, 1, 1, (1 << 20) + 1)], &ret0, 1),
            "main",
            None,
            K::TooManyRegisters { regs: (1 << 20) + 1, max: 1 << 20 },
        ),
        (
            file(&["main", "f"], &[func(0, 0, 1, 2, 1)], &ret0, 1),
            "main",
            None,
            K::InputsExceedRegisters { inputs: 2, regs: 1 },
        ),
        // call main() with no arguments, then ret.
        (
            file(&["main", "f"], &[func(0, 0, 2, 1, 1)], &[0x10, 0x01, 0x40], 2),
            "main",
            Some(0),
            K::Arity { callee: "main".into(), expected: 1, got: 0 },
        ),
        // call f() as the last instruction.
        (file(&["main", "f"], &[func(0, 0, 1, 1, 1)], &[0x10, 0x03], 1), "main", Some(0), K::RunsOffEnd),
        // call f() -> %3 in a frame of 1.
        (
            file(&["main", "f"], &[func(0, 0, 2, 1, 1)], &[0x30, 0x03, 0x07, 0x40], 2),
            "main",
            Some(0),
            K::RegisterOutside { reg: 3, size: 1 },
        ),
        // call f(%2).
        (
            file(&["main", "f"], &[func(0, 0, 2, 1, 1)], &[0x11, 0x03, 0x05, 0x40], 2),
            "main",
            Some(0),
            K::RegisterOutside { reg: 2, size: 1 },
        ),
        // if %0 jumps by -1 out of the function.
        (
            file(&["main", "f"], &[func(0, 0, 2, 1, 1)], &[0xC0, 0x03, 0x40], 2),
            "main",
            Some(0),
            K::JumpOutside { offset: -1, target: -1, len: 2 },
        ),
        (
            file(&["main", "g", "f"], &[func(0, 0, 1, 1, 1), func(2, 0, 1, 1, 1)], &ret0, 1),
            "",
            None,
            K::SharedInstructions("f".into(), "main".into()),
        ),
    ];
    for (bytes, func, pc, kind) in cases {
        let e = load_bytes(&bytes).err().unwrap_or_else(|| panic!("{kind}: loaded"));
        let v = e.as_invalid().unwrap_or_else(|| panic!("{kind}: not a verifier error: {e}"));
        assert_eq!((v.func.as_str(), v.pc, &v.kind), (func, pc, &kind), "{e}");
        assert!(e.to_string().contains(&kind.to_string()), "{e}");
    }
}

fn with_library(exe: Executable) -> Executable {
    let reference = relaxvm::LibraryRef { path: "/models/kernels.so".into(), content_hash: 0x0123_4567_89AB_CDEF };
    exe.with_libraries(vec![relaxvm::executable::Library { reference, loaded: None }])
}

#[test]
fn library_references_round_trip_in_version_4_only() {
    let exe = with_library(sample());
    let bytes = exe.save_to_bytes();
    let info = inspect(&bytes).unwrap();
    assert!(section(&info, "libraries").is_some());
    let back = load_bytes(&bytes).unwrap();
    assert_eq!(back.libraries().len(), 1);
    assert_eq!(back.libraries()[0].reference, exe.libraries()[0].reference);
    assert!(back.libraries()[0].loaded.is_none());
    assert_eq!(back.save_to_bytes(), bytes);
    assert!(back.stats().contains("Native libraries (#1): [/models/kernels.so]"), "{}", back.stats());
    // Older versions have no place for them: an error, not a file that silently lost them.
    let e = format::try_save_to_bytes(&exe, &SaveOptions { version: VERSION_3, ..Default::default() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("version 3 cannot record the native libraries"), "{e}");
    // Without a library, no such section.
    assert!(section(&inspect(&sample().save_to_bytes()).unwrap(), "libraries").is_none());
}
