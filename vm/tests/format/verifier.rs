//! Files that decode but fail the verifier: every kind of verifier error, with function and instruction.

use super::common::*;
use relaxvm::format::load_bytes;

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
        // ret %0, then a second ret that no function holds.
        (
            file(&["main", "f"], &[func(0, 0, 1, 1, 1)], &[0x40, 0x40], 2),
            "",
            None,
            K::OutsideFunctions { pc: 1, len: 2, covered: 1 },
        ),
        // A gap between two functions.
        (
            file(&["main", "g", "f"], &[func(0, 0, 1, 1, 1), func(2, 2, 1, 1, 1)], &[0x40, 0x40, 0x40], 3),
            "",
            None,
            K::OutsideFunctions { pc: 1, len: 3, covered: 2 },
        ),
    ];
    for (bytes, func, pc, kind) in cases {
        let e = load_bytes(&bytes).err().unwrap_or_else(|| panic!("{kind}: loaded"));
        let v = e.as_invalid().unwrap_or_else(|| panic!("{kind}: not a verifier error: {e}"));
        assert_eq!((v.func.as_str(), v.pc, &v.kind), (func, pc, &kind), "{e}");
        assert!(e.to_string().contains(&kind.to_string()), "{e}");
    }
}

/// Instructions that no function holds are refused before anything decodes them: the
/// interpreter's decoding reads every instruction, and none of these would pass the checks a
/// function's instructions get (a callee or constant out of range, a jump beyond `i64`).
#[test]
fn instructions_outside_every_function_are_refused() {
    use relaxvm::{Arg, Executable, ExecutableParts, FuncInfo, Instruction, VirtualMachine};
    use std::sync::Arc;
    let orphans = [
        Instruction::Call { func: 5, args: vec![], dst: None },
        Instruction::Call { func: 0, args: vec![Arg::Const(3)], dst: None },
        Instruction::Goto { offset: i64::MAX },
    ];
    for orphan in orphans {
        let parts = ExecutableParts {
            funcs: vec![FuncInfo::bytecode("main", 0, 1, 1, 1)],
            instrs: vec![Instruction::Ret { result: 0 }, orphan.clone()],
            ..Default::default()
        };
        let e = Executable::from_parts(parts).expect_err("refused");
        assert!(
            e.to_string().contains("instruction 1 belongs to no function (of 2 instructions, the functions cover 1)"),
            "{orphan:?}: {e}"
        );
    }
    let ok = ExecutableParts {
        funcs: vec![FuncInfo::bytecode("main", 0, 1, 1, 1)],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    };
    let mut vm = VirtualMachine::new(Arc::new(Executable::from_parts(ok).unwrap())).unwrap();
    assert_eq!(vm.invoke("main", &[relaxvm::Value::Int(4)]).unwrap().as_int().unwrap(), 4);
}
