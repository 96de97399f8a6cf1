//! Executables seal their constants (see `relaxvm_core::value::seal`) however they are made:
//! built from parts, saved and loaded from bytes, from a file, or mapped.

use crate::storage::read_only;
use crate::tensor::Tensor;
use crate::value::Value;

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn every_way_of_making_an_executable_seals_its_constants() {
    use crate::bytecode::Instruction;
    use crate::executable::{Executable, ExecutableParts, FuncInfo};
    use crate::format::{self, LoadOptions, SaveOptions};
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 1, 1)],
        constants: vec![Value::Tensor(Tensor::from_vec([2], vec![1.5f32, 2.5]).unwrap())],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    })
    .unwrap();
    let sealed = |e: &Executable| {
        let t = e.constants()[0].as_tensor().unwrap();
        t.storage().is_sealed() && read_only::contains(t.data_ptr() as usize) && f32s(t) == [1.5, 2.5]
    };
    assert!(sealed(&exe));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.rvx");
    exe.save(&path, &SaveOptions::default()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(sealed(&format::load_bytes(&bytes).unwrap()));
    for opts in [LoadOptions::default(), LoadOptions::trusted_mmap()] {
        assert!(sealed(&format::load_file_with(&path, &opts).unwrap()));
    }
}
