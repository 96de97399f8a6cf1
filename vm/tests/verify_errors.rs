//! The verifier's refusals of an executable's function table (`relaxvm::verify`): empty names,
//! signatures on packed functions, functions sharing instructions, instruction ranges outside
//! the code, register files past the limit, inputs beyond the registers. Each is the whole
//! message of the `invalid executable` error the builder, loader and assembler report.

use relaxvm::{Executable, ExecutableParts, FuncInfo, Instruction};

fn refused(funcs: Vec<FuncInfo>, instrs: Vec<Instruction>) -> String {
    let e = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).expect_err("refused");
    e.as_invalid().expect("a verification failure").to_string()
}

fn ret() -> Vec<Instruction> {
    vec![Instruction::Ret { result: 0 }]
}

#[test]
fn function_tables_the_verifier_refuses() {
    let got = [
        refused(vec![FuncInfo::bytecode("", 0, 1, 0, 1)], ret()),
        refused(
            vec![
                FuncInfo::bytecode("f", 0, 1, 0, 1),
                FuncInfo::packed("p").with_signature("(x: i64) -> i64".parse().unwrap()),
            ],
            ret(),
        ),
        refused(vec![FuncInfo::bytecode("f", 0, 1, 0, 1), FuncInfo::bytecode("g", 0, 1, 0, 1)], ret()),
        refused(vec![FuncInfo::bytecode("f", 0, 3, 0, 1)], ret()),
        refused(vec![FuncInfo::bytecode("f", 0, 1, 0, (1 << 20) + 1)], ret()),
        refused(vec![FuncInfo::bytecode("f", 0, 1, 3, 2)], ret()),
    ];
    let want = [
        "a function-table entry has an empty name",
        r#"packed function "p" has a signature (only bytecode functions may)"#,
        r#"functions "f" and "g" share instructions"#,
        r#"function "f": instruction range 0..3 is empty or outside the 1 instructions"#,
        r#"function "f": 1048577 registers exceed the limit of 1048576"#,
        r#"function "f": 3 inputs do not fit in 2 registers"#,
    ];
    assert_eq!(got, want);
}
