//! A file changed after it was loaded never reaches the executable, and a file changed before
//! it was loaded is refused: `load_file` reads every byte into memory of its own and checks it.

use relaxvm::format::{self, LoadOptions, SaveOptions};
use relaxvm::{DataType, Device, Executable, ExecutableParts, FuncInfo, Instruction, Tensor, Value};
use std::path::PathBuf;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("relaxvm-file-changes-{name}-{}.rvx", std::process::id()))
}

/// `main()` returns a 64 KiB f32 constant counting 0, 1, 2, ...
fn program() -> Executable {
    let data: Vec<f32> = (0..16384).map(|i| i as f32).collect();
    Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 0, 1)],
        constants: vec![Value::Tensor(Tensor::from_vec([16384], data).unwrap())],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    })
    .unwrap()
}

fn constant(exe: &Executable) -> Vec<f32> {
    exe.constants()[0].as_tensor().unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn truncating_or_rewriting_a_loaded_file_changes_nothing() {
    let path = temp("truncate");
    program().save(&path, &SaveOptions::default()).unwrap();
    let exe = format::load_file(&path).unwrap();
    let expected = constant(&program());
    // Truncated in place (a mapped constant would now be a SIGBUS), then rewritten in place
    // with other data (a mapped constant would change under the program).
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
    assert_eq!(constant(&exe), expected);
    std::fs::write(&path, vec![0xAB; 80 << 10]).unwrap();
    assert_eq!(constant(&exe), expected);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn every_single_bit_flip_anywhere_in_the_file_is_refused() {
    let small = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 0, 1)],
        constants: vec![Value::Tensor(Tensor::from_vec([4], vec![1i32, 2, 3, 4]).unwrap()), Value::str("hi")],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    })
    .unwrap();
    let bytes = small.save_to_bytes();
    let path = temp("flip");
    let mut undetected = Vec::new();
    for bit in 0..bytes.len() * 8 {
        let mut bad = bytes.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&path, &bad).unwrap();
        if format::load_file(&path).is_ok() {
            undetected.push(bit);
        }
    }
    std::fs::remove_file(&path).unwrap();
    assert!(undetected.is_empty(), "bit flips at {undetected:?} of {} bytes loaded", bytes.len());
}

#[test]
fn a_fifo_or_a_directory_is_an_error_not_a_hang() {
    let e = format::load_file(std::env::temp_dir()).unwrap_err().to_string();
    assert!(e.contains("expected a regular file"), "{e}");
    let fifo = temp("fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // A blocking open of a fifo would wait for a writer, and none comes: the loader opens
    // without blocking and refuses it, for both ways of loading.
    for opts in [format::LoadOptions::default(), format::LoadOptions::trusted_mmap()] {
        let e = format::load_file_with(&fifo, &opts).unwrap_err().to_string();
        assert!(e.contains("expected a regular file, found a fifo"), "{e}");
    }
    std::fs::remove_file(&fifo).unwrap();
}

#[test]
fn trusted_mmap_loads_the_same_program() {
    let path = temp("mmap");
    program().save(&path, &SaveOptions::default()).unwrap();
    let mapped = format::load_file_with(&path, &LoadOptions::trusted_mmap()).unwrap();
    let read = format::load_file(&path).unwrap();
    assert_eq!(constant(&mapped), constant(&read));
    assert!(mapped.constants()[0].as_tensor().unwrap().storage().is_frozen());
    let t = Tensor::zeros([1], DataType::F32, Device::cpu(0)).unwrap();
    assert!(!t.storage().is_frozen());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_bool_constant_byte_other_than_0_or_1_is_refused_with_its_offset() {
    let flags = Tensor::from_vec([3], vec![true, false, true]).unwrap();
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 0, 1)],
        constants: vec![Value::Tensor(flags)],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    })
    .unwrap();
    let mut bytes = exe.save_to_bytes();
    let info = format::inspect(&bytes).unwrap();
    let data = info.sections.iter().find(|s| s.name == Some("tensor data")).unwrap().data.clone();
    bytes[data.start as usize + 2] = 2; // the third bool
    format::reseal(&mut bytes).unwrap(); // checksums right: only the bool check can catch it
    let e = format::load_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("bool tensor constant holds the byte 2 at data offset 2"), "{e}");
    // Nor can an executable be built in memory around such a constant.
    let storage = relaxvm::Storage::alloc(1, Device::cpu(0)).unwrap();
    storage.write(0, &[7]).unwrap();
    let bad = Tensor::from_parts(storage, 0, [1].into(), None, DataType::Bool).unwrap();
    let e = Executable::from_parts(ExecutableParts { constants: vec![Value::Tensor(bad)], ..Default::default() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("byte 7"), "{e}");
}
