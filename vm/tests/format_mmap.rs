//! Loading a file with a 256 MiB constant with `LoadOptions::trusted_mmap` maps it: no resident
//! memory until the data is read (which is what makes it fast; the time is printed, not asserted:
//! a test does not time, a loaded machine may be slow). A test binary of its own, so that no other
//! test disturbs the RSS figures.

use relaxvm::format::{self, SaveOptions};
use relaxvm::{DataType, Device, Executable, ExecutableParts, FuncInfo, Instruction, Tensor, Value};
use std::time::Instant;

/// Resident memory of this process, in bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
#[cfg(target_os = "linux")]
fn a_256_mib_constant_loads_mapped_without_resident_memory() {
    const SIZE: usize = 256 << 20;
    let path = std::env::temp_dir().join(format!("relaxvm-format-mmap-{}.rvx", std::process::id()));
    {
        let big = Tensor::zeros([SIZE as i64], DataType::U8, Device::cpu(0)).unwrap();
        big.storage().write(SIZE - 1, &[7]).unwrap();
        let exe = Executable::from_parts(ExecutableParts {
            funcs: vec![FuncInfo::bytecode("main", 0, 1, 1, 1)],
            constants: vec![Value::Int(1), Value::Tensor(big)],
            instrs: vec![Instruction::Ret { result: 0 }],
            ..Default::default()
        })
        .unwrap();
        exe.save(&path, &SaveOptions::default()).unwrap();
    }
    assert!(std::fs::metadata(&path).unwrap().len() > SIZE as u64);

    let before = rss();
    let start = Instant::now();
    let exe = format::load_file_with(&path, &format::LoadOptions::trusted_mmap()).unwrap();
    let elapsed = start.elapsed();
    let grown = rss().saturating_sub(before);
    println!("load_file of a 256 MiB constant: {elapsed:?}, resident memory grew by {} KiB", grown >> 10);
    assert!(grown < 16 << 20, "loading made {grown} bytes resident");

    // Reading the data pages it in (which shows the measurement above is meaningful).
    {
        let t = exe.constants()[1].as_tensor().unwrap();
        let read = t.storage().bytes();
        let bytes = &read[t.byte_offset()..][..t.nbytes()];
        let sum: u64 = bytes.iter().step_by(4096).map(|b| u64::from(*b)).sum::<u64>() + u64::from(bytes[SIZE - 1]);
        assert_eq!(sum, 7);
    }
    assert!(rss().saturating_sub(before) > 128 << 20, "reading the data makes it resident");
    drop(exe);
    std::fs::remove_file(&path).unwrap();
}
