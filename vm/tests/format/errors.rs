//! Refusals of the binary format that the other modules do not cause, each with its whole
//! message: crafted sections (constants, tables keyed by function, locations, instructions,
//! signatures, alignment, checksums), executables the writer cannot save, and files and outputs
//! of the wrong kind.

use super::common::*;
use relaxvm::format::{self, reseal, try_save_to_bytes, LoadOptions, SaveOptions, CURRENT_VERSION, MAGIC};
use relaxvm::{DataType, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, Location, Value};

const F32: u8 = 11;

fn f32_tag() -> u8 {
    DataType::F32.tag()
}

/// `minimal()` with `consts` as its constant pool.
fn with_constants(consts: &[&[u8]]) -> Vec<(u8, Vec<u8>)> {
    minimal_with(1, &[0x40], 1, consts.concat())
}

/// The error of loading `bytes`, which must be a format error.
fn format_err(bytes: &[u8]) -> String {
    let e = format::load_bytes(bytes).expect_err("a malformed file");
    assert!(matches!(e.kind(), ErrorKind::Format(_)), "{e:?}");
    e.to_string()
}

/// Every case: its name, the file, and the whole message.
fn check(cases: Vec<(&str, Vec<u8>, String)>) {
    let wrong: Vec<String> = cases
        .into_iter()
        .filter_map(|(name, bytes, want)| {
            let got = format_err(&bytes);
            (got != want).then(|| format!("{name}\n  expected {want}\n  found    {got}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn constants_that_cannot_be_decoded() {
    assert_eq!(f32_tag(), F32);
    let deep: Vec<u8> = [&[10u8, 3][..]; 33].concat(); // tuple of 1 item (vint(1) = 3), 33 deep
    let tensor =
        |dim: u64, offset: u64, nbytes: u64| cat(&[&[9, F32], &vint(1), &vint(dim), &vint(offset), &vint(nbytes)]);
    let cases = vec![
        (
            "truncated varint",
            craft(2, &with_constants(&[&vint(1), &[1, 0]])),
            "constants section at byte 34: truncated varint",
        ),
        (
            "device type",
            craft(2, &with_constants(&[&vint(1), &[8], &vint(1 << 40), &vint(0)])),
            "constants section at byte 34: device type code out of range",
        ),
        (
            "device id",
            craft(2, &with_constants(&[&vint(1), &[8], &vint(1), &vint(2 << 40)])),
            "constants section at byte 35: device id out of range",
        ),
        (
            "tuple depth",
            craft(2, &with_constants(&[&vint(1), &deep, &[0]])),
            "constants section at byte 97: tuples nest deeper than 32 levels",
        ),
        (
            "dimension",
            craft(2, &with_constants(&[&vint(1), &tensor(1 << 63, 0, 0)])),
            "constants section at byte 36: tensor dimension exceeds 2^63",
        ),
        (
            "offset",
            craft(2, &with_constants(&[&vint(1), &tensor(1, 1, 4)])),
            "constants section at byte 37: tensor data offset 1 is not a multiple of 64",
        ),
        (
            "no data",
            craft(2, &with_constants(&[&vint(1), &tensor(1, 0, 4)])),
            "constants section at byte 33: tensor constant but the file has no tensor data section",
        ),
    ];
    check(cases.into_iter().map(|(n, b, m)| (n, b, format!("malformed executable file: {m}"))).collect());
}

#[test]
fn tables_locations_and_instructions_that_cannot_be_decoded() {
    let mut params = minimal();
    // Two entries for function 0: tables keyed by function are strictly increasing.
    params.push((PARAMS, cat(&[&vint(2), &vint(0), &vint(1), &vint(0), &vint(0), &vint(1), &vint(0)])));
    let mut tag = minimal();
    tag.push((LOCATIONS, cat(&[&vint(1), &[7]])));
    let mut count = minimal();
    count.push((LOCATIONS, cat(&[&vint(0), &vint(5)])));
    // A name, then 129 fused locations each holding the one before it.
    let mut nested = cat(&[&vint(130), &[1], &vint(0)]);
    for i in 0..129 {
        nested.extend(cat(&[&[3], &vint(1), &vint(i)]));
    }
    nested.extend(cat(&[&vint(1), &vint(0)]));
    let mut deep = minimal();
    deep.push((LOCATIONS, nested));
    let mut range = minimal();
    range[1].1 = cat(&[&vint(2), &vint(1), &vint(u64::from(u32::MAX)), &vint(1), &vint(1), &vint(1), &vint(2)]);
    let mut sig = minimal();
    sig.push((SIGNATURES, cat(&[&vint(1), &vint(0), &vint(0), &[5], &vint(1 << 33)])));
    let cases = vec![
        (
            "order",
            craft(2, &params),
            "parameter names section at byte 43: function index 0 out of order (entries must increase)",
        ),
        ("tag", craft(2, &tag), "locations section at byte 40: unknown location tag 0x07"),
        ("count", craft(2, &count), "locations section at byte 40: locations for 5 instructions, the file has 1"),
        ("depth", craft(2, &deep), "locations section at byte 425: location nests deeper than 128 levels"),
        ("range", craft(2, &range), "functions section at byte 25: instruction range ends past 2^32"),
        (
            "inline",
            craft(2, &minimal_with(1, &cat(&[&[0x7F], &vint(u64::MAX)]), 1, vint(0))),
            "instructions section at byte 37: inline operand overflows 64 bits",
        ),
        (
            "register arguments",
            craft(2, &minimal_with(1, &cat(&[&[0x1F], &vint(5), &vint(1), &[0; 10]]), 1, vint(0))),
            "instructions section at byte 39: 20 register arguments cannot fit in the rest of the section",
        ),
        ("shape rank", craft(3, &sig), "signatures section at byte 43: shape rank 8589934591 exceeds 2^32"),
    ];
    check(cases.into_iter().map(|(n, b, m)| (n, b, format!("malformed executable file: {m}"))).collect());
}

/// A file like [`craft`]'s whose tensor data section is aligned to `align`.
fn craft_aligned(align: u64) -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.extend(vint(2));
    f.extend(vint(5));
    f.extend_from_slice(b"craft");
    for (id, data) in minimal() {
        f.push(id);
        f.extend(vint(data.len() as u64));
        f.extend_from_slice(&data);
    }
    f.push(TENSOR_DATA);
    f.extend(vint(0));
    f.extend(vint(align));
    f
}

#[test]
fn alignments_and_checksums() {
    let sealed = craft(2, &minimal());
    // The checksum section (id 0x3F) holds 4 bytes instead of 8.
    let mut short = sealed[..sealed.len() - 10].to_vec();
    short.extend_from_slice(&[0x3F, 0x09, 0, 0, 0, 0]);
    let mut producer = sealed.clone();
    producer[8] ^= 1; // "craft" -> "crbft"
    let checksum_at = sealed.len() - 8;
    let cases = vec![
        (
            "alignment",
            craft_aligned(3),
            "section header at byte 39: tensor data section alignment 3 is not a power of two up to 4096".to_string(),
        ),
        (
            "tensor alignment",
            craft_aligned(16),
            "section header at byte 39: tensor data aligned to 16 bytes, it must be aligned to 64".into(),
        ),
        ("checksum length", short, format!("checksum section at byte {checksum_at}: 4 bytes, expected 8")),
    ];
    check(cases.into_iter().map(|(n, b, m)| (n, b, format!("malformed executable file: {m}"))).collect());
    let e = format_err(&producer);
    let (head, tail) = (
        format!(
            "malformed executable file: checksum section at byte {checksum_at}: metadata checksum mismatch (stored 0x"
        ),
        "): the file is corrupt",
    );
    assert!(e.starts_with(&head) && e.contains(", computed 0x") && e.ends_with(tail), "{e}");

    // A flipped bit in the tensor data: only the data checksum sees it.
    let bytes = sample().save_to_bytes();
    let data = section(&format::inspect(&bytes).unwrap(), "tensor data").unwrap().data.clone();
    let mut bad = bytes.clone();
    bad[data.start as usize] ^= 1;
    let e = format_err(&bad);
    let head = format!(
        "malformed executable file: tensor data section at byte {}: data checksum mismatch (stored 0x",
        data.start
    );
    assert!(e.starts_with(&head) && e.ends_with("): the tensor data is corrupt"), "{e}");
    assert!(reseal(&mut bad).is_ok() && format::load_bytes(&bad).is_ok());
}

/// An executable `main() = ret %0` with `constants` and, on its one instruction, `location`.
fn exe_with(constants: Vec<Value>, location: Option<Location>) -> Executable {
    Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 0, 1)],
        constants,
        instrs: vec![Instruction::Ret { result: 0 }],
        locations: vec![location],
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn executables_the_writer_cannot_save() {
    let save = |exe: &Executable, version: u32| {
        let opts = SaveOptions { version, ..Default::default() };
        try_save_to_bytes(exe, &opts).expect_err("an error")
    };
    let plain = exe_with(vec![], None);
    let e = save(&plain, CURRENT_VERSION + 1);
    assert!(matches!(e.kind(), ErrorKind::Value(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "cannot write format version {}: this build writes versions 1 to {CURRENT_VERSION}",
            CURRENT_VERSION + 1
        )
    );
    let deep = (0..33).fold(Value::Null, |v, _| Value::tuple(vec![v]));
    let e = save(&exe_with(vec![deep], None), CURRENT_VERSION);
    assert!(matches!(e.kind(), ErrorKind::Format(_)), "{e:?}");
    assert_eq!(e.to_string(), "malformed executable file: constant c[0]: tuples nest deeper than 32 levels");
    let storage = Value::Storage(relaxvm::Storage::alloc(8, relaxvm::Device::cpu(0)).unwrap());
    let e = save(&exe_with(vec![Value::Int(1), storage], None), CURRENT_VERSION);
    assert_eq!(
        e.to_string(),
        "malformed executable file: constant c[1]: a storage cannot be saved in an executable file"
    );
    let loc = (0..129).fold(Location::Name("x".into()), |l, _| Location::Fused(vec![l]));
    let e = save(&exe_with(vec![], Some(loc)), CURRENT_VERSION);
    assert_eq!(e.to_string(), "malformed executable file: a location nests deeper than 128 levels");
}

#[test]
fn empty_and_special_files_and_outputs_that_are_not_files() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.rvx");
    std::fs::write(&empty, b"").unwrap();
    let want = format!("malformed executable file: {}: header at byte 0: the file is empty", empty.display());
    for opts in [LoadOptions::default(), LoadOptions::trusted_mmap()] {
        let e = format::load_file_with(&empty, &opts).expect_err("an empty file");
        assert!(matches!(e.kind(), ErrorKind::Format(_)), "{e:?}");
        assert_eq!(e.to_string(), want);
    }
    // procfs files report 0 bytes and hold more.
    let e = format::load_file("/proc/self/stat").expect_err("a special file");
    assert_eq!(
        e.to_string(),
        "/proc/self/stat: the file holds more than the 0 bytes it reports (a file that grows, or a special file \
         such as one of /proc); only regular files of a fixed size are read"
    );
    // `InputFile::read_exact_into` (public, for embedders reading inputs) wants a buffer of the
    // reported size.
    let three = dir.path().join("three");
    std::fs::write(&three, b"abc").unwrap();
    let mut file = relaxvm::input_file::open(&three, 1 << 20).unwrap();
    let e = file.read_exact_into(&mut [0u8; 2], None).expect_err("a short buffer");
    assert_eq!(e.to_string(), format!("{}: a buffer of 2 bytes for a file of 3 bytes", three.display()));

    let exe = exe_with(vec![], None);
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let e = exe.save(&sub, &SaveOptions::default()).expect_err("a directory");
    assert_eq!(
        e.to_string(),
        format!(
            "I/O error: {}: there is a directory, not a regular file; an output only replaces regular files (remove it, or write \
             elsewhere; the command-line tool writes to standard output with -o -)",
            sub.display()
        )
    );
    // A link to a link to nothing: where the output would go is unclear, so nothing is created.
    let (a, b) = (dir.path().join("a.rvx"), dir.path().join("b.rvx"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(dir.path().join("missing.rvx"), &b).unwrap();
    let e = exe.save(&a, &SaveOptions::default()).expect_err("a chain of dangling links");
    assert_eq!(
        e.to_string(),
        format!(
            "I/O error: {}: a symbolic link that does not end at a file, not a regular file; an output only replaces regular \
             files (remove it, or write elsewhere; the command-line tool writes to standard output with -o -)",
            a.display()
        )
    );
    assert!(!dir.path().join("missing.rvx").exists());
}

#[test]
fn a_program_whose_kernels_live_in_a_library_the_core_loader_does_not_open() {
    // main() calls kernel.add, which only the (unloaded) native library provides.
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 2, 0, 1), FuncInfo::packed("kernel.add")],
        instrs: vec![Instruction::Call { func: 1, args: vec![], dst: Some(0) }, Instruction::Ret { result: 0 }],
        ..Default::default()
    })
    .unwrap();
    let loaded = format::load_bytes(&with_library(exe).save_to_bytes()).unwrap();
    let Err(e) = relaxvm::VirtualMachine::new(std::sync::Arc::new(loaded)) else { panic!("a missing kernel") };
    assert!(matches!(e.kind(), ErrorKind::LibraryNotLoaded { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "packed function not found: kernel.add (called by \"main\" at instruction 0); they may come from the native library \"/models/kernels.so\", \
         which is not loaded (open the executable with relaxvm_tvm::load_executable, or rx.load_executable in Python)"
    );
}
