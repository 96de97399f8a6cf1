//! Round trips: byte-identical in every version, back-deployment, debug stripping, reading and mapping files.

use super::common::*;
use relaxvm::format::{
    self, inspect, load_bytes, LoadOptions, SaveOptions, CURRENT_VERSION, VERSION_1, VERSION_2, VERSION_3, VERSION_4,
};
use relaxvm::{Arg, Executable, ExecutableParts, FuncInfo, Instruction, Location, PackedFunc, Value};

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
