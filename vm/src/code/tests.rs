//! Tests of decoding: which call sites share a function entry, and what a call passes.

use super::*;
use crate::bytecode::{Arg, Instruction};
use crate::executable::{ExecutableParts, FuncInfo};
use crate::registry::Registry;

#[test]
fn call_sites_share_their_callees_entry_unless_specialised() {
    let mut overrides = Registry::new();
    fn first<'a>(_: &str, a: &'a [Value]) -> Result<crate::Selected<'a>> {
        Ok(crate::Selected::Value(&a[0]))
    }
    overrides.register(PackedFunc::select("t.sel", first), true).unwrap();
    overrides.register(PackedFunc::from_fn("t.plain", |_| Ok(Value::Null)), true).unwrap();
    // Specialises calls whose second operand is fixed.
    let special = PackedFunc::from_fn("t.spec", |_| Ok(Value::Null))
        .with_specializer(|fixed| fixed.get(1)?.map(|_| PackedFunc::from_fn("t.spec", |_| Ok(Value::Int(1)))));
    overrides.register(special, true).unwrap();
    let call = |func, args: Vec<Arg>| Instruction::Call { func, args, dst: Some(1) };
    let (r0, imm) = (Arg::Reg(0), Arg::Imm(7));
    let instrs = vec![
        call(1, vec![r0]),
        call(1, vec![r0]),
        call(1, vec![r0, imm]),
        call(2, vec![r0]),
        call(2, vec![imm]),
        call(3, vec![r0, r0]),
        call(3, vec![r0, r0]),
        call(3, vec![r0, imm]),
        call(3, vec![r0, imm]),
        Instruction::Ret { result: 1 },
    ];
    let funcs = vec![
        FuncInfo::bytecode("main", 0, instrs.len() as u32, 1, 2),
        FuncInfo::packed("t.sel"),
        FuncInfo::packed("t.plain"),
        FuncInfo::packed("t.spec"),
    ];
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    let code = DecodedProgram::decode(&Arc::new(exe.clone()), &overrides).unwrap();
    let funcs: Vec<u32> = code
        .ops
        .iter()
        .filter_map(|op| match *op {
            Op::CallSelect1 { site, .. } => Some(code.select_sites[site as usize].func),
            Op::CallSelect { site, .. } | Op::CallPacked { site, .. } => Some(code.sites[site as usize].func),
            _ => None,
        })
        .collect();
    // t.sel: one entry for its three sites; t.plain: one for two; t.spec: one shared by
    // the two sites it declines, and one per site it specialises.
    assert_eq!(funcs, [0, 0, 0, 1, 1, 2, 2, 3, 4]);
    assert_eq!(code.call_fns.len(), 5);
    assert!(code.call_fns.iter().all(|f| f.name().starts_with("t.")));
}

#[test]
fn a_specialised_call_passes_only_the_operands_its_function_reads() {
    let mut overrides = Registry::new();
    // Specialised when its last operand is fixed, to a function that reads only the first.
    let general = PackedFunc::from_fn("t.pre", |a| Ok(Value::Int(a.len() as i64))).with_specializer(|fixed| {
        fixed.last()?.as_ref()?;
        Some(PackedFunc::from_fn("t.pre", |a| Ok(Value::Int(100 + a.len() as i64))).reading_first(1))
    });
    overrides.register(general, true).unwrap();
    let (r0, imm) = (Arg::Reg(0), Arg::Imm(7));
    let instrs = vec![
        Instruction::Call { func: 1, args: vec![r0, r0, imm], dst: Some(1) },
        Instruction::Call { func: 1, args: vec![r0, imm, r0], dst: Some(1) },
        Instruction::Ret { result: 1 },
    ];
    let funcs = vec![FuncInfo::bytecode("main", 0, instrs.len() as u32, 1, 2), FuncInfo::packed("t.pre")];
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    let code = DecodedProgram::decode(&Arc::new(exe.clone()), &overrides).unwrap();
    let calls: Vec<(u32, u32)> = code
        .ops
        .iter()
        .filter_map(|op| match *op {
            Op::CallPacked { site, .. } => Some((code.sites[site as usize].nargs, code.sites[site as usize].npatches)),
            _ => None,
        })
        .collect();
    // The specialised site passes one operand (one register to patch in); the other keeps all.
    assert_eq!(calls, [(1, 1), (3, 2)]);
    // Instruments still see every operand of the specialised site.
    let args = code.call_args(&code.ops[0], 3, |r| Value::Int(i64::from(r) + 40));
    let ints: Vec<i64> = args.iter().map(|v| v.as_int().unwrap()).collect();
    assert_eq!(ints, [40, 40, 7]);
}

#[test]
fn a_call_returning_its_one_register_argument_is_a_move() {
    let mut overrides = Registry::new();
    fn first<'a>(_: &str, a: &'a [Value]) -> Result<crate::Selected<'a>> {
        Ok(crate::Selected::Value(&a[0]))
    }
    overrides.register(PackedFunc::select("t.id", first).returning_its_argument(), true).unwrap();
    overrides.register(PackedFunc::select("t.sel", first), true).unwrap();
    let call = |func, args: Vec<Arg>, dst| Instruction::Call { func, args, dst };
    let instrs = vec![
        call(1, vec![Arg::Reg(0)], Some(1)),
        call(2, vec![Arg::Reg(0)], Some(1)),
        // Not a move: no destination, a constant operand, two operands.
        call(1, vec![Arg::Reg(0)], None),
        call(1, vec![Arg::Imm(3)], Some(1)),
        call(1, vec![Arg::Reg(0), Arg::Reg(1)], Some(1)),
        Instruction::Ret { result: 1 },
    ];
    let funcs = vec![
        FuncInfo::bytecode("main", 0, instrs.len() as u32, 1, 2),
        FuncInfo::packed("t.id"),
        FuncInfo::packed("t.sel"),
    ];
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    let code = DecodedProgram::decode(&Arc::new(exe.clone()), &overrides).unwrap();
    let kinds: Vec<&str> = code
        .ops
        .iter()
        .map(|op| match op {
            Op::Move { .. } => "move",
            Op::CallSelect1 { .. } => "select1",
            Op::CallSelect { .. } => "select",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["move", "select1", "select", "select", "select", "other"]);
    assert!(!PackedFunc::from_fn("t.f", |_| Ok(Value::Null)).returning_its_argument().returns_its_argument());
}

#[test]
fn only_a_backward_add_in_place_and_goto_is_an_add_jump_imm() {
    // `IntAddJumpImm` counts a step at every jump with no test of the direction, so a forward
    // `goto` after `add` of an immediate keeps the general `IntJump` (which tests it); it also
    // adds into its own operand only, by an immediate of 32 bits.
    let mut overrides = Registry::new();
    fn add(a: &Value, b: &Value) -> Result<Value> {
        Ok(Value::Int(a.as_int()? + b.as_int()?))
    }
    overrides.register(PackedFunc::binary("t.add", add).with_int_op(IntOp::Add), true).unwrap();
    let add = |r, imm| Instruction::Call { func: 1, args: vec![Arg::Reg(r), Arg::Imm(imm)], dst: Some(1) };
    let instrs = vec![
        add(0, 1),
        Instruction::Goto { offset: 2 },
        Instruction::Ret { result: 1 },
        add(1, 1),
        Instruction::Goto { offset: -2 },
        // Backward, but into another register than its operand, or by more than 32 bits: the
        // general op (the in-place form holds its immediate in 32 bits).
        add(0, 1),
        Instruction::Goto { offset: -6 },
        add(1, 1 << 40),
        Instruction::Goto { offset: -8 },
    ];
    let funcs = vec![FuncInfo::bytecode("main", 0, instrs.len() as u32, 1, 2), FuncInfo::packed("t.add")];
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    let code = DecodedProgram::decode(&Arc::new(exe), &overrides).unwrap();
    let kinds: Vec<&str> = code
        .ops
        .iter()
        .map(|op| match op {
            Op::IntJump { .. } => "jump",
            Op::IntAddJumpImm { .. } => "jump_imm",
            Op::Goto { .. } => "goto",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["jump", "goto", "other", "jump_imm", "goto", "jump", "goto", "jump", "goto"]);
}
